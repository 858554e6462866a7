package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/global"
)

// standaloneReady is what the ready line of `meridian standalone` says.
type standaloneReady struct{ serviceURL, webURL, etcd string }

func parseStandaloneReady(t *testing.T, line string) standaloneReady {
	t.Helper()
	// standalone ready: pulsar://H:P http://H:P etcd=URL[,URL] [pulsar+ssl://H:P https://H:P]
	f := strings.Fields(strings.TrimPrefix(line, "standalone ready:"))
	if len(f) < 3 || !strings.HasPrefix(f[0], "pulsar://") || !strings.HasPrefix(f[1], "http://") || !strings.HasPrefix(f[2], "etcd=") {
		t.Fatalf("unexpected ready line %q", line)
	}
	return standaloneReady{serviceURL: f[0], webURL: f[1], etcd: strings.TrimPrefix(f[2], "etcd=")}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newPulsarClient(t *testing.T, url string, opTimeout time.Duration) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:               url,
		OperationTimeout:  opTimeout,
		ConnectionTimeout: 5 * time.Second,
		Logger:            plog.NewLoggerWithSlog(quietLogger()),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// enableDedup turns deduplication on for public/default through the global
// store, then waits until the broker applies it. pulsar-client-go numbers a
// new producer's messages from the last sequence id the broker reports for
// its name, which is -1 unless deduplication is on; so once a probe's
// first message gets an id above 0, it is on.
func enableDedup(ctx context.Context, t *testing.T, store meta.Store, c pulsar.Client, topic string) {
	t.Helper()
	gs, err := global.NewStore(store, global.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	on := true
	if _, _, err := gs.UpdateNamespace(ctx, "public", "default", func(p *global.Policies) error {
		p.DeduplicationEnabled = &on
		return nil
	}); err != nil {
		t.Fatalf("enable deduplication: %v", err)
	}
	for {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "dedup-probe"})
		if err != nil {
			t.Fatalf("probe producer: %v", err)
		}
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("probe")}); err != nil {
			t.Fatalf("probe send: %v", err)
		}
		last := p.LastSequenceID()
		p.Close()
		if last > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("deduplication never took effect: %v", ctx.Err())
		case <-time.After(50 * time.Millisecond): // polling the broker's view; no event to wait on from outside
		}
	}
}

// history records what the producer and the consumer saw, by sequence id.
type history struct {
	mu       sync.Mutex
	acked    map[int64]bool      // send receipts received
	ackedAt  map[int64]time.Time // consumer acks confirmed by the broker (AckWithResponse)
	received map[int64]int       // deliveries per sequence id in the current run
}

func newHistory() *history {
	return &history{acked: map[int64]bool{}, ackedAt: map[int64]time.Time{}, received: map[int64]int{}}
}

func (h *history) count(m map[int64]bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(m)
}

// consume receives and acks until ctx ends or until every sequence id below
// n has been acked (n < 0: never), recording deliveries in received.
func (h *history) consume(ctx context.Context, t *testing.T, cons pulsar.Consumer, n int64, received map[int64]int) {
	for {
		m, err := cons.Receive(ctx)
		if err != nil {
			return
		}
		seq, err := strconv.ParseInt(string(m.Payload()), 10, 64)
		if err != nil {
			t.Errorf("payload %q is not a sequence id", m.Payload())
			return
		}
		h.mu.Lock()
		received[seq]++
		h.mu.Unlock()
		// pulsar-client-go's acknowledgement with response waits, with no
		// deadline, for the consumer's event loop, which is busy
		// reconnecting while the broker is dead: the wait ends with ctx,
		// and the ack's own goroutine with the client's Close.
		acked := make(chan error, 1)
		go func() { acked <- cons.Ack(m) }()
		select {
		case err = <-acked:
		case <-ctx.Done():
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				t.Logf("ack %d: %v", seq, err) // the broker died: it will come again
			}
			continue
		}
		h.mu.Lock()
		if _, ok := h.ackedAt[seq]; !ok {
			h.ackedAt[seq] = time.Now()
		}
		done := n >= 0 && int64(len(h.ackedAt)) >= n
		h.mu.Unlock()
		if done {
			return
		}
	}
}

// TestStandaloneCrashRestart runs `meridian standalone` as a process, with
// a deduplicating producer sending a numbered stream and a consumer acking
// it, kills it with SIGKILL mid-stream and restarts it on the same data
// directory and ports. A new client with the same producer name resends
// what was not acknowledged. Then: no acknowledged message is lost, the
// topic read from the start holds every sequence id exactly once, acked
// subscription positions survive (only acks of the last moments before the
// crash are redelivered: the cursor persist interval, 1s, plus a round
// trip), the restarted broker revoked its previous run's lease at once
// (stable broker id), and SIGTERM stops it with exit status 0.
func TestStandaloneCrashRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process crash test")
	}
	const (
		n            = 4000
		killAfter    = 2500 // acked sends before the SIGKILL: about 2.5s of sending
		topic        = "persistent://public/default/crash"
		producerName = "crash-producer"
		sub          = "crash-sub"
		// redeliveryWindow bounds how long before the crash an ack may have
		// been confirmed and still be redelivered: CursorPersistInterval
		// (1s) plus a store round trip and the time the kill takes, with
		// room for a loaded machine.
		redeliveryWindow = 3 * time.Second
	)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "meridian-crash-") // not t.TempDir: kept on failure
	if err != nil {
		t.Fatal(err)
	}
	// A failure keeps the data directory (the bookie's ledgers, etcd and
	// both runs' logs) for a look at what was stored; the processes are
	// killed first (their cleanups run before this one).
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("data directory kept: %s", dir)
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("remove %s: %v", dir, err)
		}
	})
	ports := freePorts(t, 2)
	args := []string{"standalone", "--data-dir", filepath.Join(dir, "data"),
		"--broker-listen", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--web-listen", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--advertised-address", "127.0.0.1", "--log-level", "info"}

	began := time.Now()
	p1 := startProcess(t, "standalone (run 1)", filepath.Join(dir, "run1.log"), args...)
	ready := parseStandaloneReady(t, p1.waitReady(ctx, t))
	t.Logf("run 1 ready in %v: %+v", time.Since(began).Round(time.Millisecond), ready)
	if want := fmt.Sprintf("pulsar://127.0.0.1:%d", ports[0]); ready.serviceURL != want {
		t.Fatalf("service URL %s, want %s", ready.serviceURL, want)
	}
	store := metatest.Dial(t, strings.Split(ready.etcd, ","))
	brokerKey := meta.RegionKey("standalone", "brokers", fmt.Sprintf("127.0.0.1:%d", ports[0]))
	kv, err := store.Get(ctx, brokerKey)
	if err != nil {
		t.Fatalf("broker registration %s: %v", brokerKey, err)
	}
	oldLease := kv.Lease
	store.Close()
	store = metatest.Dial(t, strings.Split(ready.etcd, ","))

	// Its operation timeout bounds how long Close waits on the dead broker.
	c1 := newPulsarClient(t, ready.serviceURL, 10*time.Second)
	phase := time.Now()
	enableDedup(ctx, t, store, c1, topic+"-probe")
	t.Logf("deduplication on after %v", time.Since(phase).Round(time.Millisecond))
	store.Close()

	// Run 1's producer and consumer never reconnect: pulsar-client-go's
	// Close during a reconnect (the broker is dead) marks them closed at
	// once, but the reconnect goes on, waits out the restart, registers
	// the producer with run 2 (and resends what it has pending) and never
	// closes it, so that run 2 refused this test's producer of the same
	// name with ProducerBusy (3 runs in about 80, "client closed in 1ms").
	noReconnect := new(uint(0))
	h := newHistory()
	run1Received := map[int64]int{}
	cons1, err := c1.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AckWithResponse: true, MaxReconnectToBroker: noReconnect})
	if err != nil {
		t.Fatal(err)
	}
	consCtx, stopCons := context.WithCancel(ctx)
	consDone := make(chan struct{})
	go func() { defer close(consDone); h.consume(consCtx, t, cons1, -1, run1Received) }()

	prod1, err := c1.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: producerName, SendTimeout: 10 * time.Second,
		MaxReconnectToBroker: noReconnect})
	if err != nil {
		t.Fatal(err)
	}
	sendAsync := func(p pulsar.Producer, seq int64, onAck func()) {
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(strconv.FormatInt(seq, 10)), SequenceID: &seq},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err == nil {
					h.mu.Lock()
					h.acked[seq] = true
					h.mu.Unlock()
					if onAck != nil {
						onAck()
					}
				}
			})
	}
	// Send at a steady pace (at most 1k msg/s) so that the crash finds
	// messages in flight and the stream outlasts the redelivery window,
	// and kill once killAfter are acknowledged.
	killNow := make(chan struct{})
	var killOnce sync.Once
	var sent1 int64
	tick := time.NewTicker(time.Millisecond)
	for sent1 = 0; sent1 < n; sent1++ {
		sendAsync(prod1, sent1, func() {
			if h.count(h.acked) >= killAfter {
				killOnce.Do(func() { close(killNow) })
			}
		})
		select {
		case <-killNow:
		case <-tick.C:
			continue
		}
		sent1++
		break
	}
	tick.Stop()
	// Keep a few more in flight for the kill to find.
	for end := sent1 + 50; sent1 < end; sent1++ {
		sendAsync(prod1, sent1, nil)
	}
	killedAt := time.Now()
	p1.kill(t)
	stopCons()
	<-consDone
	began = time.Now()
	c1.Close() // fails what is pending: those are "not acked" and will be resent
	t.Logf("killed run 1 after %d sends; client closed in %v", sent1, time.Since(began).Round(time.Millisecond))
	h.mu.Lock()
	acked1 := maps(h.acked)
	consumerAcked1 := len(h.ackedAt)
	h.mu.Unlock()
	var maxAcked int64 = -1
	for s := range acked1 {
		maxAcked = max(maxAcked, s)
	}
	t.Logf("run 1: %d sends, %d send receipts (highest %d), %d consumer acks", sent1, len(acked1), maxAcked, consumerAcked1)

	// Restart on the same directory and ports.
	began = time.Now()
	p2 := startProcess(t, "standalone (run 2)", filepath.Join(dir, "run2.log"), args...)
	ready2 := parseStandaloneReady(t, p2.waitReady(ctx, t))
	restartReady := time.Since(began)
	store = metatest.Dial(t, strings.Split(ready2.etcd, ","))
	defer store.Close()
	// The previous run's lease is gone at once, not after its TTL: etcd
	// renews leases to a full TTL when it restarts, so only a revoke can
	// have removed it this soon.
	ttl, err := store.Client().TimeToLive(ctx, clientv3.LeaseID(oldLease))
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL != -1 {
		t.Errorf("the killed run's broker lease %x still lives (TTL %ds) after the restart: not revoked", int64(oldLease), ttl.TTL)
	}
	if kv, err := store.Get(ctx, brokerKey); err != nil || kv.Lease == oldLease {
		t.Errorf("broker registration after the restart: %+v, %v", kv, err)
	}

	// Everything on c2 is closed before the broker stops: a Close against
	// a stopped broker waits out the operation timeout.
	c2 := newPulsarClient(t, ready2.serviceURL, 30*time.Second)
	defer c2.Close()
	prod2, err := c2.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: producerName})
	if err != nil {
		t.Fatal(err)
	}
	producerBack := time.Since(began)
	// Resend everything not acknowledged, in order, with the same ids
	// (dedup drops those stored before the crash), then finish the stream.
	resent := 0
	for seq := int64(0); seq < n; seq++ {
		if acked1[seq] {
			continue
		}
		if seq < sent1 {
			resent++
		}
		sendAsync(prod2, seq, nil)
	}
	if err := prod2.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.count(h.acked); got != n {
		t.Fatalf("%d of %d sends acknowledged after the restart", got, n)
	}
	t.Logf("restart: ready in %v, producer connected %v after the start; resent %d unacknowledged, all %d acknowledged %v after the start",
		restartReady.Round(time.Millisecond), producerBack.Round(time.Millisecond), resent, n, time.Since(began).Round(time.Millisecond))

	// The subscription resumes from its acked position.
	run2Received := map[int64]int{}
	cons2, err := c2.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Exclusive, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	phase = time.Now()
	h.consume(rctx, t, cons2, n, run2Received)
	rcancel()
	t.Logf("consumed the rest in %v", time.Since(phase).Round(time.Millisecond))
	h.mu.Lock()
	if len(h.ackedAt) != n {
		t.Errorf("consumer acked %d of %d sequence ids", len(h.ackedAt), n)
	}
	var redelivered []int64
	var oldest time.Duration
	for seq, k := range run2Received {
		if k > 1 {
			t.Errorf("sequence %d delivered %d times after the restart", seq, k)
		}
		if at, ok := h.ackedAt[seq]; ok && at.Before(killedAt) {
			redelivered = append(redelivered, seq)
			if age := killedAt.Sub(at); age > oldest {
				oldest = age
			}
			if age := killedAt.Sub(at); age > redeliveryWindow {
				t.Errorf("sequence %d was acked %v before the crash and delivered again (window %v)", seq, age.Round(time.Millisecond), redeliveryWindow)
			}
		}
	}
	for seq := range run1Received {
		if run1Received[seq] > 1 {
			t.Errorf("sequence %d delivered %d times before the crash", seq, run1Received[seq])
		}
	}
	h.mu.Unlock()
	slices.Sort(redelivered)
	t.Logf("subscription: %d acked before the crash, %d of them redelivered after it (acked at most %v before the kill)",
		consumerAcked1, len(redelivered), oldest.Round(time.Millisecond))

	// The topic read from the start holds every sequence id exactly once.
	reader, err := c2.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[int64]int{}
	phase = time.Now()
	for reader.HasNext() {
		m, err := reader.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.ProducerName() != producerName {
			continue
		}
		seq, _ := strconv.ParseInt(string(m.Payload()), 10, 64)
		stored[seq]++
	}
	dups := 0
	for seq := range int64(n) {
		switch stored[seq] {
		case 1:
		case 0:
			t.Errorf("sequence %d is not stored (acked before the crash: %v)", seq, acked1[seq])
		default:
			dups++
			t.Errorf("sequence %d stored %d times", seq, stored[seq])
		}
	}
	t.Logf("topic: %d distinct sequence ids stored, %d duplicates (read back in %v)", len(stored), dups, time.Since(phase).Round(time.Millisecond))

	reader.Close()
	cons2.Close()
	prod2.Close()
	c2.Close()
	began = time.Now()
	if err := p2.stop(t, time.Minute); err != nil {
		t.Fatalf("SIGTERM: %v (want exit status 0)", err)
	}
	t.Logf("SIGTERM: exited 0 in %v", time.Since(began).Round(time.Millisecond))
}

func maps(m map[int64]bool) map[int64]bool {
	out := make(map[int64]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestStandaloneProxyThroughServiceURL: behind a port mapping (the image's
// `bin/pulsar standalone`), the advertised address is one the client
// cannot reach; with --proxy-through-service-url its lookups send the
// client back through the service URL it was given, and a message goes
// through. Here the advertised host does not resolve at all.
func TestStandaloneProxyThroughServiceURL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone process")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ports := freePorts(t, 2)
	p := startProcess(t, "standalone", filepath.Join(dir, "standalone.log"), "standalone",
		"--data-dir", filepath.Join(dir, "data"),
		"--broker-listen", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--web-listen", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--advertised-address", "unreachable.invalid", "--proxy-through-service-url", "--log-level", "warn")
	p.waitReady(ctx, t)

	c := newPulsarClient(t, fmt.Sprintf("pulsar://127.0.0.1:%d", ports[0]), 10*time.Second)
	defer c.Close()
	const topic = "persistent://public/default/through-service-url"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatalf("subscribe through the service URL: %v", err)
	}
	defer cons.Close()
	prod, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatalf("producer through the service URL: %v", err)
	}
	defer prod.Close()
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload()) != "hello" {
		t.Fatalf("received %q, want hello", m.Payload())
	}
}
