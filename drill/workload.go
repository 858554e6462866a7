package drill

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsar/backoff"
)

// The properties that name a drill message (Message).
const (
	propProducer = "drill-producer"
	propSeq      = "drill-seq"
)

// keysPerProducer is how many keys each producer cycles through: order is
// judged per key and producer.
const keysPerProducer = 8

// outOfOrderEvery: a consumer holds every outOfOrderEvery-th message and
// acks it after the next one, as consumers that work in parallel do, so
// that individual acks (not only the mark-delete) cross the failover.
const outOfOrderEvery = 5

// holdAtMost is how long a held message waits for the next one.
const holdAtMost = 200 * time.Millisecond

// maxAcksInFlight bounds a consumer's acks not yet returned.
const maxAcksInFlight = 256

// CappedBackoff is the reconnect backoff the README recommends for
// failover (pulsar-client-go's backoff.Policy): doubling from 100 ms, at
// most Max. pulsar-client-go's default doubles up to 60 s, which would
// measure the backoff rather than the failover.
type CappedBackoff struct {
	Max  time.Duration
	next time.Duration
}

func (b *CappedBackoff) Next() time.Duration {
	b.next = min(2*max(b.next, 50*time.Millisecond), b.Max)
	return b.next
}
func (b *CappedBackoff) IsMaxBackoffReached() bool { return false }
func (b *CappedBackoff) Reset()                    { b.next = 0 }

// Workload is the drill's producers and consumers. Start starts them;
// StopProducers and Close end them. Every goroutine belongs to its wg.
type Workload struct {
	rec     *Recorder
	clients []pulsar.Client
	prods   []*workProducer
	conss   []*workConsumer
	wg      sync.WaitGroup
	cancel  context.CancelFunc
	stopped chan struct{} // closed by StopProducers
}

// ClientFactory makes a pulsar-client-go client of the options given
// (URL, logger and keep-alive set by the drill; the factory adds the
// credentials and TLS settings).
type ClientFactory func(pulsar.ClientOptions) (pulsar.Client, error)

type workProducer struct {
	name, topic string
	w           *where
	p           pulsar.Producer
	every       time.Duration
}

type workConsumer struct {
	name, topic, sub string
	w                *where
	c                pulsar.Consumer
}

// WorkloadConfig is what StartWorkload needs.
type WorkloadConfig struct {
	ServiceURL       string
	Topics           []string
	Run              string // names the producers and the subscription
	Rate             int
	SubscriptionType string
	Client           ClientSettings
	Addresses        addresses
	NewClient        ClientFactory
}

func subscriptionType(s string) pulsar.SubscriptionType {
	switch s {
	case "Exclusive":
		return pulsar.Exclusive
	case "Shared":
		return pulsar.Shared
	case "Key_Shared":
		return pulsar.KeyShared
	}
	return pulsar.Failover
}

// StartWorkload subscribes a consumer to every topic and then starts a
// producer on each; on error it closes what it made.
func StartWorkload(ctx context.Context, rec *Recorder, cfg WorkloadConfig) (_ *Workload, err error) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	wl := &Workload{rec: rec, cancel: cancel, stopped: make(chan struct{})}
	defer func() {
		if err != nil {
			wl.Close()
		}
	}()
	newClient := func(w *where) (pulsar.Client, error) {
		c, err := cfg.NewClient(pulsar.ClientOptions{URL: cfg.ServiceURL, KeepAliveInterval: cfg.Client.KeepAlive,
			OperationTimeout: cfg.Client.OperationTimeout, ConnectionTimeout: min(cfg.Client.OperationTimeout, 10*time.Second),
			Logger: logger{w: w}})
		if err == nil {
			wl.clients = append(wl.clients, c)
		}
		return c, err
	}
	policy := func() backoff.Policy { return &CappedBackoff{Max: cfg.Client.MaxBackoff} }
	sub := "drill-" + cfg.Run
	for i, topic := range cfg.Topics {
		w := newWhere(cfg.Addresses)
		client, err := newClient(w)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("drill-%s-c%d", cfg.Run, i)
		c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Name: name,
			Type: subscriptionType(cfg.SubscriptionType), ReplicateSubscriptionState: true,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, BackOffPolicyFunc: policy})
		if err != nil {
			return nil, fmt.Errorf("subscribing to %s: %w", topic, err)
		}
		wl.conss = append(wl.conss, &workConsumer{name: name, topic: topic, sub: sub, w: w, c: c})
	}
	every := time.Duration(float64(time.Second) * float64(len(cfg.Topics)) / float64(cfg.Rate))
	for i, topic := range cfg.Topics {
		w := newWhere(cfg.Addresses)
		client, err := newClient(w)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("drill-%s-p%d", cfg.Run, i)
		p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: name, DisableBatching: true,
			SendTimeout: cfg.Client.OperationTimeout, BackOffPolicyFunc: policy})
		if err != nil {
			return nil, fmt.Errorf("creating a producer on %s: %w", topic, err)
		}
		wl.prods = append(wl.prods, &workProducer{name: name, topic: topic, w: w, p: p, every: every})
	}
	for _, c := range wl.conss {
		wl.wg.Go(func() { c.run(wctx, rec) })
	}
	for _, p := range wl.prods {
		wl.wg.Go(func() { p.run(wctx, wl.stopped, rec) })
	}
	return wl, nil
}

// run sends at the producer's pace until stopped, then flushes.
func (p *workProducer) run(ctx context.Context, stopped <-chan struct{}, rec *Recorder) {
	next := time.Now()
	var pending sync.WaitGroup
	defer pending.Wait()
	for seq := int64(0); ; seq++ {
		next = next.Add(p.every)
		t := time.NewTimer(time.Until(next))
		select {
		case <-t.C:
		case <-stopped:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
		key := "k" + strconv.FormatInt(seq%keysPerProducer, 10)
		s := Send{Message: Message{Producer: p.name, Seq: seq}, Topic: p.topic, Key: key, SentAt: time.Now()}
		pending.Add(1)
		p.p.SendAsync(ctx, &pulsar.ProducerMessage{Key: key, Payload: []byte(s.Message.String()),
			Properties: map[string]string{propProducer: p.name, propSeq: strconv.FormatInt(seq, 10)}},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				defer pending.Done()
				if err != nil {
					s.Err = err.Error()
				} else {
					s.ReceiptAt, s.Region = time.Now(), p.w.Region()
				}
				rec.send(s)
			})
	}
}

func (m Message) String() string { return m.Producer + ":" + strconv.FormatInt(m.Seq, 10) }

// run receives until ctx ends, acking each message, every
// outOfOrderEvery-th one after the next.
func (c *workConsumer) run(ctx context.Context, rec *Recorder) {
	var held *Delivery
	var heldMsg pulsar.Message
	// An ack counts from when the application made it: the client groups
	// acks and sends them within 100ms (pulsar-client-go's default), so
	// the duplicates' ack ages include up to that much in flight.
	// Rejected: AckWithResponse, which counts an ack once the broker
	// confirmed it: the client's event loop then waits a round trip per
	// ack, and on the e2e bed a consumer took some 15 msg/s, far behind
	// its producer. Acks run beside the receiving, at most
	// maxAcksInFlight at once, and a delivery is recorded once its ack
	// returned.
	inFlight := make(chan struct{}, maxAcksInFlight)
	var acks sync.WaitGroup
	defer acks.Wait()
	ack := func(d Delivery, msg pulsar.Message) {
		inFlight <- struct{}{}
		acks.Go(func() {
			defer func() { <-inFlight }()
			if err := c.c.Ack(msg); err == nil {
				d.AckAt = time.Now()
			}
			rec.deliver(d)
		})
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, holdAtMost)
		msg, err := c.c.Receive(rctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			// Nothing came for holdAtMost: the held message is acked
			// alone, as a consumer would not hold it forever.
			if held != nil {
				ack(*held, heldMsg)
				held, heldMsg = nil, nil
			}
			continue
		}
		if err != nil {
			if held != nil {
				rec.deliver(*held)
			}
			return
		}
		seq, _ := strconv.ParseInt(msg.Properties()[propSeq], 10, 64)
		d := Delivery{Message: Message{Producer: msg.Properties()[propProducer], Seq: seq}, Topic: c.topic,
			Subscription: c.sub, Consumer: c.name, Key: msg.Key(), At: time.Now(), Region: c.w.Region()}
		if at := msg.BrokerPublishTime(); at != nil {
			d.StoredAt = *at
		}
		switch {
		case held == nil && seq%outOfOrderEvery == 0:
			held, heldMsg = &d, msg
		default:
			ack(d, msg)
			if held != nil {
				ack(*held, heldMsg)
				held, heldMsg = nil, nil
			}
		}
	}
}

// StopProducers stops sending and waits for every send's outcome.
func (wl *Workload) StopProducers() {
	select {
	case <-wl.stopped:
	default:
		close(wl.stopped)
	}
	for _, p := range wl.prods {
		_ = p.p.FlushWithCtx(context.Background())
	}
}

// Regions are the regions each client is attached to now, by client name.
func (wl *Workload) Regions() map[string]string {
	out := map[string]string{}
	for _, p := range wl.prods {
		out[p.name] = p.w.Region()
	}
	for _, c := range wl.conss {
		out[c.name] = c.w.Region()
	}
	return out
}

// Close stops everything and closes the clients.
func (wl *Workload) Close() {
	select {
	case <-wl.stopped:
	default:
		close(wl.stopped)
	}
	wl.cancel()
	wl.wg.Wait()
	for _, p := range wl.prods {
		p.p.Close()
	}
	for _, c := range wl.conss {
		c.c.Close()
	}
	for _, c := range wl.clients {
		c.Close()
	}
}
