//go:build e2e

package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/meridian-mq/meridian/testkit"
)

// regions are the compose plane's regions, each with the variable that
// publishes its first broker's web port, and those that publish its
// brokers' Pulsar ports (their external listeners).
var regions = []struct {
	name, webPortVar string
	brokerPortVars   [2]string
}{
	{"us-east", "US_EAST_WEB_PORT", [2]string{"US_EAST_BROKER_1_PORT", "US_EAST_BROKER_2_PORT"}},
	{"eu-west", "EU_WEST_WEB_PORT", [2]string{"EU_WEST_BROKER_1_PORT", "EU_WEST_BROKER_2_PORT"}},
	{"ap-south", "AP_SOUTH_WEB_PORT", [2]string{"AP_SOUTH_BROKER_1_PORT", "AP_SOUTH_BROKER_2_PORT"}},
}

// plane is one run of deploy/compose/compose.yaml under podman-compose,
// as project `project`.
type plane struct {
	t        *testing.T
	project  string
	file     composeFile
	env      []string
	webPorts map[string]string // region -> 127.0.0.1:port
	// brokerPorts are each region's brokers' published Pulsar ports,
	// 127.0.0.1:port, which their external listeners name.
	brokerPorts map[string][2]string
}

// compose runs podman-compose on the committed file and returns its
// combined output (it prints the podman commands it runs). Version 1.0.3
// exits 0 even when a podman command it runs fails: callers check the
// outcome with podman.
func (p *plane) compose(ctx context.Context, args ...string) (string, error) {
	cmd := p.composeCommand(ctx, args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (p *plane) composeCommand(ctx context.Context, args ...string) *exec.Cmd {
	file, _ := filepath.Abs(filepath.Join(composeDir, "compose.yaml"))
	cmd := exec.CommandContext(ctx, "podman-compose", append([]string{"-p", p.project, "-f", file}, args...)...)
	cmd.Env = p.env
	return cmd
}

// container is the name podman-compose gives a service's container.
func (p *plane) container(service string) string { return p.project + "_" + service + "_1" }

// exec runs a command in a service's running container, as a user of the
// plane does with `podman-compose exec SERVICE meridian ...`, but with
// podman exec: podman-compose 1.0.3 exits 0 whatever the command's status
// (and prints the podman command lines it runs on the same stdout).
func (p *plane) exec(ctx context.Context, service string, args ...string) *exec.Cmd {
	return podmanCommandContext(ctx, append([]string{"exec", p.container(service)}, args...)...)
}

// TestComposePlane starts deploy/compose/compose.yaml with podman-compose
// (Debian's), as committed: the test chooses only the project name, the
// image tag (MERIDIAN_IMAGE) and the host ports, and starts the services
// without a profile (the monitoring profile's images cannot be pulled
// here; podman-compose 1.0.3 knows no profiles, so they are named). It
// waits until every health check of the file passes and both init steps
// have exited 0; a client on the host, naming the brokers' external
// listener, produces and consumes through their published ports
// (checkHostClient); produces 1,000 messages in us-east and, after the first
// 100, stops (SIGTERM, podman-compose stop) the us-east broker that owns
// the topic; the producer, run beside the other broker, must finish
// without an error; each region's subscription, created before the first
// message, must then deliver all 1,000 (eu-west and ap-south through
// replication, us-east through the broker left). Every container must be
// on its service's networks alone, and publish on 127.0.0.1 only.
// Everything the plane made (containers, networks, volumes) is removed,
// failed or not.
//
// The health checks are run with `podman exec`: podman-compose 1.0.3
// turns a health check into a /bin/sh command, which the scratch image
// cannot run, and podman runs checks from systemd timers, which this host
// (no systemd) does not have; the commands are the file's own.
//
//	cd e2e/deploy && flock /tmp/meridian-e2e.lock go test -mod=mod -tags e2e -count=1 -timeout 30m -run TestComposePlane -v ./...
func TestComposePlane(t *testing.T) {
	started := time.Now()
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	tag := buildImage(t, suffix)
	built := time.Now()

	conf, _ := filepath.Abs(filepath.Join(deployDir, "podman", "containers.conf"))
	p := &plane{t: t, project: "meridian-compose-" + suffix, file: loadCompose(t), webPorts: map[string]string{},
		brokerPorts: map[string][2]string{}, env: append(os.Environ(), "CONTAINERS_CONF="+conf, "MERIDIAN_IMAGE="+tag)}
	ports, err := testkit.FreePorts(3 * len(regions))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range regions {
		web, b1, b2 := ports[3*i], ports[3*i+1], ports[3*i+2]
		p.webPorts[r.name] = fmt.Sprintf("127.0.0.1:%d", web)
		p.brokerPorts[r.name] = [2]string{fmt.Sprintf("127.0.0.1:%d", b1), fmt.Sprintf("127.0.0.1:%d", b2)}
		p.env = append(p.env, fmt.Sprintf("%s=%d", r.webPortVar, web),
			fmt.Sprintf("%s=%d", r.brokerPortVars[0], b1), fmt.Sprintf("%s=%d", r.brokerPortVars[1], b2))
	}
	t.Cleanup(p.down)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	if out, err := p.compose(ctx, append([]string{"up", "-d"}, p.file.planeServices()...)...); err != nil {
		t.Fatalf("podman-compose up: %v\n%s", err, out)
	}
	up := time.Now()
	p.waitHealthy(ctx)
	healthy := time.Now()
	p.checkIsolation()
	p.checkHostClient(ctx, "persistent://public/default/host-"+suffix)

	const n = 1000
	topic := "persistent://public/default/compose-" + suffix
	owner := p.owner(topic)
	survivor := "us-east-broker-1"
	if owner == survivor {
		survivor = "us-east-broker-2"
	}
	t.Logf("%s is owned by %s; the clients in us-east run beside %s", topic, owner, survivor)

	// A subscription in each region before the first message, so that
	// each region keeps every message for it.
	consumers := map[string]string{"us-east": survivor, "eu-west": "eu-west-broker-1", "ap-south": "ap-south-broker-1"}
	for _, r := range regions {
		if out, err := p.exec(ctx, consumers[r.name], "meridian", "admin", "topics", "create-subscription", topic, "-s", "compose").CombinedOutput(); err != nil {
			t.Fatalf("create-subscription in %s: %v\n%s", r.name, err, out)
		}
	}

	args := []string{"meridian", "produce", topic}
	for i := range n {
		args = append(args, "-m", fmt.Sprintf("m-%04d", i))
	}
	producer := p.exec(ctx, survivor, args...)
	stdout, err := producer.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	producer.Stderr = &stderr
	if err := producer.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, n+10)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	produced, last := 0, ""
	next := func() bool {
		l, ok := <-lines
		if ok {
			last = l
			if strings.HasPrefix(l, "produced message ") {
				produced++
			}
		}
		return ok
	}
	for produced < 100 && next() {
	}
	if produced < 100 {
		t.Fatalf("the producer ended after %d messages: %v\n%s%s", produced, producer.Wait(), last, stderr.String())
	}
	stopStarted := time.Now()
	if out, err := p.compose(ctx, "stop", "-t", "60", owner); err != nil {
		t.Fatalf("podman-compose stop %s: %v\n%s", owner, err, out)
	}
	stopTook := time.Since(stopStarted)
	// Drain what the producer printed meanwhile (the channel is buffered
	// for all of it), to tell how far it was when the owner was gone.
	atStop := produced
	for len(lines) > 0 {
		next()
		atStop = produced
	}
	for next() {
	}
	if err := producer.Wait(); err != nil {
		t.Fatalf("the producer failed after %d messages, across the stop of %s: %v\n%s%s", produced, owner, err, last, stderr.String())
	}
	if want := fmt.Sprintf("%d messages successfully produced", n); last != want {
		t.Fatalf("the producer's last line %q, want %q", last, want)
	}
	t.Logf("%s stopped in %v, when %d of %d messages had been produced", owner, stopTook.Round(time.Millisecond), atStop, n)
	if atStop >= n {
		t.Errorf("the producer was done before %s had stopped: the stop was not under load", owner)
	}
	if state := podman(t, "inspect", p.container(owner), "--format", "{{.State.Status}} {{.State.ExitCode}}"); state != "exited 0" {
		t.Errorf("%s after its stop: %s, want exited 0", owner, state)
	}

	produceDone := time.Now()
	for _, r := range regions {
		p.consumeAll(ctx, r.name, consumers[r.name], topic, n)
	}
	t.Logf("image built in %v, plane up in %v, healthy %v later, %d messages produced across the stop in %v, consumed in every region in %v",
		built.Sub(started).Round(time.Second), up.Sub(built).Round(time.Second), healthy.Sub(up).Round(time.Second),
		n, produceDone.Sub(healthy).Round(time.Second), time.Since(produceDone).Round(time.Second))
}

// waitHealthy waits until every health check of the file passes in its
// service's container, and every init step (a service without one) has
// exited 0; a server container that exits fails the test at once.
func (p *plane) waitHealthy(ctx context.Context) {
	t := p.t
	pending := map[string]bool{}
	for _, s := range p.file.planeServices() {
		pending[s] = true
	}
	deadline := time.Now().Add(5 * time.Minute)
	for len(pending) > 0 {
		for _, s := range slices.Sorted(maps.Keys(pending)) {
			state := podman(t, "inspect", p.container(s), "--format", "{{.State.Status}} {{.State.ExitCode}}")
			check := p.file.Services[s].Healthcheck.Test
			if len(check) == 0 {
				if state == "exited 0" {
					delete(pending, s)
				}
				continue
			}
			if !strings.HasPrefix(state, "running") {
				t.Fatalf("%s is %s, not running", s, state)
			}
			// The file's check: [CMD meridian probe URL].
			if podmanCommand(append([]string{"exec", p.container(s)}, check[1:]...)...).Run() == nil {
				delete(pending, s)
			}
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("not healthy after 5 minutes: %v", slices.Sorted(maps.Keys(pending)))
		}
		// Each check is a podman exec, a process or two of its own: a
		// round a second keeps them from loading a 2-core machine while
		// the plane starts (testkit.WaitFor polls every 5 ms).
		time.Sleep(time.Second)
	}
	// What a user reaches from the host: each region's published web port.
	for _, r := range regions {
		testkit.WaitFor(t, r.name+"'s published /status.html", func() bool {
			resp, err := http.Get("http://" + p.webPorts[r.name] + "/status.html")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
}

// checkIsolation checks the network rules the file keeps: every container
// is on the networks the file gives its service, which podman-compose
// created for the project, and on no other; and every port it publishes
// is bound on 127.0.0.1.
func (p *plane) checkIsolation() {
	t := p.t
	for _, s := range p.file.planeServices() {
		var want []string
		for _, n := range p.file.Services[s].Networks {
			want = append(want, p.project+"_"+n)
		}
		slices.Sort(want)
		got := strings.Fields(podman(t, "inspect", p.container(s), "--format", "{{range $n, $_ := .NetworkSettings.Networks}}{{$n}} {{end}}"))
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s is on the networks %v, want %v", s, got, want)
		}
		for l := range strings.Lines(podman(t, "port", p.container(s))) {
			if _, hostAddr, _ := strings.Cut(strings.TrimSpace(l), " -> "); !strings.HasPrefix(hostAddr, "127.0.0.1:") {
				t.Errorf("%s publishes %q, not on 127.0.0.1 only", s, strings.TrimSpace(l))
			}
		}
	}
}

// checkHostClient is a client on the host, outside the plane's networks:
// with ListenerName "external" and a us-east broker's published port as
// its service URL, it is sent to the published port of the topic's owner,
// whichever broker that is, and produces and consumes there.
func (p *plane) checkHostClient(ctx context.Context, topic string) {
	t := p.t
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + p.brokerPorts["us-east"][0], ListenerName: "external",
		OperationTimeout: 30 * time.Second, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "host"})
	if err != nil {
		t.Fatalf("a host client's subscription through the external listener: %v", err)
	}
	defer cons.Close()
	prod, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatalf("a host client's producer through the external listener: %v", err)
	}
	defer prod.Close()
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("from the host")}); err != nil {
		t.Fatalf("a host client's send: %v", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	m, err := cons.Receive(rctx)
	if err != nil || string(m.Payload()) != "from the host" {
		t.Fatalf("a host client's receive: %v", err)
	}
}

// owner asks us-east, through its published web port, which broker serves
// topic (Pulsar's REST lookup, which also assigns it), and returns that
// broker's service name.
func (p *plane) owner(topic string) string {
	t := p.t
	path := strings.Replace(topic, "persistent://", "persistent/", 1)
	resp, err := http.Get("http://" + p.webPorts["us-east"] + "/lookup/v2/topic/" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct {
		BrokerURL string `json:"brokerUrl"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatalf("lookup of %s: %v", topic, err)
	}
	host, _, err := net.SplitHostPort(strings.TrimPrefix(l.BrokerURL, "pulsar://"))
	if err != nil || !strings.HasPrefix(host, "us-east-broker-") {
		t.Fatalf("lookup of %s answered %q, want a us-east broker", topic, l.BrokerURL)
	}
	return host
}

var contentRE = regexp.MustCompile(`content:(m-\d{4})$`)

// consumeAll receives n messages from the subscription `compose` in region
// (a consumer run beside service) and checks that they are m-0000 ...
// m-<n-1>, each once.
func (p *plane) consumeAll(ctx context.Context, region, service, topic string, n int) {
	t := p.t
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	out, err := p.exec(ctx, service, "meridian", "consume", topic, "-s", "compose", "-n", strconv.Itoa(n)).Output()
	seen := map[string]int{}
	for l := range strings.Lines(string(out)) {
		if m := contentRE.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			seen[m[1]]++
		}
	}
	var missing, repeated []string
	for i := range n {
		id := fmt.Sprintf("m-%04d", i)
		switch c := seen[id]; {
		case c == 0:
			missing = append(missing, id)
		case c > 1:
			repeated = append(repeated, id)
		}
	}
	if err != nil || len(missing) > 0 || len(repeated) > 0 {
		t.Errorf("%s: %d deliveries of %d messages (consumer: %v); missing %d %v; more than once %v",
			region, len(seen), n, err, len(missing), head(missing), head(repeated))
	}
}

func head(ids []string) []string { return ids[:min(len(ids), 10)] }

// down removes everything the plane made, failed or not: its containers
// and volumes (podman-compose down -v), then its networks, which
// podman-compose 1.0.3's down leaves. A failed test first logs the tail of
// every container's log.
func (p *plane) down() {
	t := p.t
	names := podman(t, "ps", "-a", "--filter", "label=io.podman.compose.project="+p.project, "--format", "{{.Names}}")
	if t.Failed() {
		for name := range strings.FieldsSeq(names) {
			logs, _ := podmanCommand("logs", "--tail", "20", name).CombinedOutput()
			t.Logf("--- %s ---\n%s", name, logs)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := p.compose(ctx, "down", "-v", "-t", "10"); err != nil {
		t.Errorf("podman-compose down: %v\n%s", err, out)
	}
	for n := range p.file.Networks {
		_ = podmanCommand("network", "rm", "-f", p.project+"_"+n).Run()
	}
	left := podman(t, "ps", "-a", "--filter", "label=io.podman.compose.project="+p.project, "--format", "{{.Names}}") +
		podman(t, "volume", "ls", "--filter", "label=io.podman.compose.project="+p.project, "--format", "{{.Name}}") +
		podman(t, "network", "ls", "--filter", "label=io.podman.compose.project="+p.project, "--format", "{{.Name}}")
	if left != "" {
		t.Errorf("left after down: %s", left)
	}
}
