//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/jonboulle/clockwork"
)

// Recorder collects a workload's History from every producer, consumer
// and read-back of a test; all of them may record at once.
type Recorder struct {
	mu sync.Mutex
	h  History
}

// History returns a copy of what was recorded so far.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return History{
		Sends:      append([]Send(nil), r.h.Sends...),
		Deliveries: append([]Delivery(nil), r.h.Deliveries...),
		ReadBacks:  append([]ReadBack(nil), r.h.ReadBacks...),
	}
}

// Acknowledged is how many sends have a receipt so far.
func (r *Recorder) Acknowledged() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.h.Sends {
		if s.Acknowledged() {
			n++
		}
	}
	return n
}

// WaitAcknowledged waits until at least n sends have receipts, failing the
// test if ctx ends first; what says what the test was waiting for.
func (r *Recorder) WaitAcknowledged(ctx context.Context, tb testing.TB, n int, what string) {
	tb.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for r.Acknowledged() < n {
		select {
		case <-ctx.Done():
			tb.Fatalf("%s: %d of %d send receipts: %v", what, r.Acknowledged(), n, ctx.Err())
		case <-tick.C:
		}
	}
}

// WaitAllAcked waits until every subscription in the history has acked
// every send to its topic that has a receipt, failing the test if ctx ends
// first.
func (r *Recorder) WaitAllAcked(ctx context.Context, tb testing.TB) {
	tb.Helper()
	r.WaitAllAckedEvery(ctx, tb, 50*time.Millisecond)
}

// WaitAllAckedEvery is WaitAllAcked looking every interval: each look
// copies the history, which for a long run (hundreds of thousands of
// deliveries) costs more CPU than a 50 ms poll should.
func (r *Recorder) WaitAllAckedEvery(ctx context.Context, tb testing.TB, every time.Duration) {
	tb.Helper()
	if err := r.awaitAllAcked(ctx, every); err != nil {
		tb.Fatal(err)
	}
}

// awaitAllAcked is WaitAllAckedEvery that returns, when ctx ends first,
// an error saying how many acks are missing, so that a scenario can go on
// to its checker: a receipted message that never comes is lost, and the
// checker names it.
func (r *Recorder) awaitAllAcked(ctx context.Context, every time.Duration) error {
	type sub struct{ region, topic, name string }
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		h := r.History()
		acked := map[sub]map[Message]bool{}
		for _, d := range h.Deliveries {
			s := sub{d.Region, d.Topic, d.Subscription}
			if acked[s] == nil {
				acked[s] = map[Message]bool{}
			}
			if d.Acked {
				acked[s][d.Message] = true
			}
		}
		missing := 0
		for _, snd := range h.Sends {
			for s, m := range acked {
				if snd.Acknowledged() && s.topic == snd.Topic && !m[snd.Message] {
					missing++
				}
			}
		}
		if missing == 0 && len(acked) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d acks still missing over %d subscriptions: %w", missing, len(acked), ctx.Err())
		case <-tick.C:
		}
	}
}

// NewClient is a pulsar-client-go client of serviceURL, quiet, closed when
// the test ends. Region is only a label: which region a client is "in" is
// the region the test records its sends and deliveries under.
func NewClient(tb testing.TB, serviceURL string) pulsar.Client {
	tb.Helper()
	return NewClientWith(tb, serviceURL, pulsar.ClientOptions{})
}

// NewClientWith is NewClient with further options (a keepalive, say):
// opts.URL becomes serviceURL, and the timeouts and logger left zero take
// NewClient's.
func NewClientWith(tb testing.TB, serviceURL string, opts pulsar.ClientOptions) pulsar.Client {
	tb.Helper()
	opts.URL = serviceURL
	if opts.OperationTimeout == 0 {
		opts.OperationTimeout = 30 * time.Second
	}
	if opts.ConnectionTimeout == 0 {
		opts.ConnectionTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	c, err := pulsar.NewClient(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// payload is a message's bytes: "producer:n", then padding to size.
func payload(m Message, size int) []byte {
	b := []byte(m.String())
	if pad := size - len(b) - 1; pad > 0 {
		b = append(b, '|')
		b = append(b, strings.Repeat("x", pad)...)
	}
	return b
}

// parsePayload reads back the Message a payload names.
func parsePayload(b []byte) (Message, error) {
	s, _, _ := strings.Cut(string(b), "|")
	p, n, ok := strings.Cut(s, ":")
	if !ok {
		return Message{}, fmt.Errorf("e2e: payload %.40q is not producer:n", b)
	}
	i, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return Message{}, fmt.Errorf("e2e: payload %.40q: %w", b, err)
	}
	return Message{Producer: p, N: i}, nil
}

// ProducerConfig describes one workload producer.
type ProducerConfig struct {
	// Region is the region its sends are recorded in: the region of the
	// client's service URL.
	Region string
	Topic  string
	// Name is the producer name, which deduplication keys on; fixed, so a
	// restarted producer continues one stream.
	Name string
	// Interval is the time between two sends, kept by the clock: the
	// producer's n-th send falls due n Intervals after it started, and
	// after a stall of the test process it sends at once what fell due
	// meanwhile, so its offered rate is 1/Interval whatever the machine
	// did. It may be below a millisecond. Default 5ms.
	Interval time.Duration
	// MaxPendingMessages bounds the sends awaiting a receipt, past which
	// the client's SendAsync blocks (and the producer falls behind, then
	// catches up). Default 1000, pulsar-client-go's, or as many as one
	// second of sends at Interval when that is more: at a high rate one
	// slow receipt must not hold the producer up.
	MaxPendingMessages int
	// Keys gives message n the key "k<n mod Keys>"; 0 sends no keys.
	// With keys, batches are built per key (Pulsar's key-based batching):
	// the broker routes a batch to a Key_Shared consumer by one key, so a
	// batch of mixed keys would break the other keys' order. Batches of
	// different keys may then be stored out of the producer's order, so
	// the checker holds keyed messages to their key's order.
	Keys int
	// PayloadSize pads each payload to this many bytes.
	PayloadSize int
	// SendTimeout is the client's send timeout. Default 1 minute.
	SendTimeout time.Duration
	// BatchingDelay is how long the client holds a batch open
	// (BatchingMaxPublishDelay). Default the client's, 10ms.
	BatchingDelay time.Duration
}

// Validate reports a missing name or topic, or a negative field.
func (c ProducerConfig) Validate() error {
	switch {
	case c.Name == "" || c.Topic == "" || c.Region == "":
		return fmt.Errorf("%w: ProducerConfig needs Region, Topic and Name, got %+v", ErrBadConfig, c)
	case c.Interval < 0 || c.Keys < 0 || c.PayloadSize < 0 || c.SendTimeout < 0 || c.MaxPendingMessages < 0 || c.BatchingDelay < 0:
		return fmt.Errorf("%w: producer %s: negative Interval, Keys, PayloadSize, SendTimeout, MaxPendingMessages or BatchingDelay", ErrBadConfig, c.Name)
	}
	return nil
}

// pacer paces sends at a fixed rate by the clock, not by ticks: the n-th
// send falls due n intervals after the start, and after a stall it lets
// through at once every send that fell due meanwhile, so that the offered
// load over a window is the same whatever the machine did.
//
// A time.Ticker cannot do this. It drops the ticks its reader was not
// ready for, and the runtime sleeps in whole milliseconds (epoll_wait's
// resolution), so on this 2-core machine a bare 1 ms ticker delivered 697
// ticks/s under load, and one of 100 µs 819: a producer paced by ticks
// asked for 10k msg/s sent about 1.4k.
type pacer struct {
	clock clockwork.Clock
	start time.Time
	every time.Duration
	sent  int64
	timer clockwork.Timer
}

// newPacer starts a pacer of one send per every (which must be positive).
func newPacer(clock clockwork.Clock, every time.Duration) *pacer {
	t := clock.NewTimer(time.Hour)
	t.Stop()
	return &pacer{clock: clock, start: clock.Now(), every: every, timer: t}
}

// wait returns true once the next send falls due, at once if it is
// overdue, or false once ctx ends.
func (p *pacer) wait(ctx context.Context) bool {
	due := p.start.Add(time.Duration(p.sent) * p.every)
	if d := due.Sub(p.clock.Now()); d > 0 {
		p.timer.Reset(d)
		select {
		case <-ctx.Done():
			p.timer.Stop()
			return false
		case <-p.timer.Chan():
		}
	}
	if ctx.Err() != nil {
		return false
	}
	p.sent++
	return true
}

// stop releases the pacer's timer.
func (p *pacer) stop() { p.timer.Stop() }

// Producer sends numbered messages at a steady rate, recording each send
// and its receipt, until Stop. Its sequence ids are its message numbers,
// so the client resends pending messages with their ids after a
// reconnect, and a deduplicating broker drops those it stored already.
type Producer struct {
	p    pulsar.Producer
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// StartProducer creates the producer and starts its sending goroutine.
func StartProducer(ctx context.Context, client pulsar.Client, rec *Recorder, cfg ProducerConfig) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Millisecond
	}
	if cfg.SendTimeout == 0 {
		cfg.SendTimeout = time.Minute
	}
	if cfg.MaxPendingMessages == 0 {
		cfg.MaxPendingMessages = max(1000, int(time.Second/cfg.Interval))
	}
	opts := pulsar.ProducerOptions{Topic: cfg.Topic, Name: cfg.Name, SendTimeout: cfg.SendTimeout,
		MaxPendingMessages: cfg.MaxPendingMessages, BatchingMaxPublishDelay: cfg.BatchingDelay}
	if cfg.Keys > 0 {
		opts.BatcherBuilderType = pulsar.KeyBasedBatchBuilder
	}
	p, err := client.CreateProducer(opts)
	if err != nil {
		return nil, fmt.Errorf("e2e: producer %s on %s: %w", cfg.Name, cfg.Topic, err)
	}
	// Stop ends the loop; the sends take the caller's ctx, so that the
	// last ones are not cancelled by Stop but flushed.
	loop, stop := context.WithCancel(ctx)
	wp := &Producer{p: p, stop: stop}
	wp.wg.Add(1)
	go func() {
		defer wp.wg.Done()
		pace := newPacer(clockwork.NewRealClock(), cfg.Interval)
		defer pace.stop()
		for n := int64(0); pace.wait(loop); n++ {
			m, seq := Message{Producer: cfg.Name, N: n}, n
			msg := &pulsar.ProducerMessage{Payload: payload(m, cfg.PayloadSize), SequenceID: &seq}
			if cfg.Keys > 0 {
				msg.Key = fmt.Sprintf("k%d", n%int64(cfg.Keys))
			}
			rec.mu.Lock()
			i := len(rec.h.Sends)
			rec.h.Sends = append(rec.h.Sends, Send{Message: m, Region: cfg.Region, Topic: cfg.Topic, Key: msg.Key, SequenceID: n, SentAt: time.Now()})
			rec.mu.Unlock()
			p.SendAsync(ctx, msg, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				rec.mu.Lock()
				defer rec.mu.Unlock()
				if err != nil {
					rec.h.Sends[i].Err = err.Error()
					return
				}
				rec.h.Sends[i].ReceiptAt, rec.h.Sends[i].MessageID = time.Now(), idString(id)
			})
		}
	}()
	return wp, nil
}

// Stop ends the sending, waits until every pending send has a receipt or
// an error (or ctx ends), and closes the producer.
func (p *Producer) Stop(ctx context.Context) error {
	p.stop()
	p.wg.Wait()
	err := p.p.FlushWithCtx(ctx)
	p.p.Close()
	return err
}

// ConsumerConfig describes one workload consumer.
type ConsumerConfig struct {
	// Region is the region its deliveries are recorded in.
	Region       string
	Topic        string
	Subscription string
	Type         SubscriptionType
	// Name is the consumer name, recorded with each delivery.
	Name string
	// Replicated subscribes with replicate_subscription_state, so that
	// the subscription's acks travel to the other regions.
	Replicated bool
	// GroupedAcks acks as applications do by default: pulsar-client-go
	// groups acks for up to 100 ms and the broker does not confirm them,
	// so Delivery.Acked says only that the client took the ack (at
	// AckAt). Without it each ack waits for the broker's confirmation
	// before the next message is received, which over a link with latency
	// holds a consumer to one message per round trip.
	GroupedAcks bool
}

// Validate reports a missing field or an unknown subscription type.
func (c ConsumerConfig) Validate() error {
	if c.Region == "" || c.Topic == "" || c.Subscription == "" {
		return fmt.Errorf("%w: ConsumerConfig needs Region, Topic and Subscription, got %+v", ErrBadConfig, c)
	}
	if _, ok := subscriptionTypes[c.Type]; !ok {
		return fmt.Errorf("%w: subscription %s: type %q is none of Exclusive, Failover, Shared, Key_Shared", ErrBadConfig, c.Subscription, c.Type)
	}
	return nil
}

var subscriptionTypes = map[SubscriptionType]pulsar.SubscriptionType{
	Exclusive: pulsar.Exclusive, Failover: pulsar.Failover, Shared: pulsar.Shared, KeyShared: pulsar.KeyShared,
}

// Consumer receives from a subscription (from the earliest position) and
// acks every message, with the broker's confirmation, recording each
// delivery and the ack's outcome, until Stop.
//
// Batch-index acknowledgement is on. Without it, pulsar-client-go acks a
// batch's entry only once every message of the batch is acked, and its
// Ack of the others returns nil without the broker hearing of it: a
// delivery would be recorded as confirmed that the broker never saw, and
// a reconnect would redeliver it as if it were a duplicate.
//
// Its message channel is unbuffered. pulsar-client-go drops its receive
// queue on a reconnect (the broker sends the unacked messages again), but
// not the consumer's channel (10 messages by default): those would be
// handed out and acked after the reconnect, and then come again.
type Consumer struct {
	c    pulsar.Consumer
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// StartConsumer subscribes and starts the receiving goroutine.
func StartConsumer(ctx context.Context, client pulsar.Client, rec *Recorder, cfg ConsumerConfig) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: cfg.Topic, SubscriptionName: cfg.Subscription, Name: cfg.Name,
		Type: subscriptionTypes[cfg.Type], SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		AckWithResponse: !cfg.GroupedAcks, EnableBatchIndexAcknowledgment: true, MessageChannel: make(chan pulsar.ConsumerMessage),
		ReplicateSubscriptionState: cfg.Replicated})
	if err != nil {
		return nil, fmt.Errorf("e2e: subscribe %s to %s: %w", cfg.Subscription, cfg.Topic, err)
	}
	ctx, stop := context.WithCancel(ctx)
	wc := &Consumer{c: c, stop: stop}
	wc.wg.Add(1)
	go func() {
		defer wc.wg.Done()
		for {
			msg, err := c.Receive(ctx)
			if err != nil {
				return // ctx ended: Stop, or the test's deadline
			}
			d := Delivery{Region: cfg.Region, Topic: cfg.Topic, Subscription: cfg.Subscription, Type: cfg.Type,
				Consumer: cfg.Name, Key: msg.Key(), MessageID: idString(msg.ID()), At: time.Now()}
			m, perr := parsePayload(msg.Payload())
			d.Message = m
			if perr != nil {
				// Recorded as it is: the checker reports it as never sent.
				d.Message = Message{Producer: "unparsable " + strings.ToValidUTF8(string(msg.Payload()), "?")}
			}
			if cfg.GroupedAcks {
				d.Acked, d.AckAt = c.Ack(msg) == nil, time.Now()
			} else if ackRetrying(ctx, c, msg) {
				d.Acked, d.AckAt = true, time.Now()
			}
			rec.mu.Lock()
			rec.h.Deliveries = append(rec.h.Deliveries, d)
			rec.mu.Unlock()
		}
	}()
	return wc, nil
}

// ackRetrying acks msg until the broker confirms it, or ctx ends. A
// failed ack is uncertain: the broker may have applied it and lost only
// the reply (a cut link), and then it never redelivers the message. An
// ack is idempotent, so retrying it turns that doubt into a confirmation.
func ackRetrying(ctx context.Context, c pulsar.Consumer, msg pulsar.Message) bool {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := c.Ack(msg); err == nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// Stop ends the receiving and closes the consumer.
func (c *Consumer) Stop() {
	c.stop()
	c.wg.Wait()
	c.c.Close()
}

// KeepForReadBack creates on topic, through client, a durable subscription
// that is never read, so that the topic keeps every ledger it stores for
// ReadTopic whatever its namespace's retention: a ledger every
// subscription has consumed goes once a newer one exists (a broker
// restart or a topic reload under load starts one), and the read-back
// would miss what it held and the checker call it lost. Call it before
// the first message is sent. A refused subscription is tried again for a
// minute: a broker that lost its lease under load answers ServiceNotReady
// while it unloads.
func KeepForReadBack(ctx context.Context, tb testing.TB, client pulsar.Client, topic string) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "e2e-read-back",
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			tb.Fatalf("e2e: subscription keeping %s for the read-back: %v", topic, err)
		}
		tb.Logf("subscription keeping %s for the read-back: %v; trying again", topic, err)
		sleep(ctx, tb, 500*time.Millisecond)
	}
}

// ReadTopic reads topic from the earliest position to its end through
// client, and records what it holds as region's copy.
func ReadTopic(ctx context.Context, client pulsar.Client, rec *Recorder, region, topic string) error {
	reader, err := client.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		return fmt.Errorf("e2e: reader of %s in %s: %w", topic, region, err)
	}
	defer reader.Close()
	// What the reader delivers is put in message-id order, which is the
	// topic's storage order, and a message id delivered twice is kept
	// once: pulsar-client-go's reader may hand out a message from before a
	// reconnect after ones it reads again from the broker (its channel
	// keeps a few stale messages across a reconnect), and that is the
	// client's delivery, not what the region stored.
	type read struct {
		id pulsar.MessageID
		m  Stored
	}
	var reads []read
	seen := map[string]bool{}
	var newest pulsar.MessageID // the read id of the highest entry
	for {
		for reader.HasNext() {
			msg, err := reader.Next(ctx)
			if err != nil {
				return fmt.Errorf("e2e: reading %s in %s: %w", topic, region, err)
			}
			m, err := parsePayload(msg.Payload())
			if err != nil {
				return err
			}
			id := msg.ID()
			if seen[idString(id)] {
				continue
			}
			seen[idString(id)] = true
			reads = append(reads, read{id, Stored{Message: m, Key: msg.Key(), MessageID: idString(id)}})
			if newest == nil || compareEntries(id, newest) > 0 {
				newest = id
			}
		}
		// HasNext also answers false when its request for the topic's
		// last message id failed (a timeout on a loaded machine), which
		// would end the read-back short and have the checker call stored
		// messages lost. The end is confirmed by asking again, with the
		// error; a failed request is retried until ctx ends.
		last, err := reader.GetLastMessageID()
		if err == nil && (last.EntryID() < 0 || newest != nil && compareEntries(newest, last) >= 0) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("e2e: reading %s in %s: the end of the topic not confirmed (last message id %v, %v): %w", topic, region, last, err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	slices.SortStableFunc(reads, func(a, b read) int {
		return cmp.Or(cmp.Compare(a.id.LedgerID(), b.id.LedgerID()), cmp.Compare(a.id.EntryID(), b.id.EntryID()),
			cmp.Compare(a.id.BatchIdx(), b.id.BatchIdx()))
	})
	rb := ReadBack{Region: region, Topic: topic, Messages: []Stored{}}
	for _, r := range reads {
		rb.Messages = append(rb.Messages, r.m)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.h.ReadBacks = append(rec.h.ReadBacks, rb)
	return nil
}

// compareEntries orders two message ids by their entry (ledger, then
// entry id), leaving batch indexes out.
func compareEntries(a, b pulsar.MessageID) int {
	return cmp.Or(cmp.Compare(a.LedgerID(), b.LedgerID()), cmp.Compare(a.EntryID(), b.EntryID()))
}

// idString names a message by its ledger, entry and batch index:
// pulsar-client-go's MessageID.String leaves the batch index out, so the
// messages of one batch would share a name.
func idString(id pulsar.MessageID) string {
	return fmt.Sprintf("%d:%d:%d", id.LedgerID(), id.EntryID(), id.BatchIdx())
}

// WaitDeduplication waits until the brokers behind client apply
// deduplication on topic's namespace: a new producer is numbered from the
// last sequence id the broker reports for its name, -1 unless
// deduplication is on, so once a probe's first message gets an id above 0
// it is on. Creating the probe also waits for the broker to see the
// namespace. Use a probe topic of the namespace, not a workload's.
func WaitDeduplication(ctx context.Context, tb testing.TB, client pulsar.Client, topic string) {
	tb.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "dedup-probe"})
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
			tb.Fatalf("deduplication never took effect on %s (last error %v): %v", topic, err, ctx.Err())
		case <-tick.C:
		}
	}
}

// Verify checks h under rules and reports: the counts in the test's log,
// and each violation as a test error (the first 20, and how many more).
// A history with violations is saved in the bed's folder, which the bed
// then keeps, printing the seed.
func (b *Bed) Verify(h History, rules Rules) Report {
	b.tb.Helper()
	r := Check(h, rules)
	b.tb.Logf("checker: %s", r.Summary())
	if r.OK() {
		return r
	}
	for i, v := range r.Violations {
		if i == 20 {
			b.tb.Errorf("… and %d more violations", len(r.Violations)-i)
			break
		}
		b.tb.Error(v)
	}
	b.SaveHistory(h)
	return r
}
