package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// runClient runs `meridian args...` (produce or consume) through the root
// command and returns its stdout.
func runClient(ctx context.Context, args ...string) (string, error) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(expandMultiLetterShorthands(cmd, args))
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// TestExpandShorthands: -dr becomes --disable-replication wherever pflag
// would read it as a flag, and stays as it is where it is a flag's value
// or follows "--".
func TestExpandShorthands(t *testing.T) {
	root := newRootCommand()
	cases := []struct{ in, want []string }{
		{[]string{"-dr", "t"}, []string{"--disable-replication", "t"}},
		{[]string{"t", "-m", "x", "-dr"}, []string{"t", "-m", "x", "--disable-replication"}},
		{[]string{"-m", "-dr", "t"}, []string{"-m", "-dr", "t"}},
		{[]string{"--messages", "-dr", "t"}, []string{"--messages", "-dr", "t"}},
		{[]string{"--messages=-dr", "-dr"}, []string{"--messages=-dr", "--disable-replication"}},
		{[]string{"-m=-dr", "-dr"}, []string{"-m=-dr", "--disable-replication"}},
		// -kx: -k takes "x", so "-dr" after it is a flag again.
		{[]string{"-kx", "-dr"}, []string{"-kx", "--disable-replication"}},
		// -hk: -h takes no value, -k ends the group and takes the next.
		{[]string{"-hk", "-dr"}, []string{"-hk", "-dr"}},
		{[]string{"--disable-replication", "-dr"}, []string{"--disable-replication", "--disable-replication"}},
		{[]string{"-u", "pulsar://h:1", "-dr"}, []string{"-u", "pulsar://h:1", "--disable-replication"}},
		{[]string{"-zq", "-dr"}, []string{"-zq", "--disable-replication"}}, // unknown: pflag reports -z
		{[]string{"-dr=true", "t"}, []string{"-dr=true", "t"}},             // not pulsar-client's form: pflag rejects it
		{[]string{"--", "-dr"}, []string{"--", "-dr"}},
		{[]string{"-"}, []string{"-"}},
		{nil, []string{}},
	}
	for _, c := range cases {
		in, want := append([]string{"produce"}, c.in...), append([]string{"produce"}, c.want...)
		if got := expandMultiLetterShorthands(root, in); !slices.Equal(got, want) {
			t.Errorf("expandMultiLetterShorthands(%q) = %q, want %q", in, got, want)
		}
	}
}

// consumedRE is one message as consume prints it, for a message that was
// not replicated. The region's broker sends BrokerEntryMetadata, so the
// broker publish time is there.
var consumedRE = regexp.MustCompile(`(?m)^----- got message -----\nkey:\[(.*?)\], properties:\[(.*?)\], ` +
	`publish time:\[(` + timeRE + `)\], broker publish time:\[(` + timeRE + `)\], content:(.*)$`)

const timeRE = `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`

type consumed struct{ key, props, content string }

// parseConsumed returns the messages in consume's output, and fails the
// test unless it ends with the count of them.
func parseConsumed(t *testing.T, out string) []consumed {
	t.Helper()
	var msgs []consumed
	for _, m := range consumedRE.FindAllStringSubmatch(out, -1) {
		published, err1 := time.Parse(messageTimeLayout, m[3])
		stored, err2 := time.Parse(messageTimeLayout, m[4])
		switch {
		case err1 != nil || err2 != nil:
			t.Errorf("times %q, %q: %v, %v", m[3], m[4], err1, err2)
		case time.Since(published) > time.Hour || time.Until(published) > time.Minute:
			t.Errorf("publish time %s: not within the last hour", m[3])
		case stored.Before(published.Add(-time.Second)):
			t.Errorf("broker publish time %s before publish time %s", m[4], m[3])
		}
		msgs = append(msgs, consumed{m[1], m[2], m[5]})
	}
	if n := strings.Count(out, "----- got message -----"); n != len(msgs) {
		t.Errorf("%d messages printed, %d in the expected form:\n%s", n, len(msgs), out)
	}
	if want := fmt.Sprintf("%d messages successfully consumed\n", len(msgs)); !strings.HasSuffix(out, want) {
		t.Errorf("consume's output does not end with %q:\n%s", want, out)
	}
	return msgs
}

// checkProduced checks produce's output: one line with a message id per
// message, then the count.
func checkProduced(t *testing.T, out string, n int) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != n+1 || lines[n] != fmt.Sprintf("%d messages successfully produced", n) {
		t.Fatalf("produce printed %d lines, want %d and the count:\n%s", len(lines), n, out)
	}
	idRE := regexp.MustCompile(fmt.Sprintf(`^produced message (\d+) of %d: id \d+:\d+:-?\d+$`, n))
	for i, l := range lines[:n] {
		m := idRE.FindStringSubmatch(l)
		if m == nil || m[1] != fmt.Sprint(i+1) {
			t.Errorf("line %d of produce: %q, want message %d with its id", i+1, l, i+1)
		}
	}
}

// clientRegion starts a region for a test, unless -short skips the test,
// and returns the test's context and the region's service URL.
func clientRegion(t *testing.T) (context.Context, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a region")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx, startRegion(ctx, t).ServiceURL()
}

// TestProduceConsume produces three messages with a key and properties and
// consumes them from Earliest; acknowledged messages are not received
// again on the same subscription; -n, -dr and --replication-clusters
// produce what they say; every spelling of the service URL works.
func TestProduceConsume(t *testing.T) {
	ctx, url := clientRegion(t)
	topic := "persistent://public/default/cli"

	out, err := runClient(ctx, "produce", "--url", url, topic, "-m", "one", "-m", "two, with a comma", "-m", "three",
		"-k", "key-1", "-p", "b=2,a=1", "--properties", "c=x=y")
	if err != nil {
		t.Fatalf("produce: %v\n%s", err, out)
	}
	checkProduced(t, out, 3)

	out, err = runClient(ctx, "consume", "-u", url, "-s", "sub-1", "-p", "Earliest", "-n", "3", topic)
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, out)
	}
	want := []consumed{
		{"key-1", "a=1, b=2, c=x=y", "one"},
		{"key-1", "a=1, b=2, c=x=y", "two, with a comma"},
		{"key-1", "a=1, b=2, c=x=y", "three"},
	}
	if got := parseConsumed(t, out); !slices.Equal(got, want) {
		t.Errorf("consumed %+v, want %+v\n%s", got, want, out)
	}

	// -n repeats the messages; -dr keeps them in the region.
	out, err = runClient(ctx, "produce", "--service-url", url, "-n", "2", "-m", "again", "-dr", topic)
	if err != nil {
		t.Fatalf("produce -n 2 -dr: %v\n%s", err, out)
	}
	checkProduced(t, out, 2)
	// sub-1 acknowledged the first three: it receives the new two only.
	out, err = runClient(ctx, "consume", "--url", url, "--subscription-name", "sub-1", "--num-messages", "2", topic)
	if err != nil {
		t.Fatalf("consume again: %v\n%s", err, out)
	}
	want = []consumed{{"null", "", "again"}, {"null", "", "again"}}
	if got := parseConsumed(t, out); !slices.Equal(got, want) {
		t.Errorf("sub-1 consumed %+v after its acknowledgements, want %+v\n%s", got, want, out)
	}

	// --replication-clusters naming the region itself: stored here.
	out, err = runClient(ctx, "produce", "-u", url, "-m", "narrowed", "--replication-clusters", "standalone", topic)
	if err != nil {
		t.Fatalf("produce --replication-clusters: %v\n%s", err, out)
	}
	checkProduced(t, out, 1)

	out, err = runClient(ctx, "consume", "--url", url, "-s", "sub-2", "-t", "Key_Shared", "-p", "earliest", "-n", "6", topic)
	if err != nil {
		t.Fatalf("consume Key_Shared: %v\n%s", err, out)
	}
	if got := parseConsumed(t, out); len(got) != 6 || got[0].content != "one" || got[5].content != "narrowed" {
		t.Errorf("a Key_Shared subscription from Earliest consumed %+v\n%s", got, out)
	}

	// --listener-name reaches the broker's lookup: this broker has no
	// listener of that name, so no producer is made.
	if out, err := runClient(ctx, "produce", "-u", url, "--listener-name", "nosuch", "--operation-timeout", "2s", "-m", "x", topic); err == nil {
		t.Errorf("produce through a listener the broker lacks succeeded:\n%s", out)
	}
}

// TestConsumeSIGTERM runs consume -n 0 as a process: it prints what it
// receives, and on SIGTERM exits 0 with the count.
func TestConsumeSIGTERM(t *testing.T) {
	ctx, url := clientRegion(t)
	topic := "persistent://public/default/cli-sigterm"
	// The process's ready line is the one that prints this message.
	if out, err := runClient(ctx, "produce", "-u", url, "-m", "ready", topic); err != nil {
		t.Fatalf("produce: %v\n%s", err, out)
	}
	logPath := filepath.Join(t.TempDir(), "consume.log")
	p := startProcess(t, "consume", logPath, "consume", "-u", url, "-s", "watch", "-p", "Earliest", "-n", "0", topic)
	if line := p.waitReady(ctx, t); !strings.HasSuffix(line, "content:ready") {
		t.Fatalf("consume printed %q, want the message", line)
	}
	if err := p.stop(t, 30*time.Second); err != nil {
		t.Fatalf("SIGTERM: %v (want exit status 0)", err)
	}
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "\n1 messages successfully consumed\n") {
		t.Errorf("consume's output after SIGTERM does not count the one message:\n%s", log)
	}
}

// TestClientFlagErrors: bad input fails before anything connects, or, for
// a service URL where nothing listens, within the operation timeout, with
// a message that says what to fix.
func TestClientFlagErrors(t *testing.T) {
	nothing := fmt.Sprintf("pulsar://127.0.0.1:%d", freePorts(t, 1)[0])
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"produce", "-m", "x"}, "no topic"},
		{[]string{"produce", "-m", "x", "a", "b"}, "give exactly one"},
		{[]string{"produce", "t"}, "no message"},
		{[]string{"produce", "-m", "x", "-n", "0", "t"}, "--num-produce 0"},
		{[]string{"produce", "-m", "x", "-n", "two", "t"}, "invalid argument"},
		{[]string{"produce", "-m", "x", "-p", "novalue", "t"}, `--properties "novalue"`},
		{[]string{"produce", "-m", "x", "-p", "=v", "t"}, `--properties "=v"`},
		{[]string{"produce", "-m", "x", "-dr", "--replication-clusters", "a", "t"}, "contradict"},
		{[]string{"produce", "-m", "x", "--replication-clusters", "a,,b", "t"}, "empty region name"},
		{[]string{"produce", "-m", "x", "-dr=true", "t"}, "unknown shorthand flag: 'd'"},
		{[]string{"produce", "-m", "x", "--url", "http://localhost:8080", "t"}, "--url"},
		{[]string{"produce", "-m", "x", "--url", "pulsar://a:1", "-u", "pulsar://b:1", "t"}, "give one of them"},
		{[]string{"produce", "-m", "x", "--token", "x", "--token-file", "f", "t"}, "one way to authenticate"},
		{[]string{"produce", "-m", "x", "--operation-timeout", "0s", "t"}, "--operation-timeout"},
		{[]string{"produce", "-m", "x", "-u", nothing, "--operation-timeout", "1s", "t"}, "cannot create a producer"},
		{[]string{"consume", "t"}, `required flag(s) "subscription-name" not set`},
		{[]string{"consume", "-s", " ", "t"}, "want a subscription name"},
		{[]string{"consume", "-s", "s"}, "no topic"},
		{[]string{"consume", "-s", "s", "-t", "Roundrobin", "t"}, `unknown subscription type`},
		{[]string{"consume", "-s", "s", "-p", "middle", "t"}, "--subscription-position"},
		{[]string{"consume", "-s", "s", "-n", "-1", "t"}, "--num-messages -1"},
		{[]string{"consume", "-s", "s", "-q", "0", "t"}, "--queue-size 0"},
		{[]string{"consume", "-s", "s", "-dr", "t"}, "unknown shorthand flag"},
		{[]string{"consume", "-s", "s", "--tls-cert-file", "c", "t"}, "go together"},
		{[]string{"consume", "-s", "s", "-u", nothing, "--operation-timeout", "1s", "t"}, "cannot create a consumer"},
	}
	for _, c := range cases {
		began := time.Now()
		_, err := runClient(t.Context(), c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("meridian %s: %v, want an error with %q", strings.Join(c.args, " "), err, c.want)
		}
		if d := time.Since(began); d > 15*time.Second {
			t.Errorf("meridian %s took %v to fail", strings.Join(c.args, " "), d)
		}
	}
}

// TestProduceHelp: with flag parsing done by the command itself, -h and
// --help still print the help and run nothing.
func TestProduceHelp(t *testing.T) {
	for _, h := range []string{"-h", "--help"} {
		out, err := runClient(t.Context(), "produce", "-m", "x", h, "t")
		if err != nil || !strings.Contains(out, "-dr") || !strings.Contains(out, "--disable-replication") {
			t.Errorf("produce %s: %v\n%s", h, err, out)
		}
	}
}

// fakeMessage is a received message with the fields writeMessage reads;
// any other method panics (the embedded interface is nil).
type fakeMessage struct {
	pulsar.Message
	key, from       string
	props           map[string]string
	payload         string
	published       time.Time
	brokerPublished *time.Time
}

func (m fakeMessage) Key() string                   { return m.key }
func (m fakeMessage) Properties() map[string]string { return m.props }
func (m fakeMessage) Payload() []byte               { return []byte(m.payload) }
func (m fakeMessage) PublishTime() time.Time        { return m.published }
func (m fakeMessage) BrokerPublishTime() *time.Time { return m.brokerPublished }
func (m fakeMessage) GetReplicatedFrom() string     { return m.from }

// TestWriteMessage: pulsar-client's form, with the origin region and the
// broker publish time only when they are set, in UTC to the millisecond.
func TestWriteMessage(t *testing.T) {
	published := time.Date(2026, 1, 2, 16, 4, 5, 123_456_789, time.FixedZone("CET", 3600))
	stored := published.Add(2 * time.Millisecond)
	cases := []struct {
		msg  fakeMessage
		want string
	}{
		{fakeMessage{payload: "plain", published: published},
			"key:[null], properties:[], publish time:[2026-01-02T15:04:05.123Z], content:plain"},
		{fakeMessage{key: "k1", props: map[string]string{"z": "1", "a": "x=y", "m": ""}, payload: "two\nlines",
			published: published, brokerPublished: &stored, from: "us-east"},
			"key:[k1], properties:[a=x=y, m=, z=1], replicated from:[us-east], publish time:[2026-01-02T15:04:05.123Z], " +
				"broker publish time:[2026-01-02T15:04:05.125Z], content:two\nlines"},
		{fakeMessage{payload: "", brokerPublished: &time.Time{}},
			"key:[null], properties:[], content:"},
	}
	for _, c := range cases {
		var b strings.Builder
		writeMessage(&b, c.msg)
		if want := "----- got message -----\n" + c.want + "\n"; b.String() != want {
			t.Errorf("writeMessage:\n%q\nwant\n%q", b.String(), want)
		}
	}
}
