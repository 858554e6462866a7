//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker/replsub"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Issue 30's replicated subscriptions on real processes: three regions
// (20 ms links), namespace rs/ns replicated to all three with no active
// region, so that every region serves its own clients and the application
// fails over by subscribing in another region, as a consumer of
// Meridian's replicated subscriptions does. One topic carries messages
// from two origins: a producer in r1 and one in r2, 100 msg/s each, keyed.
// Two replicated subscriptions of it, one Shared and one Key_Shared, have
// two consumers each in r1, which ack out of order (in groups, each group
// backwards) and leave every message whose number is a multiple of 3
// unacked: a third of each origin's messages, in holes. Both producers stop
// (every send answered), and r1 is cut at once, its consumers with it.
// Consumers of the same subscriptions then attach in r2, acking all they
// get. The test fails unless they get:
//   - no message whose ack r1 confirmed before it took its last state in
//     the global store (what the broker promises exactly), nor any whose
//     ack r1 confirmed more than one sync interval
//     (replicatedSubscriptionsSnapshotFrequencyMillis) and one write
//     (replsubWriteAllowance) before the cut;
//   - every message r1 left unacked that was stored in r2 at the cut;
//   - once r1 is back and has drained, every message r1 left unacked.
//
// It logs the figures per subscription: the age of r1's last state at the
// cut, the duplicate window (messages r1 acked that r2 delivers again, as
// a count and in seconds of the subscription's traffic), and the RPO
// (r1's messages not in r2 at the cut, which r2 can deliver only after the
// heal).

// The two sync intervals the issue asks for.
var replsubIntervals = []time.Duration{time.Second, 100 * time.Millisecond}

const (
	replsubTopic = "persistent://rs/ns/orders"
	// replsubSendInterval paces each of the two producers: 100 msg/s.
	replsubSendInterval = 10 * time.Millisecond
	// replsubTraffic is how long both origins publish before the cut.
	replsubTraffic = 10 * time.Second
	// replsubAckGroup is how many messages a consumer in r1 takes before
	// it acks them, last first.
	replsubAckGroup = 8
	// replsubWriteAllowance is what the bound on redelivered acks allows
	// past the interval, as docs/architecture.md states it ("one interval,
	// plus the global store's write latency"): a state is taken, then
	// written, and a SIGKILL loses the write in flight, so the last state
	// written can be an interval and a write old at the cut (up to 133 ms
	// past the interval was seen on the shared 2-core machine). The exact
	// promise, no redelivery of an ack made before r1's last state was
	// taken, is checked beside it.
	replsubWriteAllowance = 500 * time.Millisecond
)

// replsubSubscriptions are the replicated subscriptions of the topic.
var replsubSubscriptions = []struct {
	name string
	typ  pulsar.SubscriptionType
}{{"shared", pulsar.Shared}, {"key-shared", pulsar.KeyShared}}

// replsubFault cuts r1 off and brings it back.
type replsubFault struct {
	cut, heal func(ctx context.Context, bed *Bed)
	// thirdDown SIGKILLs r3 before the topic exists: it stays down
	// throughout, and r1 and r2 fail over between themselves.
	thirdDown bool
}

// killRegion SIGKILLs every process of the region at once.
func killRegion(bed *Bed, name string) {
	var wg sync.WaitGroup
	for _, p := range bed.Region(name).Processes() {
		wg.Go(p.Kill)
	}
	wg.Wait()
}

var (
	replsubKill = replsubFault{
		cut: func(_ context.Context, bed *Bed) { killRegion(bed, "r1") },
		heal: func(ctx context.Context, bed *Bed) {
			for _, p := range bed.Region("r1").Processes() {
				p.Restart(ctx)
			}
		},
	}
	replsubLinkCut = replsubFault{
		cut:  func(_ context.Context, bed *Bed) { bed.CutRegion("r1") },
		heal: func(_ context.Context, bed *Bed) { bed.RestoreRegion("r1") },
	}
)

// TestReplicatedSubscriptionFailoverKill: every process of r1 SIGKILLed,
// then restarted.
func TestReplicatedSubscriptionFailoverKill(t *testing.T) {
	testReplicatedSubscriptionFailover(t, replsubKill)
}

// TestReplicatedSubscriptionFailoverLinkCut: r1 cut off from the other
// regions (the global store, outside every region, stays reachable),
// then restored.
func TestReplicatedSubscriptionFailoverLinkCut(t *testing.T) {
	testReplicatedSubscriptionFailover(t, replsubLinkCut)
}

// TestReplicatedSubscriptionFailoverThirdRegionDown: r3 SIGKILLed before
// the topic exists and down throughout, r1 then cut off from r2 as in
// the link cut: r1 and r2 sync and fail over between themselves.
func TestReplicatedSubscriptionFailoverThirdRegionDown(t *testing.T) {
	f := replsubLinkCut
	f.thirdDown = true
	testReplicatedSubscriptionFailover(t, f)
}

func testReplicatedSubscriptionFailover(t *testing.T, fault replsubFault) {
	for _, interval := range replsubIntervals {
		t.Run("interval="+interval.String(), func(t *testing.T) { runReplsubFailover(t, interval, fault) })
	}
}

// subMessage is a message of one subscription.
type subMessage struct {
	sub string
	msg Message
}

// replsubDelivery is a message a consumer received.
type replsubDelivery struct {
	subMessage
	region   string // the region of the consumer's client
	consumer string
	id       string // idString of its message id
	at       time.Time
}

// replsubLog records what the consumers of every region received and
// acked; they all record at once.
type replsubLog struct {
	mu         sync.Mutex
	deliveries []replsubDelivery
	// acks are the acks the consumers sent, by region: the time the
	// broker confirmed each, zero for one not confirmed (failed, or not
	// answered yet), which the broker may have applied or not.
	acks      map[string]map[subMessage]time.Time
	consumers int
}

// nextConsumer numbers the consumers, for their names.
func (l *replsubLog) nextConsumer() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.consumers++
	return l.consumers
}

func (l *replsubLog) delivered(d replsubDelivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deliveries = append(l.deliveries, d)
}

func (l *replsubLog) acked(region string, m subMessage, confirmed time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.acks[region] == nil {
		l.acks[region] = map[subMessage]time.Time{}
	}
	l.acks[region][m] = confirmed
}

// snapshot copies the deliveries to region's consumers, and region's acks.
func (l *replsubLog) snapshot(region string) ([]replsubDelivery, map[subMessage]time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ds []replsubDelivery
	for _, d := range l.deliveries {
		if d.region == region {
			ds = append(ds, d)
		}
	}
	acks := map[subMessage]time.Time{}
	for m, at := range l.acks[region] {
		acks[m] = at
	}
	return ds, acks
}

// replsubConsumer is one consumer of a replicated subscription, recording
// into a replsubLog until stop.
type replsubConsumer struct {
	c    pulsar.Consumer
	stop context.CancelFunc
	done chan struct{}
}

// consume subscribes to sub through client and records what it receives
// under region. Its acks wait for the broker's answer (AckWithResponse),
// so an ack's time is when the broker had it, and batch-index acks are on
// (a batch's messages are acked one by one). With holes it acks out of
// order, leaving every message whose number is a multiple of 3 unacked:
// it takes replsubAckGroup messages, then acks them last first. Without,
// it acks each message as it comes.
func (l *replsubLog) consume(ctx context.Context, client pulsar.Client, sub string, typ pulsar.SubscriptionType, region string, holes bool) (*replsubConsumer, error) {
	c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: replsubTopic, SubscriptionName: sub, Type: typ,
		Name: fmt.Sprintf("%s-%s-%d", region, sub, l.nextConsumer()), ReplicateSubscriptionState: true,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		AckWithResponse:             true, EnableBatchIndexAcknowledgment: true})
	if err != nil {
		return nil, fmt.Errorf("e2e: subscribe %s in %s: %w", sub, region, err)
	}
	ctx, stop := context.WithCancel(ctx)
	rc := &replsubConsumer{c: c, stop: stop, done: make(chan struct{})}
	// An ack is recorded as tried before it is sent: one still waiting
	// for its answer at the cut (pulsar-client-go holds it while it
	// reconnects, for as long as the region is gone) may have been
	// applied, or not.
	ack := func(m pulsar.Message, sm subMessage) {
		l.acked(region, sm, time.Time{})
		if c.Ack(m) == nil {
			l.acked(region, sm, time.Now())
		}
	}
	go func() {
		defer close(rc.done)
		type held struct {
			m  pulsar.Message
			sm subMessage
		}
		var group []held
		for {
			m, err := c.Receive(ctx)
			if err != nil {
				return // stop, or the test's deadline
			}
			msg, err := parsePayload(m.Payload())
			if err != nil {
				msg = Message{Producer: "unparsable"}
			}
			sm := subMessage{sub, msg}
			l.delivered(replsubDelivery{subMessage: sm, region: region, consumer: c.Name(), id: idString(m.ID()), at: time.Now()})
			if !holes {
				ack(m, sm)
				continue
			}
			if msg.N%3 != 0 {
				group = append(group, held{m, sm})
			}
			if len(group) == replsubAckGroup {
				for _, h := range slices.Backward(group) {
					if ctx.Err() != nil {
						return
					}
					ack(h.m, h.sm)
				}
				group = group[:0]
			}
		}
	}()
	return rc, nil
}

// consumeAll starts two consumers of each subscription (see consume).
func (l *replsubLog) consumeAll(ctx context.Context, t *testing.T, client pulsar.Client, region string, holes bool) []*replsubConsumer {
	t.Helper()
	var out []*replsubConsumer
	for _, s := range replsubSubscriptions {
		for range 2 {
			c, err := l.consume(ctx, client, s.name, s.typ, region, holes)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, c)
		}
	}
	return out
}

// end stops receiving and acking, and closes the consumer.
func (c *replsubConsumer) end() {
	c.stop()
	<-c.done
	c.c.Close()
}

// runReplsubFailover is the scenario (see the top of the file) at one
// sync interval, under one fault of r1.
func runReplsubFailover(t *testing.T, interval time.Duration, fault replsubFault) {
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	// The interval is Pulsar's broker.conf key; Meridian's brokers read
	// it from --config.
	conf := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "replicatedSubscriptionsSnapshotFrequencyMillis=%d\n", interval.Milliseconds()), 0o600); err != nil {
		t.Fatal(err)
	}
	tr := startThreeRegions(ctx, t, 0, []string{"--config", conf}, "rs",
		global.Policies{ReplicationClusters: []string{"r1", "r2", "r3"}})
	bed := tr.bed
	if fault.thirdDown {
		killRegion(bed, "r3")
	}
	clients := map[string]pulsar.Client{}
	for _, r := range []string{"r1", "r2"} {
		clients[r] = NewClient(t, bed.Region(r).ServiceURL())
		waitProducer(ctx, t, clients[r], replsubTopic)
	}

	record := &replsubLog{acks: map[string]map[subMessage]time.Time{}}
	r1Consumers := record.consumeAll(ctx, t, clients["r1"], "r1", true)
	rec := bed.Recorder()
	var producers []*Producer
	for _, r := range []string{"r1", "r2"} {
		p, err := StartProducer(ctx, clients[r], rec, ProducerConfig{Region: r, Topic: replsubTopic, Name: r,
			Interval: replsubSendInterval, Keys: 16, PayloadSize: 256})
		if err != nil {
			t.Fatal(err)
		}
		producers = append(producers, p)
	}
	// Both origins reach r1's consumers before the traffic is timed.
	waitUntil(ctx, t, 2*time.Minute, "r1's consumers to receive both origins", func() bool {
		ds, _ := record.snapshot("r1")
		return slices.ContainsFunc(ds, func(d replsubDelivery) bool { return d.msg.Producer == "r1" }) &&
			slices.ContainsFunc(ds, func(d replsubDelivery) bool { return d.msg.Producer == "r2" })
	})
	sleep(ctx, t, replsubTraffic)

	for _, p := range producers {
		if err := p.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cutAt := time.Now()
	fault.cut(ctx, bed)
	// r1's consumers are gone with their region: they ack nothing more.
	// One may be waiting for an ack's answer until r1 is back, so they end
	// beside the rest of the run.
	var ending sync.WaitGroup
	for _, c := range r1Consumers {
		c.stop()
		ending.Go(c.end)
	}
	sends := rec.History().Sends
	var sendErrors int
	var lastReceipt time.Time
	for _, s := range sends {
		if !s.Acknowledged() {
			sendErrors++
		}
		if s.ReceiptAt.After(lastReceipt) {
			lastReceipt = s.ReceiptAt
		}
	}
	if sendErrors > 0 {
		t.Fatalf("%d sends unanswered or failed before the cut", sendErrors)
	}
	_, r1Acks := record.snapshot("r1")

	// r1's last states in the global store: the first consumer of a
	// subscription in r2 reads them, or newer ones, before it attaches.
	r1Taken := r1States(ctx, t, tr.gs)

	// The failover: consumers of the same subscriptions attach in r2.
	r2Consumers := record.consumeAll(ctx, t, clients["r2"], "r2", false)
	// owed is what r2 must deliver of the messages in stored: those of
	// each subscription that r1's consumers never tried to ack.
	owed := func(stored []Message) []subMessage {
		var out []subMessage
		for _, s := range replsubSubscriptions {
			for _, m := range stored {
				if _, tried := r1Acks[subMessage{s.name, m}]; !tried {
					out = append(out, subMessage{s.name, m})
				}
			}
		}
		return out
	}
	var missing []subMessage // what the last look found owed and not delivered, for the log
	defer func() {
		if t.Failed() && len(missing) > 0 {
			t.Logf("%d messages owed and not delivered in r2, the first: %v", len(missing), missing[:min(10, len(missing))])
		}
	}()
	deliveredInR2 := func(want []subMessage) bool {
		ds, _ := record.snapshot("r2")
		got := map[subMessage]bool{}
		for _, d := range ds {
			got[d.subMessage] = true
		}
		missing = slices.DeleteFunc(slices.Clone(want), func(m subMessage) bool { return got[m] })
		return len(missing) == 0
	}
	// r2's own messages are all in r2. The read-back of what r2 holds
	// comes once r2 has delivered those, a second or so after the cut,
	// when nothing r1 sent before it is still on its way: an entry of r1
	// that reached r2 after the read-back would be delivered before the
	// heal, which the RPO's check below reports.
	waitUntil(ctx, t, 2*time.Minute, "r2 to deliver its own messages that r1 left unacked", func() bool {
		return deliveredInR2(owed(messages(ackedSends(rec, replsubTopic, "r2"))))
	})
	if err := ReadTopic(ctx, clients["r2"], rec, "r2", replsubTopic); err != nil {
		t.Fatal(err)
	}
	inR2 := map[Message]bool{}
	for _, s := range rec.History().ReadBacks[0].Messages {
		inR2[s.Message] = true
	}
	var stored, notStored []Message
	for _, m := range messages(ackedSends(rec, replsubTopic, "r1")) {
		if inR2[m] {
			stored = append(stored, m)
		} else {
			notStored = append(notStored, m)
		}
	}
	waitUntil(ctx, t, 2*time.Minute, "r2 to deliver every message r1 left unacked that had reached r2", func() bool {
		return deliveredInR2(owed(stored))
	})
	owedBy := time.Since(cutAt)
	failoverDeliveries, _ := record.snapshot("r2")

	healAt := time.Now()
	fault.heal(ctx, bed)
	waitUntil(ctx, t, 3*time.Minute, "r2 to deliver every message r1 left unacked, once r1 is back", func() bool {
		return deliveredInR2(owed(messages(sends)))
	})
	drained := time.Since(healAt)
	for _, c := range r2Consumers {
		c.end()
	}
	ending.Wait()

	// The figures, per subscription.
	all, _ := record.snapshot("r2")
	r1All, _ := record.snapshot("r1")
	served := all[0].at.Sub(cutAt)
	rate := float64(time.Second/replsubSendInterval) * 2 // the subscription's traffic, both origins
	report := []string{fmt.Sprintf("%s of traffic at %.0f msg/s; the cut %v after both producers stopped; r2's first delivery %v after the cut, and what it owed by %v, the rest %v after the heal",
		replsubTraffic, rate, cutAt.Sub(lastReceipt).Round(time.Millisecond), served.Round(10*time.Millisecond), owedBy.Round(10*time.Millisecond), drained.Round(10*time.Millisecond))}
	for _, s := range replsubSubscriptions {
		var acked, held int
		for m, at := range r1Acks {
			if m.sub == s.name && !at.IsZero() {
				acked++
			}
		}
		held = len(sends) - acked
		// Duplicates: deliveries in r2 of messages whose ack r1 confirmed.
		// Those acked before r1's last state was taken, or more than an
		// interval and a write before the cut, must not come. Those acked
		// more than an interval before it are counted: the bound,
		// which a SIGKILL during the write of a state exceeds.
		var dups, pastInterval, stated int
		var oldest time.Duration
		delivered := map[subMessage]bool{}
		for _, d := range all {
			at := r1Acks[d.subMessage]
			if d.sub != s.name || delivered[d.subMessage] {
				continue
			}
			delivered[d.subMessage] = true
			if at.IsZero() {
				continue
			}
			dups++
			oldest = max(oldest, cutAt.Sub(at))
			if at.Before(r1Taken[s.name]) {
				stated++
				if stated <= 10 {
					t.Errorf("%s: %v delivered in r2 (%s, %s, %v after the cut), acked in r1 %v before r1's last state was taken; in r1: %s",
						s.name, d.msg, d.consumer, d.id, d.at.Sub(cutAt).Round(time.Millisecond), r1Taken[s.name].Sub(at).Round(time.Millisecond), r1Deliveries(r1All, d.subMessage, cutAt))
				}
			}
			if at.Before(cutAt.Add(-interval)) {
				pastInterval++
			}
			if at.Before(cutAt.Add(-interval - replsubWriteAllowance)) {
				t.Errorf("%s: %v delivered in r2, acked in r1 %v before the cut (interval %v, and %v for a write)",
					s.name, d.msg, cutAt.Sub(at).Round(time.Millisecond), interval, replsubWriteAllowance)
			}
		}
		// The RPO: r1's messages not in r2 at the cut. Those r1 left
		// unacked came only after the heal.
		var rpoOwed, rpoAfterHeal int
		before := map[subMessage]bool{}
		for _, d := range failoverDeliveries {
			before[d.subMessage] = true
		}
		for _, m := range notStored {
			sm := subMessage{s.name, m}
			if _, tried := r1Acks[sm]; !tried {
				rpoOwed++
				if !before[sm] {
					rpoAfterHeal++
				}
			}
		}
		line := fmt.Sprintf("%s: r1 acked %d of %d messages (%d left), its last state taken %v before the cut; r2 delivered %d, of them %d acked in r1 (%.2f s of traffic, the oldest ack %v before the cut), %d acked before that state, %d more than %v before the cut; RPO %d messages of r1 not in r2 at the cut (%.2f s of r1's traffic), %d of them unacked, delivered after the heal",
			s.name, acked, len(sends), held, cutAt.Sub(r1Taken[s.name]).Round(time.Millisecond), len(delivered), dups, float64(dups)/rate, oldest.Round(time.Millisecond),
			stated, pastInterval, interval, len(notStored), float64(len(notStored))/(rate/2), rpoAfterHeal)
		if rpoAfterHeal != rpoOwed {
			t.Errorf("%s: %d of r1's unacked messages not in r2 at the cut came before the heal", s.name, rpoOwed-rpoAfterHeal)
		}
		report = append(report, line)
	}
	layout := "3 regions"
	if fault.thirdDown {
		layout = "3 regions, r3 down throughout"
	}
	t.Logf("replicated subscriptions, %s, 20 ms links, interval %v:\n\t%s", layout, interval, strings.Join(report, "\n\t"))
}

// r1States reads when r1 took its states of the replicated subscriptions
// that are in the global store now, by subscription.
func r1States(ctx context.Context, t *testing.T, gs *global.Store) map[string]time.Time {
	t.Helper()
	topic, err := topology.ParseTopicName(replsubTopic)
	if err != nil {
		t.Fatal(err)
	}
	states, err := gs.SubscriptionStates(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	taken := map[string]time.Time{}
	for _, st := range states {
		if st.Region != "r1" {
			continue
		}
		dec, err := replsub.Decode(st.Value)
		if err != nil {
			t.Fatalf("r1's state of %s: %v", st.Subscription, err)
		}
		taken[st.Subscription] = time.UnixMilli(dec.TakenMillis)
	}
	return taken
}

// r1Deliveries describes m's deliveries in ds, for a failure's log.
func r1Deliveries(ds []replsubDelivery, m subMessage, cutAt time.Time) string {
	var out []string
	for _, d := range ds {
		if d.subMessage == m {
			out = append(out, fmt.Sprintf("%s %s %v before the cut", d.consumer, d.id, cutAt.Sub(d.at).Round(time.Millisecond)))
		}
	}
	return strings.Join(out, "; ")
}
