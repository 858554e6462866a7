//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
)

// waitLogLine waits until m's log holds a line containing want after byte
// offset from (the start of the current run), and returns that line. The
// log is the only thing a process tells the harness, so this polls it.
func waitLogLine(ctx context.Context, t *testing.T, m *member, from int64, want string) string {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		b, _ := os.ReadFile(m.logPath)
		if int64(len(b)) > from {
			for _, line := range strings.Split(string(b[from:]), "\n") {
				if strings.Contains(line, want) {
					return line
				}
			}
		}
		select {
		case <-m.exited:
			t.Fatalf("%s exited (%v) before logging %q", m.name, m.exitErr, want)
		case <-ctx.Done():
			t.Fatalf("%s never logged %q: %v", m.name, want, ctx.Err())
		case <-tick.C:
		}
	}
}

func logSize(m *member) int64 {
	fi, err := os.Stat(m.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// key identifies one message of the workload: the producer's name and the
// message's number in that producer's stream (its payload).
type key struct {
	producer string
	n        int64
}

func (k key) String() string { return fmt.Sprintf("%s:%d", k.producer, k.n) }

func parseKey(payload []byte) (key, error) {
	p, n, ok := strings.Cut(string(payload), ":")
	if !ok {
		return key{}, fmt.Errorf("payload %q is not producer:n", payload)
	}
	i, err := strconv.ParseInt(n, 10, 64)
	return key{p, i}, err
}

// workloadHistory is everything the clients saw, with times, for the
// checker: every send and its receipt (or error), every delivery and the
// outcome of its ack.
type workloadHistory struct {
	mu         sync.Mutex
	sent       map[key]time.Time
	receipts   map[key]time.Time // send receipts: the broker has the message on Qa bookies
	sendErrors map[key]error
	deliveries []delivery
}

type delivery struct {
	key   key
	at    time.Time
	acked bool // the broker confirmed the ack (AckWithResponse)
	ackAt time.Time
}

func (h *workloadHistory) receiptCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.receipts)
}

// waitReceipts waits until at least n sends have receipts.
func (h *workloadHistory) waitReceipts(ctx context.Context, t *testing.T, n int, what string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for h.receiptCount() < n {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %d of %d send receipts: %v", what, h.receiptCount(), n, ctx.Err())
		case <-tick.C:
		}
	}
}

// maxGap is the longest wait between consecutive times in ts (sorted) whose
// later end falls in (from, to): how long the service paused after a fault
// at from.
func maxGap(ts []time.Time, from, to time.Time) time.Duration {
	var gap time.Duration
	for i := 1; i < len(ts); i++ {
		if ts[i].After(from) && ts[i].Before(to) && !ts[i-1].After(to) {
			gap = max(gap, ts[i].Sub(ts[i-1]))
		}
	}
	return gap
}

// TestRegionFaults runs a real region as separate processes (three
// `meridian etcd`, four `meridian bookie`, one `meridian broker` with
// E=3 Qw=3 Qa=2) under a pulsar-client-go workload with deduplication on:
// two producers with fixed names and a consumer that acks every message.
// The harness SIGKILLs a bookie of the topic's current ensemble, then later
// SIGKILLs the broker and restarts it. The checker then proves, over the
// recorded history:
//
//   - no acked message lost: every send with a receipt is stored (a reader
//     from the earliest position sees it) and was delivered to and acked by
//     the consumer;
//
//   - no duplicate stored: each (producer, n) is in the topic at most once;
//
//   - no duplicate delivered: after the broker confirmed the consumer's ack
//     of (producer, n), it is not delivered again, except once per broker
//     crash for acks confirmed within the redelivery window before that
//     crash (the cursor persist interval, 1s, plus a round trip: acks there
//     may not be persisted, and are redelivered, never lost; see
//     cluster/mledger's "What survives a crash"; the window is taken as 3s
//     for a loaded machine, and an ack the client recorded before the
//     restarted broker served was confirmed by the dead one). Redeliveries
//     of what was never acked are not duplicates;
//
//   - per-producer order: each producer's messages are stored, and first
//     delivered, in the order sent;
//
//   - the service resumed after each fault; the pause each caused (longest
//     gap between send receipts, and between deliveries) is reported.
//
//     go test -tags e2e -race -run TestRegionFaults -v ./e2e/
func TestRegionFaults(t *testing.T) {
	const (
		region           = "r1"
		topic            = "persistent://e2e/ns/faults"
		sub              = "checker"
		perPhase         = 600 // receipts between faults
		redeliveryWindow = 3 * time.Second
	)
	producers := []string{"e2e-p0", "e2e-p1"}
	dir := t.TempDir()
	began := time.Now()
	bin := buildMeridian(t, dir)
	t.Logf("built meridian in %v", time.Since(began).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()

	ports := freePorts(t, 6+4+2)
	var all []*member
	t.Cleanup(func() {
		for _, m := range all {
			m.kill(t)
		}
		if t.Failed() {
			for _, m := range all {
				out, _ := os.ReadFile(m.logPath)
				if len(out) > 20000 {
					out = out[len(out)-20000:]
				}
				t.Logf("--- %s log (tail) ---\n%s", m.name, out)
			}
		}
	})

	// Three etcd members.
	var cluster, clients []string
	for i := range 3 {
		cluster = append(cluster, fmt.Sprintf("m%d=http://127.0.0.1:%d", i+1, ports[2*i+1]))
		clients = append(clients, fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]))
	}
	var etcds []*member
	for i := range 3 {
		name := fmt.Sprintf("m%d", i+1)
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		m := &member{name: "etcd " + name, client: clients[i], logPath: filepath.Join(dir, name+".log"),
			args: []string{"etcd", "--name", name, "--data-dir", filepath.Join(dir, name),
				"--listen-client-urls", clients[i], "--advertise-client-urls", clients[i],
				"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
				"--initial-cluster", strings.Join(cluster, ","), "--initial-cluster-state", "new", "--log-level", "warn"}}
		etcds = append(etcds, m)
		all = append(all, m)
		m.start(t, bin)
	}
	store := waitDial(ctx, t, etcds[0])
	defer store.Close()
	etcdURLs := strings.Join(clients, ",")

	// Four bookies.
	bookies := map[string]*member{}
	for i := range 4 {
		id := fmt.Sprintf("bookie-%d", i)
		m := &member{name: id, logPath: filepath.Join(dir, id+".log"),
			args: []string{"bookie", "--region", region, "--etcd", etcdURLs, "--id", id,
				"--data-dir", filepath.Join(dir, id), "--listen", fmt.Sprintf("127.0.0.1:%d", ports[6+i]), "--log-level", "warn"}}
		bookies[id] = m
		all = append(all, m)
		m.start(t, bin)
	}
	for _, m := range bookies {
		waitLogLine(ctx, t, m, 0, "ready")
	}

	// One broker.
	brokerURL := fmt.Sprintf("pulsar://127.0.0.1:%d", ports[10])
	brk := &member{name: "broker", logPath: filepath.Join(dir, "broker.log"),
		args: []string{"broker", "--region", region, "--etcd", etcdURLs, "--advertised-address", "127.0.0.1",
			"--broker-listen", fmt.Sprintf("127.0.0.1:%d", ports[10]), "--web-listen", fmt.Sprintf("127.0.0.1:%d", ports[11]),
			"--ensemble-size", "3", "--write-quorum", "3", "--ack-quorum", "2", "--log-level", "warn"}}
	all = append(all, brk)
	brk.start(t, bin)
	line := waitLogLine(ctx, t, brk, 0, "ready")
	t.Logf("region up %v after the build: %s", time.Since(began).Round(time.Millisecond), strings.TrimSpace(line))

	// The broker created its cluster record; the operator's part is the
	// tenant and a namespace with deduplication on.
	gs, err := global.NewStore(store, global.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if c, err := gs.Cluster(ctx, region); err != nil || c.BrokerServiceURL != brokerURL {
		t.Fatalf("cluster record of %s: %+v, %v (want the broker's URL %s)", region, c, err, brokerURL)
	}
	if _, err := gs.CreateTenant(ctx, "e2e", global.TenantInfo{AllowedClusters: []string{region}}); err != nil {
		t.Fatal(err)
	}
	on := true
	if _, err := gs.CreateNamespace(ctx, "e2e", "ns", global.Policies{ReplicationClusters: []string{region}, DeduplicationEnabled: &on}); err != nil {
		t.Fatal(err)
	}

	logger := plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(io.Discard, nil)))
	newClient := func() pulsar.Client {
		c, err := pulsar.NewClient(pulsar.ClientOptions{URL: brokerURL, OperationTimeout: 30 * time.Second,
			ConnectionTimeout: 5 * time.Second, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	pc, cc := newClient(), newClient()
	waitDedup(ctx, t, pc, topic+"-probe")

	h := &workloadHistory{sent: map[key]time.Time{}, receipts: map[key]time.Time{}, sendErrors: map[key]error{}}
	cons, err := cc.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	consCtx, stopCons := context.WithCancel(ctx)
	defer stopCons()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			m, err := cons.Receive(consCtx)
			if err != nil {
				return
			}
			k, err := parseKey(m.Payload())
			if err != nil {
				t.Error(err)
				continue
			}
			d := delivery{key: k, at: time.Now()}
			if err := cons.Ack(m); err == nil {
				d.acked, d.ackAt = true, time.Now()
			}
			h.mu.Lock()
			h.deliveries = append(h.deliveries, d)
			h.mu.Unlock()
		}
	}()

	// Producers: fixed names, a steady 200 msg/s each; the client keeps
	// pending messages across reconnects and resends them with their
	// sequence ids, which the broker deduplicates.
	prodCtx, stopProd := context.WithCancel(ctx)
	defer stopProd()
	var pwg sync.WaitGroup
	var ps []pulsar.Producer
	for _, name := range producers {
		p, err := pc.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: name, SendTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ps = append(ps, p)
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for n := int64(0); ; n++ {
				select {
				case <-prodCtx.Done():
					return
				case <-tick.C:
				}
				k := key{name, n}
				h.mu.Lock()
				h.sent[k] = time.Now()
				h.mu.Unlock()
				p.SendAsync(prodCtx, &pulsar.ProducerMessage{Payload: []byte(k.String())},
					func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
						h.mu.Lock()
						defer h.mu.Unlock()
						if err != nil {
							h.sendErrors[k] = err
						} else {
							h.receipts[k] = time.Now()
						}
					})
			}
		}()
	}

	// Fault 1: SIGKILL a bookie of the topic's current ensemble.
	h.waitReceipts(ctx, t, perPhase, "before the bookie fault")
	ensemble := currentEnsemble(ctx, t, store, region, topic)
	victim := bookies[ensemble[0]]
	if victim == nil {
		t.Fatalf("ensemble %v names no bookie of ours", ensemble)
	}
	before := h.receiptCount()
	bookieFault := time.Now()
	victim.kill(t)
	t.Logf("fault 1: SIGKILLed %s of ensemble %v after %d receipts", victim.name, ensemble, before)
	h.waitReceipts(ctx, t, before+perPhase, "after the bookie fault")
	after := currentEnsemble(ctx, t, store, region, topic)
	t.Logf("after fault 1: %d receipts; the ensemble is now %v", h.receiptCount(), after)
	if slices.Contains(after, victim.name) {
		t.Errorf("the killed bookie %s is still in the ensemble new entries go to: %v", victim.name, after)
	}

	// Fault 2: SIGKILL the broker, then restart it on the same id.
	before = h.receiptCount()
	brokerFault := time.Now()
	brk.kill(t)
	from := logSize(brk)
	brk.start(t, bin)
	waitLogLine(ctx, t, brk, from, "ready")
	restarted := time.Since(brokerFault)
	t.Logf("fault 2: SIGKILLed the broker after %d receipts; restarted and serving in %v", before, restarted.Round(time.Millisecond))
	h.waitReceipts(ctx, t, before+perPhase, "after the broker fault")
	stopProd()
	pwg.Wait()
	end := time.Now()
	for _, p := range ps {
		if err := p.FlushWithCtx(ctx); err != nil {
			t.Logf("flush: %v", err)
		}
	}

	// Wait until the consumer has acked every message that has a receipt.
	h.mu.Lock()
	want := len(h.receipts)
	h.mu.Unlock()
	ackedKeys := func() map[key]bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		out := map[key]bool{}
		for _, d := range h.deliveries {
			if d.acked {
				out[d.key] = true
			}
		}
		return out
	}
	tick := time.NewTicker(50 * time.Millisecond)
	for {
		acked := ackedKeys()
		n := 0
		h.mu.Lock()
		for k := range h.receipts {
			if acked[k] {
				n++
			}
		}
		h.mu.Unlock()
		if n == want {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("consumer acked %d of %d messages with receipts: %v", n, want, ctx.Err())
		case <-tick.C:
		}
	}
	tick.Stop()
	stopCons()
	wg.Wait()

	// The topic from the start, through a reader.
	reader, err := cc.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var stored []key
	for reader.HasNext() {
		m, err := reader.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		k, err := parseKey(m.Payload())
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, k)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	r := check(h, stored, []crash{{brokerFault, brokerFault.Add(restarted)}}, redeliveryWindow)
	for _, e := range r.errors {
		t.Error(e)
	}
	var receiptTimes, deliveryTimes []time.Time
	for _, at := range h.receipts {
		receiptTimes = append(receiptTimes, at)
	}
	for _, d := range h.deliveries {
		deliveryTimes = append(deliveryTimes, d.at)
	}
	slices.SortFunc(receiptTimes, func(a, b time.Time) int { return a.Compare(b) })
	slices.SortFunc(deliveryTimes, func(a, b time.Time) int { return a.Compare(b) })
	t.Logf("history: %d sent, %d receipts, %d send errors, %d stored, %d deliveries (%d distinct), %d redelivered before any ack, %d redelivered within the window after an ack",
		len(h.sent), len(h.receipts), len(h.sendErrors), len(stored), len(h.deliveries), r.distinct, r.unackedRedeliveries, r.windowRedeliveries)
	t.Logf("pause after fault 1 (bookie SIGKILL): receipts %v, deliveries %v",
		maxGap(receiptTimes, bookieFault, brokerFault).Round(time.Millisecond), maxGap(deliveryTimes, bookieFault, brokerFault).Round(time.Millisecond))
	t.Logf("pause after fault 2 (broker SIGKILL + restart, serving again after %v): receipts %v, deliveries %v",
		restarted.Round(time.Millisecond), maxGap(receiptTimes, brokerFault, end).Round(time.Millisecond), maxGap(deliveryTimes, brokerFault, end).Round(time.Millisecond))
	for k, err := range h.sendErrors {
		t.Logf("send %s failed: %v", k, err)
		break
	}

	// SIGTERM stops the broker cleanly: exit status 0.
	stopped := time.Now()
	if err := brk.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-brk.exited:
		if brk.exitErr != nil {
			t.Errorf("broker exited with %v after SIGTERM", brk.exitErr)
		}
	case <-ctx.Done():
		t.Fatal("broker did not exit after SIGTERM")
	}
	t.Logf("broker exited %v after SIGTERM", time.Since(stopped).Round(time.Millisecond))
}

// TestCheck shows that the checker catches each violation it is for, and
// excuses only what the crash window allows.
func TestCheck(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	a0, a1, b0 := key{"a", 0}, key{"a", 1}, key{"b", 0}
	base := func() *workloadHistory {
		return &workloadHistory{
			sent:     map[key]time.Time{a0: at(0), a1: at(1), b0: at(2)},
			receipts: map[key]time.Time{a0: at(10), a1: at(11), b0: at(12)},
		}
	}
	acked := func(k key, ms int) delivery { return delivery{key: k, at: at(ms), acked: true, ackAt: at(ms + 1)} }
	c := crash{at(1000), at(1050)}
	for _, tc := range []struct {
		name       string
		stored     []key
		deliveries []delivery
		wantErr    string // "" for a clean history
		window     int
	}{
		{"clean", []key{a0, b0, a1}, []delivery{acked(a0, 20), acked(b0, 21), acked(a1, 22)}, "", 0},
		{"lost in the topic", []key{a0, b0}, []delivery{acked(a0, 20), acked(b0, 21), acked(a1, 22)}, "lost: a:1 has a receipt but is not in the topic", 0},
		{"never acked", []key{a0, b0, a1}, []delivery{acked(a0, 20), acked(b0, 21), {key: a1, at: at(22)}}, "lost: a:1 has a receipt but the consumer never acked it", 0},
		{"stored twice", []key{a0, b0, a1, a1}, []delivery{acked(a0, 20), acked(b0, 21), acked(a1, 22)}, "duplicate stored: a:1", 0},
		{"stored out of order", []key{a1, b0, a0}, []delivery{acked(a1, 20), acked(b0, 21), acked(a0, 22)}, "order: a:0 stored after a:1", 0},
		{"delivered again after an ack", []key{a0, b0, a1}, []delivery{acked(a0, 20), acked(b0, 21), acked(a1, 22), acked(a0, 30)}, "duplicate delivered: a:0", 0},
		{"redelivered before any ack", []key{a0, b0, a1}, []delivery{{key: a0, at: at(20)}, acked(a0, 21), acked(b0, 22), acked(a1, 23)}, "", 0},
		{"redelivered within the crash window", []key{a0, b0, a1}, []delivery{acked(a0, 20), acked(b0, 21), acked(a1, 900), acked(a1, 1100)}, "", 1},
		{"ack recorded during the crash", []key{a0, b0, a1}, []delivery{acked(a0, 20), acked(b0, 21), acked(a1, 1020), acked(a1, 1100)}, "", 1},
		{"acked by the restarted broker", []key{a0, b0, a1}, []delivery{acked(a0, 20), acked(b0, 21), acked(a1, 1060), acked(a1, 1100)}, "duplicate delivered: a:1", 0},
		{"acked long before the crash", []key{a0, b0, a1}, []delivery{acked(a0, 20), acked(b0, 21), acked(a1, 22), acked(a0, 1100)}, "duplicate delivered: a:0", 0},
	} {
		h := base()
		h.deliveries = tc.deliveries
		r := check(h, tc.stored, []crash{c}, 500*time.Millisecond)
		got := strings.Join(r.errors, "; ")
		switch {
		case tc.wantErr == "" && got != "":
			t.Errorf("%s: unexpected %s", tc.name, got)
		case tc.wantErr != "" && !strings.Contains(got, tc.wantErr):
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.wantErr)
		case r.windowRedeliveries != tc.window:
			t.Errorf("%s: %d window redeliveries, want %d", tc.name, r.windowRedeliveries, tc.window)
		}
	}
}

// checkResult is what check found.
type checkResult struct {
	errors              []string
	distinct            int
	unackedRedeliveries int
	windowRedeliveries  int
}

// crash is a broker crash: from the SIGKILL to the restarted broker's
// ready line. The client records an ack's confirmation a little after it
// arrives, so an ack recorded before end (the dead broker's successor
// served nothing yet) was confirmed by the dead broker, before start.
type crash struct{ start, end time.Time }

// check proves the properties listed on TestRegionFaults over a history
// and the topic's stored messages, in order.
func check(h *workloadHistory, stored []key, crashes []crash, window time.Duration) checkResult {
	var r checkResult
	fail := func(format string, args ...any) {
		if len(r.errors) < 20 {
			r.errors = append(r.errors, fmt.Sprintf(format, args...))
		}
	}
	// Stored: at most once each, in order per producer, and everything
	// with a receipt.
	inTopic := map[key]int{}
	lastStored := map[string]int64{}
	for _, k := range stored {
		inTopic[k]++
		if inTopic[k] == 2 {
			fail("duplicate stored: %s", k)
		}
		if last, ok := lastStored[k.producer]; ok && k.n <= last && inTopic[k] == 1 {
			fail("order: %s stored after %s:%d", k, k.producer, last)
		}
		lastStored[k.producer] = max(lastStored[k.producer], k.n)
		if _, ok := h.sent[k]; !ok {
			fail("stored %s was never sent", k)
		}
	}
	for k := range h.receipts {
		if inTopic[k] == 0 {
			fail("lost: %s has a receipt but is not in the topic", k)
		}
	}
	// Delivered: first deliveries in order per producer; no delivery after
	// a confirmed ack, except once after a broker crash for acks within the
	// window before it.
	firstAck := map[key]time.Time{}
	delivered := map[key]bool{}
	lastFirst := map[string]int64{}
	windowUsed := map[key]int{}
	for _, d := range h.deliveries {
		if !delivered[d.key] {
			delivered[d.key] = true
			if last, ok := lastFirst[d.key.producer]; ok && d.key.n <= last {
				fail("order: %s first delivered after %s:%d", d.key, d.key.producer, last)
			}
			lastFirst[d.key.producer] = d.key.n
		} else if ackAt, ok := firstAck[d.key]; ok {
			excused := false
			for _, c := range crashes {
				if ackAt.Before(c.end) && c.start.Sub(ackAt) <= window && d.at.After(c.start) && windowUsed[d.key] < len(crashes) {
					excused = true
				}
			}
			if excused {
				windowUsed[d.key]++
				r.windowRedeliveries++
			} else {
				fail("duplicate delivered: %s at %v, acked at %v", d.key, d.at.Format("15:04:05.000"), ackAt.Format("15:04:05.000"))
			}
		} else {
			r.unackedRedeliveries++
		}
		if _, ok := inTopic[d.key]; !ok {
			fail("delivered %s is not in the topic", d.key)
		}
		if d.acked {
			if _, ok := firstAck[d.key]; !ok {
				firstAck[d.key] = d.ackAt
			}
		}
	}
	for k := range h.receipts {
		if _, ok := firstAck[k]; !ok {
			fail("lost: %s has a receipt but the consumer never acked it", k)
		}
	}
	r.distinct = len(delivered)
	return r
}

// waitDedup waits until the broker has applied the namespace's
// deduplication policy: a new producer is numbered from the last sequence
// id the broker reports for its name, -1 unless deduplication is on, so
// once a probe's first message gets an id above 0 it is on. Creating the
// probe also waits for the broker to see the new namespace.
func waitDedup(ctx context.Context, t *testing.T, c pulsar.Client, topic string) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "dedup-probe"})
		if err == nil {
			_, err = p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("probe")})
			last := p.LastSequenceID()
			p.Close()
			if err == nil && last > 0 {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("deduplication never took effect (last error %v): %v", err, ctx.Err())
		case <-tick.C:
		}
	}
}

// currentEnsemble returns the bookies new entries of topic go to: the last
// ensemble of the last ledger in its managed-ledger record.
func currentEnsemble(ctx context.Context, t *testing.T, store meta.Store, region, topic string) []string {
	t.Helper()
	kvs, _, err := store.List(ctx, meta.Prefix(meta.RegionKey(region, "mledgers")))
	if err != nil {
		t.Fatal(err)
	}
	local := topic[strings.LastIndex(topic, "/")+1:]
	for _, kv := range kvs {
		if !strings.HasSuffix(kv.Key, local) {
			continue
		}
		var ml struct {
			Ledgers []struct {
				ID int64 `json:"id"`
			} `json:"ledgers"`
		}
		if err := json.Unmarshal(kv.Value, &ml); err != nil || len(ml.Ledgers) == 0 {
			t.Fatalf("managed ledger %s: %s (%v)", kv.Key, kv.Value, err)
		}
		lkv, err := store.Get(ctx, ledger.LedgerKey(region, ml.Ledgers[len(ml.Ledgers)-1].ID))
		if err != nil {
			t.Fatal(err)
		}
		var md ledger.Metadata
		if err := json.Unmarshal(lkv.Value, &md); err != nil {
			t.Fatal(err)
		}
		return md.LastEnsemble()
	}
	t.Fatalf("no managed ledger for %s among %d", topic, len(kvs))
	return nil
}
