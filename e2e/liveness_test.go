//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// The liveness cases of issue 13: a frozen consumer, half a frame and a
// slow reader, each against one broker whose keep-alive interval is
// livenessKeepAlive (so its write deadline is the same). They log their
// timing figures. Run them with
//
//	go test -tags e2e -run 'TestFrozenConsumer|TestHalfAFrame|TestSlowReader' -v ./e2e/

// livenessKeepAlive is the brokers' keepAliveIntervalSeconds here: the
// write deadline, and half the silence bound.
const livenessKeepAlive = 2 * time.Second

// disconnectBound is the documented bound on finding a peer that stopped:
// two keep-alive intervals of silence, found at the next keep-alive tick;
// a stalled write is found sooner (one interval). The slack covers a
// loaded machine.
const disconnectBound = 3*livenessKeepAlive + 3*time.Second

// livenessNamespace is the namespace of the tests' topics.
const livenessNamespace = "persistent://live/ns/"

// startLivenessBed runs one region of one etcd, one bookie and one broker,
// with tenant live and namespace live/ns, and returns the broker and a
// client of it that has seen the namespace.
func startLivenessBed(t *testing.T, ctx context.Context) (*Broker, pulsar.Client) {
	b := startOneBroker(ctx, t, oneBroker{BrokerConf: fmt.Sprintf("keepAliveIntervalSeconds=%d\n", int(livenessKeepAlive/time.Second)),
		Tenant: "live", LocalClients: true, LogLevel: "info"})
	c := NewClient(t, b.ServiceURL())
	waitProducer(ctx, t, c, livenessNamespace+"probe")
	return b, c
}

// subStats is the part of the admin API's topic stats these tests read.
type subStats struct {
	MsgBacklog int64 `json:"msgBacklog"`
	Consumers  []struct {
		ConsumerName  string `json:"consumerName"`
		MsgOutCounter int64  `json:"msgOutCounter"`
	} `json:"consumers"`
}

// subscriptionStats reads one subscription's stats from the broker's admin API.
func subscriptionStats(ctx context.Context, b *Broker, topic, sub string) (subStats, error) {
	url := b.WebURL() + "/admin/v2/" + strings.Replace(topic, "://", "/", 1) + "/stats"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return subStats{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return subStats{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return subStats{}, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	var st struct {
		Subscriptions map[string]subStats `json:"subscriptions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return subStats{}, err
	}
	return st.Subscriptions[sub], nil
}

// waitStats polls a subscription's stats until cond holds.
func waitStats(t *testing.T, ctx context.Context, b *Broker, topic, sub, what string, cond func(subStats) bool) {
	t.Helper()
	for {
		st, err := subscriptionStats(ctx, b, topic, sub)
		if err == nil && cond(st) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v (last stats %+v, %v)", what, ctx.Err(), st, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startConsumeChild runs `meridian consume` in a child process, printing to
// nowhere, and returns its PID. It is SIGKILLed at the end of the test.
func startConsumeChild(t *testing.T, url, topic, sub, subType string) int {
	t.Helper()
	cmd := exec.Command(meridianBin, "consume", topic, "--url", url, "-s", sub, "-t", subType,
		"-p", "Earliest", "-n", "0", "-q", "1000")
	logf, err := os.Create(filepath.Join(t.TempDir(), "consume.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL)
		cmd.Wait()
		logf.Close()
	})
	return pid
}

// waitProcessStopped waits until every thread of pid is stopped.
func waitProcessStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		stopped := len(tasks) > 0
		for _, task := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
			if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) == 0 || f[0] != "T" {
				stopped = false
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not stop", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// receipt is one message a consumer got.
type receipt struct {
	at  time.Time
	seq int
	key string
}

func payloadSeq(b []byte) int {
	n, _ := strconv.Atoi(string(b[:max(0, slices.Index(b, '|'))]))
	return n
}

// TestFrozenConsumer: a pulsar-client-go consumer in a child process
// (`meridian consume`, receiver queue 1,000) shares a subscription with the
// test's consumer and is stopped with SIGSTOP while 64 KiB messages flow.
// The live consumer keeps receiving with no gap over 1 s; the frozen one
// is disconnected within the bound and its messages reach the live one
// (for Key_Shared, its keys follow in per-key order); an admin unload
// returns within 10 s, and SIGTERM stops the broker.
func TestFrozenConsumer(t *testing.T) {
	for _, kind := range []pulsar.SubscriptionType{pulsar.Shared, pulsar.KeyShared} {
		name := map[pulsar.SubscriptionType]string{pulsar.Shared: "Shared", pulsar.KeyShared: "Key_Shared"}[kind]
		t.Run(name, func(t *testing.T) { testFrozenConsumer(t, kind, name) })
	}
}

func testFrozenConsumer(t *testing.T, kind pulsar.SubscriptionType, kindName string) {
	const (
		messages = 2000
		size     = 64 << 10
		rate     = 100 // messages per second: the run outlasts the disconnect
		keys     = 16
	)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	b, c := startLivenessBed(t, ctx)
	topic := livenessNamespace + "frozen-" + strings.ToLower(kindName)
	live, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: kind, Name: "live",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReceiverQueueSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	child := startConsumeChild(t, b.ServiceURL(), topic, "s", kindName)
	waitStats(t, ctx, b, topic, "s", "the child consumer", func(st subStats) bool { return len(st.Consumers) == 2 })

	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	published := make(chan error, 1)
	go func() {
		pace := newPacer(clockwork.NewRealClock(), time.Second/rate)
		defer pace.stop()
		errs := make(chan error, messages)
		for i := range messages {
			if !pace.wait(ctx) {
				break
			}
			payload := make([]byte, size)
			copy(payload, strconv.Itoa(i)+"|")
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload, Key: fmt.Sprint("k", i%keys)},
				func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { errs <- err })
		}
		for range messages {
			if err := <-errs; err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()

	var mu sync.Mutex
	var got []receipt
	received := make(chan struct{})
	recvCtx, stopReceiving := context.WithCancel(ctx)
	defer stopReceiving()
	go func() {
		defer close(received)
		for {
			m, err := live.Receive(recvCtx)
			if err != nil {
				return
			}
			mu.Lock()
			got = append(got, receipt{at: time.Now(), seq: payloadSeq(m.Payload()), key: m.Key()})
			mu.Unlock()
			live.Ack(m)
		}
	}()

	// Freeze the child once it is receiving.
	waitStats(t, ctx, b, topic, "s", "the child receiving", func(st subStats) bool {
		for _, cs := range st.Consumers {
			if cs.ConsumerName != "live" && cs.MsgOutCounter >= 50 {
				return true
			}
		}
		return false
	})
	if err := syscall.Kill(child, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitProcessStopped(t, child)
	stopped := time.Now()
	waitStats(t, ctx, b, topic, "s", "the frozen consumer's disconnection", func(st subStats) bool { return len(st.Consumers) == 1 })
	disconnected := time.Since(stopped)
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	waitStats(t, ctx, b, topic, "s", "an empty backlog", func(st subStats) bool { return st.MsgBacklog == 0 })
	drained := time.Since(stopped)

	mu.Lock()
	rs := slices.Clone(got)
	mu.Unlock()
	times := make([]time.Time, len(rs))
	for i, r := range rs {
		times[i] = r.at
	}
	gap := maxGap(times, stopped, time.Now())
	t.Logf("%s: frozen consumer disconnected %v after SIGSTOP (bound %v); backlog empty %v after SIGSTOP (the producer runs %v); live consumer got %d messages, longest gap after the stop %v",
		kindName, disconnected.Round(time.Millisecond), disconnectBound, drained.Round(time.Millisecond), messages/rate*time.Second,
		len(rs), gap.Round(time.Millisecond))
	if disconnected > disconnectBound {
		t.Errorf("frozen consumer disconnected after %v, bound %v", disconnected, disconnectBound)
	}
	if gap > time.Second {
		t.Errorf("the live consumer waited %v between two messages while the other was frozen", gap)
	}
	if kind == pulsar.KeyShared {
		last := map[string]int{}
		for _, r := range rs {
			if prev, ok := last[r.key]; ok && r.seq < prev {
				t.Errorf("key %s: message %d after %d", r.key, r.seq, prev)
			}
			last[r.key] = r.seq
		}
	}

	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut,
		b.WebURL()+"/admin/v2/"+strings.Replace(topic, "://", "/", 1)+"/unload", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	unload := time.Since(start)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("unload: %s", resp.Status)
	}
	stopReceiving()
	<-received
	live.Close()
	c.Close()
	start = time.Now()
	b.Terminate()
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	err = b.Wait(wctx)
	stop := time.Since(start)
	t.Logf("%s: admin unload took %v with the consumer still stopped; SIGTERM stopped the broker in %v (%v)",
		kindName, unload.Round(time.Millisecond), stop.Round(time.Millisecond), err)
	if unload > 10*time.Second {
		t.Errorf("unload took %v, want under 10s", unload)
	}
	if stop > 20*time.Second {
		t.Errorf("SIGTERM took %v to stop the broker, want under 20s", stop)
	}
}

// rawConn is a hand-made protocol client on a socket with a small receive
// buffer.
type rawConn struct {
	nc net.Conn
	mu sync.Mutex // serialises writes
}

func dialRawConn(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if err := nc.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	return &rawConn{nc: nc}
}

func (c *rawConn) write(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := c.nc.Write(b)
	return err
}

func (c *rawConn) send(cmd *pb.BaseCommand) error {
	b, err := wire.AppendCommand(nil, cmd)
	if err != nil {
		return err
	}
	return c.write(b)
}

// request sends cmd and reads frames until one of type want arrives.
func (c *rawConn) request(t *testing.T, r *wire.Reader, cmd *pb.BaseCommand, want pb.BaseCommand_Type) {
	t.Helper()
	if err := c.send(cmd); err != nil {
		t.Fatal(err)
	}
	c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	defer c.nc.SetReadDeadline(time.Time{})
	for {
		var f wire.Frame
		if err := r.ReadFrame(&f); err != nil {
			t.Fatalf("waiting for %v: %v", want, err)
		}
		switch f.Command.GetType() {
		case want:
			return
		case pb.BaseCommand_PING:
			c.send(pongCommand())
		case pb.BaseCommand_ERROR:
			t.Fatalf("waiting for %v: %v", want, f.Command)
		}
	}
}

// TestHalfAFrame: a raw producer that sends half a SEND frame and stops
// holds up no other producer of the topic, and is disconnected within the
// bound.
func TestHalfAFrame(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	b, c := startLivenessBed(t, ctx)
	topic := livenessNamespace + "half-frame"

	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	rc := dialRawConn(t, b.DirectAddr)
	r := wire.NewReader(rc.nc, 0)
	rc.request(t, r, connectCommand(), pb.BaseCommand_CONNECTED)
	rc.request(t, r, pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
		Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)}.Build()}.Build(),
		pb.BaseCommand_PRODUCER_SUCCESS)
	msg, err := wire.AppendMessage(nil, pb.MessageMetadata_builder{ProducerName: proto.String("half"), SequenceId: proto.Uint64(0),
		PublishTime: proto.Uint64(uint64(time.Now().UnixMilli()))}.Build(), make([]byte, 16<<10))
	if err != nil {
		t.Fatal(err)
	}
	frame, err := wire.AppendPayloadCommand(nil, pb.BaseCommand_builder{Type: pb.BaseCommand_SEND.Enum(), Send: pb.CommandSend_builder{
		ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(0), NumMessages: proto.Int32(1)}.Build()}.Build(), nil, msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.write(frame[:len(frame)/2]); err != nil {
		t.Fatal(err)
	}
	halfSent := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		rc.nc.SetReadDeadline(time.Now().Add(time.Minute))
		io.Copy(io.Discard, rc.nc)
		closed <- time.Since(halfSent)
	}()

	const n = 200
	var slowest time.Duration
	for i := range n {
		start := time.Now()
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Append(nil, i)}); err != nil {
			t.Fatalf("send %d beside the half frame: %v", i, err)
		}
		slowest = max(slowest, time.Since(start))
	}
	for i := range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
		cons.Ack(m)
	}
	var after time.Duration
	select {
	case after = <-closed:
	case <-ctx.Done():
		t.Fatal("the half-frame producer was never disconnected")
	}
	t.Logf("half a frame: %d sends beside it, slowest %v; the half-frame producer disconnected %v after its half frame (bound %v)",
		n, slowest.Round(time.Millisecond), after.Round(time.Millisecond), disconnectBound)
	if after > disconnectBound {
		t.Errorf("half-frame producer disconnected after %v, bound %v", after, disconnectBound)
	}
	if slowest > time.Second {
		t.Errorf("a send beside the half frame took %v", slowest)
	}
}

// slowReader reads at most 1 KiB a second from r.
type slowReader struct {
	r    io.Reader
	next time.Time
}

func (s *slowReader) Read(p []byte) (int, error) {
	if d := time.Until(s.next); d > 0 {
		time.Sleep(d) // the pace of the slow client, not a wait for a condition
	}
	s.next = time.Now().Add(time.Second)
	return s.r.Read(p[:min(len(p), 1<<10)])
}

// TestSlowReader: a raw consumer that answers every PING (and pings
// itself) but reads only 1 KiB/s is disconnected by the write deadline,
// while 100 other consumers on the broker see no gap over 1 s and a rate
// within 10% of the run's baseline.
func TestSlowReader(t *testing.T) {
	const (
		bystanders = 100
		rate       = 50 // messages per second, to each bystander
		window     = 10 * time.Second
	)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	b, c := startLivenessBed(t, ctx)

	// The slow reader's topic, with a backlog far larger than its socket.
	slowTopic := livenessNamespace + "slow-reader"
	sp, err := c.CreateProducer(pulsar.ProducerOptions{Topic: slowTopic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	for i := range 100 {
		if _, err := sp.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 64<<10)}); err != nil {
			t.Fatalf("backlog %d: %v", i, err)
		}
	}

	// The bystanders: one subscription each on one topic fed at rate.
	topic := livenessNamespace + "bystanders"
	var consumers []pulsar.Consumer
	for i := range bystanders {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: fmt.Sprint("s", i)})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		consumers = append(consumers, cons)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	feedCtx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	wg.Go(func() {
		pace := newPacer(clockwork.NewRealClock(), time.Second/rate)
		defer pace.stop()
		for pace.wait(feedCtx) {
			p.SendAsync(feedCtx, &pulsar.ProducerMessage{Payload: make([]byte, 1<<10)}, func(pulsar.MessageID, *pulsar.ProducerMessage, error) {})
		}
	})
	receipts := make([][]time.Time, bystanders)
	var mu sync.Mutex
	for i, cons := range consumers {
		wg.Go(func() {
			for {
				m, err := cons.Receive(feedCtx)
				if err != nil {
					return
				}
				mu.Lock()
				receipts[i] = append(receipts[i], time.Now())
				mu.Unlock()
				cons.Ack(m)
			}
		})
	}
	// stats counts each bystander's receipts in [from, to) and its longest gap.
	stats := func(from, to time.Time) (counts []int, gap time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range receipts {
			n := 0
			for _, at := range rs {
				if !at.Before(from) && at.Before(to) {
					n++
				}
			}
			counts = append(counts, n)
			gap = max(gap, maxGap(rs, from, to))
		}
		return counts, gap
	}

	warm := time.Now().Add(2 * time.Second)
	for time.Now().Before(warm.Add(window)) {
		time.Sleep(100 * time.Millisecond)
	}
	baseFrom := warm
	baseTo := warm.Add(window)

	// The slow reader.
	logFrom := b.LogSize()
	rc := dialRawConn(t, b.DirectAddr)
	defer rc.nc.Close() // before wg.Wait: ends the slow reader's goroutine
	// One reader, paced from the start: a reader of its own for the
	// handshake could read ahead what the slow one must read.
	r := wire.NewReader(&slowReader{r: rc.nc}, 0)
	rc.request(t, r, connectCommand(), pb.BaseCommand_CONNECTED)
	rc.request(t, r, pb.BaseCommand_builder{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: pb.CommandSubscribe_builder{
		Topic: proto.String(slowTopic), Subscription: proto.String("slow"), SubType: pb.CommandSubscribe_Exclusive.Enum(),
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1), InitialPosition: pb.CommandSubscribe_Earliest.Enum(),
	}.Build()}.Build(), pb.BaseCommand_SUCCESS)
	if err := rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_FLOW.Enum(), Flow: pb.CommandFlow_builder{
		ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(1000)}.Build()}.Build()); err != nil {
		t.Fatal(err)
	}
	slowFrom := time.Now()
	wg.Go(func() {
		for {
			var f wire.Frame
			if err := r.ReadFrame(&f); err != nil {
				return
			}
			if f.Command.GetType() == pb.BaseCommand_PING {
				rc.send(pongCommand())
			}
		}
	})
	// The slow reader finds its disconnection by its own pings: the
	// broker's close resets them at once, whereas reading to the end of
	// what its socket still holds takes a while at 1 KiB/s.
	slowDone := make(chan time.Duration, 1)
	pingDone := make(chan struct{})
	wg.Go(func() {
		tick := time.NewTicker(livenessKeepAlive / 8)
		defer tick.Stop()
		for {
			select {
			case <-pingDone:
				return
			case <-tick.C:
				if rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}.Build()) != nil {
					slowDone <- time.Since(slowFrom)
					return
				}
			}
		}
	})
	var slowFor time.Duration
	select {
	case slowFor = <-slowDone:
	case <-time.After(time.Minute):
		close(pingDone)
		t.Fatal("the slow reader was not disconnected within a minute")
	}
	close(pingDone)
	for time.Now().Before(slowFrom.Add(window)) {
		time.Sleep(100 * time.Millisecond)
	}
	during := time.Now()
	base, baseGap := stats(baseFrom, baseTo)
	slow, slowGap := stats(slowFrom, during)
	stopFeed()

	line := b.WaitLog(ctx, logFrom, "peer is not reading (write deadline passed)")
	var worst float64
	for i := range base {
		baseRate := float64(base[i]) / baseTo.Sub(baseFrom).Seconds()
		slowRate := float64(slow[i]) / during.Sub(slowFrom).Seconds()
		worst = max(worst, math.Abs(slowRate-baseRate)/baseRate)
	}
	t.Logf("slow reader: disconnected %v after its FLOW (write deadline %v; broker: %s); %d bystanders: longest gap %v baseline, %v beside it; worst rate change %.1f%%",
		slowFor.Round(time.Millisecond), livenessKeepAlive, strings.TrimSpace(line), bystanders,
		baseGap.Round(time.Millisecond), slowGap.Round(time.Millisecond), 100*worst)
	if slowFor > disconnectBound {
		t.Errorf("slow reader disconnected after %v, bound %v", slowFor, disconnectBound)
	}
	if slowGap > time.Second {
		t.Errorf("a bystander waited %v between two messages beside the slow reader", slowGap)
	}
	if worst > 0.10 {
		t.Errorf("a bystander's rate changed by %.1f%% beside the slow reader, want within 10%%", 100*worst)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the test ran out of time")
	}
}
