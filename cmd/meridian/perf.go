package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// perfCLI holds `meridian perf`'s global flags. They are the flags of
// pulsar-client-go's perf tool (pulsar-perf-go) with the same names and
// defaults, so that a benchmark's command line carries over, plus the
// authentication and TLS flags of `meridian admin`.
//
// Why not pulsar-perf-go itself: it computes its percentiles with
// github.com/bmizerany/perks, whose targeted quantile stream answers the
// window's maximum when asked for p99 once a window holds a few slow
// samples (200k samples of 1-4 ms with 0.1% of them at 20-30 ms: perks
// says p99 = 29.9 ms, the true p99 is 4.0 ms). Here every latency goes
// into an HdrHistogram (1 µs to 10 min, 3 significant digits), whose
// percentiles are exact to within 0.1%.
//
// `meridian produce` and `meridian consume` connect through it too, with
// the service URL, timeout and credential fields only (client.go).
type perfCLI struct {
	credentials
	serviceURL   string
	listenerName string
	maxConns     int
	opTimeout    time.Duration
	interval     time.Duration
	duration     time.Duration
	jsonFile     string
}

// The histogram's range and precision: microseconds from 1 µs to 10 min,
// 3 significant digits. A latency outside it is clamped to it.
const (
	histMinMicros = 1
	histMaxMicros = int64(10 * time.Minute / time.Microsecond)
	histSigFigs   = 3
)

func newPerfCommand() *cobra.Command {
	p := &perfCLI{}
	cmd := &cobra.Command{
		Use:   "perf",
		Short: "Load generator with exact latency percentiles (like pulsar-client-go's perf tool)",
		Long: `Produce or consume at a set rate and report throughput and latency
percentiles every --interval, and a summary over the whole run on exit (when
--duration is over, or on SIGINT/SIGTERM); --json FILE writes the summary.
The flags are those of pulsar-client-go's perf tool (pulsar-perf-go), so a
command line carries over:
  meridian perf produce -r 20000 -s 1024 persistent://public/default/bench --duration 60s
  meridian perf consume -s sub -t Shared persistent://public/default/bench
Unlike pulsar-perf-go, whose quantile sketch (bmizerany/perks) reports the
window's maximum as p99 once a window holds a few slow samples, the
percentiles here come from an HdrHistogram and are exact to 0.1%.
pulsar-perf-go's --trust-cert-file, --cert-file and --key-file are accepted
as other names of --tls-trust-cert-path, --tls-cert-file and --tls-key-file.`,
		Args: cobra.NoArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringVarP(&p.serviceURL, "service-url", "u", "pulsar://localhost:6650", "the broker's service URL (pulsar+ssl:// for TLS)")
	p.listenerFlag(pf)
	p.register(cmd)
	pf.StringVar(&p.trustCert, "trust-cert-file", "", "pulsar-perf-go's name for --tls-trust-cert-path")
	pf.StringVar(&p.certFile, "cert-file", "", "pulsar-perf-go's name for --tls-cert-file")
	pf.StringVar(&p.keyFile, "key-file", "", "pulsar-perf-go's name for --tls-key-file")
	pf.IntVarP(&p.maxConns, "max-connections", "c", 1, "connections to open to each broker")
	pf.DurationVar(&p.opTimeout, "operation-timeout", 30*time.Second, "how long creating a producer or consumer may take (the client's operation timeout)")
	pf.DurationVar(&p.interval, "interval", 10*time.Second, "how often to print a line for the last window")
	pf.DurationVar(&p.duration, "duration", 0, "how long to run, e.g. 30s (0: until interrupted)")
	pf.StringVar(&p.jsonFile, "json", "", "write the summary (every window and the total) as JSON to this file")
	for _, alias := range []string{"trust-cert-file", "cert-file", "key-file"} {
		_ = pf.MarkHidden(alias)
	}
	cmd.AddCommand(p.produceCommand(), p.consumeCommand())
	return cmd
}

// validate checks the global flags before anything connects.
func (p *perfCLI) validate(args []string) error {
	switch {
	case len(args) == 0:
		return errors.New("no topic: give one or more topics, e.g. persistent://public/default/bench")
	case p.interval <= 0:
		return fmt.Errorf("--interval %v: want a positive duration, e.g. 10s", p.interval)
	case p.duration < 0:
		return fmt.Errorf("--duration %v: want 0 (until interrupted) or a positive duration", p.duration)
	case p.maxConns < 1:
		return fmt.Errorf("--max-connections %d: want 1 or more", p.maxConns)
	}
	return p.validateConnection("--service-url")
}

// validateConnection checks the flags that client reads: the operation
// timeout, the credentials and the service URL, whose flag urlFlag names.
func (p *perfCLI) validateConnection(urlFlag string) error {
	if p.opTimeout <= 0 {
		return fmt.Errorf("--operation-timeout %v: want a positive duration", p.opTimeout)
	}
	if err := p.check(); err != nil {
		return err
	}
	if !strings.HasPrefix(p.serviceURL, "pulsar://") && !strings.HasPrefix(p.serviceURL, "pulsar+ssl://") {
		return fmt.Errorf("%s %q: want pulsar://host:port or pulsar+ssl://host:port", urlFlag, p.serviceURL)
	}
	return nil
}

// listenerFlag adds --listener-name, as pulsar-client and pulsar-perf
// name it, to fs.
func (p *perfCLI) listenerFlag(fs *pflag.FlagSet) {
	fs.StringVar(&p.listenerName, "listener-name", "", "the brokers' advertised listener to connect through (their --advertised-listeners; the client's ListenerName), "+
		"for a client on another network than the brokers' internal one; empty: the internal listener")
}

// client makes the pulsar client the flags describe. It logs warnings and
// errors only, to stderr, so that the report stays readable.
func (p *perfCLI) client(stderr io.Writer) (pulsar.Client, error) {
	opts, err := p.clientOptions(stderr)
	if err != nil {
		return nil, err
	}
	c, err := pulsar.NewClient(opts)
	if err != nil {
		return nil, fmt.Errorf("pulsar client for %s: %w", p.serviceURL, err)
	}
	return c, nil
}

// clientOptions are the client's options the flags describe.
func (p *perfCLI) clientOptions(stderr io.Writer) (pulsar.ClientOptions, error) {
	opts := pulsar.ClientOptions{
		URL:                        p.serviceURL,
		ListenerName:               p.listenerName,
		OperationTimeout:           p.opTimeout,
		ConnectionTimeout:          min(p.opTimeout, 10*time.Second),
		MaxConnectionsPerBroker:    p.maxConns,
		TLSTrustCertsFilePath:      p.trustCert,
		TLSAllowInsecureConnection: p.insecure,
		Logger:                     plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}
	switch {
	case p.token != "":
		opts.Authentication = pulsar.NewAuthenticationToken(p.token)
	case p.tokenFile != "":
		if _, err := os.Stat(p.tokenFile); err != nil {
			return opts, fmt.Errorf("--token-file: %w", err)
		}
		opts.Authentication = pulsar.NewAuthenticationTokenFromFile(p.tokenFile)
	case p.certFile != "":
		opts.Authentication = pulsar.NewAuthenticationTLS(p.certFile, p.keyFile)
	}
	return opts, nil
}

// unreachable explains a failure to create a producer or consumer.
func (p *perfCLI) unreachable(what, topic string, err error) error {
	return fmt.Errorf("cannot create a %s on %s at %s within %v: %w (is a broker serving there? set -u/--service-url, or a longer --operation-timeout)",
		what, topic, p.serviceURL, p.opTimeout, err)
}

// runContext is the command's context, ended by SIGINT, SIGTERM or
// --duration.
func (p *perfCLI) runContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stopSignals := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	if p.duration <= 0 {
		return ctx, stopSignals
	}
	ctx, cancel := context.WithTimeout(ctx, p.duration)
	return ctx, func() { cancel(); stopSignals() }
}

// ---- produce ----

type produceArgs struct {
	rate         int
	size         int
	batchingTime int // ms; 0 disables batching
	batchMaxKB   uint
	batchMaxMsgs uint
	queueSize    int
	producers    int
	numMessages  int64
	// traceRatio, from 0 to 1, gives every message a traceparent (see
	// traceProperties); below 0, none.
	traceRatio float64
}

func (p *perfCLI) produceCommand() *cobra.Command {
	a := &produceArgs{}
	cmd := &cobra.Command{
		Use:   "produce TOPIC...",
		Short: "Produce to topics at a set rate and report publish latency (send to broker ack)",
		Long: `Produce to each topic with --num-producers producers, at --rate messages per
second in all, and report the publish rate and latency: from just before
SendAsync to its callback, as pulsar-perf-go measures it, but without the time
spent waiting for the rate limiter. A failed send ends the run with an error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := p.validate(args); err != nil {
				return err
			}
			if err := a.validate(); err != nil {
				return err
			}
			return p.produce(cmd, args, a)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&a.rate, "rate", "r", 100, "messages per second over all producers (0: as fast as possible)")
	f.IntVarP(&a.size, "size", "s", 1024, "message size in bytes")
	f.IntVarP(&a.batchingTime, "batching-time", "b", 1, "batching delay in milliseconds (0: no batching)")
	f.UintVar(&a.batchMaxKB, "batching-max-size", 128, "largest batch in KB")
	f.UintVar(&a.batchMaxMsgs, "batching-num-messages", 1000, "most messages in a batch")
	f.UintVar(&a.batchMaxMsgs, "batching-max-messages", 1000, "another name of --batching-num-messages")
	_ = f.MarkHidden("batching-max-messages")
	f.IntVarP(&a.queueSize, "queue-size", "q", 1000, "most messages a producer has pending (sent, not yet acknowledged); a full queue blocks the sender")
	f.IntVarP(&a.producers, "num-producers", "n", 1, "producers per topic")
	f.Int64Var(&a.numMessages, "num-messages", 0, "stop after sending this many messages in all (0: no limit)")
	f.Float64Var(&a.traceRatio, "traceparent-ratio", -1, "give every message a W3C traceparent of its own trace, sampled with this probability (0..1), "+
		"as a producer instrumented with OpenTelemetry at that sampling rate sends them (-1: no traceparent)")
	return cmd
}

func (a *produceArgs) validate() error {
	switch {
	case a.rate < 0:
		return fmt.Errorf("--rate %d: want 0 (as fast as possible) or a positive rate in msg/s", a.rate)
	case a.size <= 0:
		return fmt.Errorf("--size %d: want a message size of 1 byte or more", a.size)
	case a.batchingTime < 0:
		return fmt.Errorf("--batching-time %d: want milliseconds, 0 to disable batching", a.batchingTime)
	case a.batchMaxKB == 0 || a.batchMaxKB > math.MaxUint32/1024:
		return fmt.Errorf("--batching-max-size %d: want KB, 1 or more", a.batchMaxKB)
	case a.batchMaxMsgs == 0:
		return errors.New("--batching-num-messages: want 1 or more")
	case a.queueSize < 1:
		return fmt.Errorf("--queue-size %d: want 1 or more", a.queueSize)
	case a.producers < 1:
		return fmt.Errorf("--num-producers %d: want 1 or more", a.producers)
	case a.numMessages < 0:
		return fmt.Errorf("--num-messages %d: want 0 (no limit) or more", a.numMessages)
	case a.traceRatio > 1 || (a.traceRatio < 0 && a.traceRatio != -1):
		return fmt.Errorf("--traceparent-ratio %v: want a probability from 0 to 1, or -1 for no traceparent", a.traceRatio)
	}
	return nil
}

func (p *perfCLI) produce(cmd *cobra.Command, topics []string, a *produceArgs) error {
	ctx, cancel := p.runContext(cmd.Context())
	defer cancel()
	client, err := p.client(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer client.Close()
	var producers []pulsar.Producer
	defer func() {
		for _, pr := range producers {
			pr.Close()
		}
	}()
	for _, topic := range topics {
		for range a.producers {
			pr, err := client.CreateProducer(pulsar.ProducerOptions{
				Topic:                   topic,
				MaxPendingMessages:      a.queueSize,
				DisableBatching:         a.batchingTime == 0,
				BatchingMaxPublishDelay: time.Duration(a.batchingTime) * time.Millisecond,
				BatchingMaxSize:         uint(a.batchMaxKB) * 1024,
				BatchingMaxMessages:     a.batchMaxMsgs,
			})
			if err != nil {
				return p.unreachable("producer", topic, err)
			}
			producers = append(producers, pr)
		}
	}
	out := cmd.OutOrStdout()
	rateText := "as fast as possible"
	if a.rate > 0 {
		rateText = fmt.Sprintf("%d msg/s", a.rate)
	}
	fmt.Fprintf(out, "perf produce ready: %d producers on %d topics, %s, %d-byte messages\n", len(producers), len(topics), rateText, a.size)

	m := newMeter()
	work := func() error {
		payload := make([]byte, a.size)
		var (
			sent     atomic.Int64 // sends started, for --num-messages
			inflight sync.WaitGroup
			failOnce sync.Once
			failErr  error
		)
		sendCtx, stopSending := context.WithCancel(ctx)
		defer stopSending()
		perProducer := float64(a.rate) / float64(len(producers))
		var senders sync.WaitGroup
		for _, pr := range producers {
			senders.Go(func() {
				pace := newPacer(perProducer)
				for {
					if !pace.wait(sendCtx) {
						return
					}
					if a.numMessages > 0 && sent.Add(1) > a.numMessages {
						return
					}
					inflight.Add(1)
					start := time.Now()
					// Not sendCtx: what is sent when the run ends is still
					// awaited and counted.
					pr.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: payload, Properties: traceProperties(a.traceRatio)},
						func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
							defer inflight.Done()
							if err != nil {
								failOnce.Do(func() { failErr = err; stopSending() })
								return
							}
							m.record(time.Since(start), len(payload))
						})
				}
			})
		}
		senders.Wait()
		// The run may be over (ctx done): flush what is batched anyway,
		// bounded like any client operation, so that it completes.
		flushCtx, cancelFlush := context.WithTimeout(context.WithoutCancel(ctx), p.opTimeout)
		for _, pr := range producers {
			_ = pr.FlushWithCtx(flushCtx)
		}
		cancelFlush()
		inflight.Wait()
		if failErr != nil {
			return fmt.Errorf("send failed: %w", failErr)
		}
		return nil
	}
	return p.measure(out, "produce", topics, m, work)
}

// pacer spaces calls to wait so that they average rate per second. It
// keeps a schedule rather than sleeping one interval per call, so timer
// slack does not lower the rate; after a stall (a full producer queue) it
// catches up for at most a second's worth of sends rather than bursting
// the whole backlog.
type pacer struct {
	every time.Duration // 0: no pacing
	next  time.Time
}

func newPacer(rate float64) *pacer {
	if rate <= 0 {
		return &pacer{}
	}
	return &pacer{every: time.Duration(float64(time.Second) / rate), next: time.Now()}
}

// wait returns when the next call is due, or false once ctx ends.
func (p *pacer) wait(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	if p.every == 0 {
		return true
	}
	now := time.Now()
	if lag := now.Sub(p.next); lag > time.Second {
		p.next = now.Add(-time.Second)
	}
	// A send due at or after the run's deadline is not made, even if the
	// deadline's timer has not fired yet (it can fire late on a busy
	// machine, while the schedule catches up): --duration at --rate sends
	// at most duration × rate messages.
	if dl, ok := ctx.Deadline(); ok && !p.next.Before(dl) {
		return false
	}
	if d := p.next.Sub(now); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
	p.next = p.next.Add(p.every)
	return true
}

// ---- consume ----

type consumeArgs struct {
	subscription   string
	subType        string
	subMode        int
	position       string
	receiverQueue  int
	rate           int
	numMessages    int64
	batchIndexAck  bool
	autoScaleQueue bool
}

func (p *perfCLI) consumeCommand() *cobra.Command {
	a := &consumeArgs{}
	cmd := &cobra.Command{
		Use:   "consume TOPIC...",
		Short: "Consume from topics and report end-to-end latency (publish time to receipt)",
		Long: `Subscribe to the topics with one consumer, acknowledge every message and
report the receive rate and the end-to-end latency: from the message's publish
time (set by the producer's client, in milliseconds) to its receipt. The
producer's and the consumer's clocks must agree; the publish time's millisecond
resolution adds up to 1 ms.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := p.validate(args); err != nil {
				return err
			}
			opts, err := a.options(args)
			if err != nil {
				return err
			}
			return p.consume(cmd, args, a, opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&a.subscription, "subscription", "s", "sub", "subscription name")
	f.StringVarP(&a.subType, "subscription-type", "t", "Exclusive", "subscription type: Exclusive, Shared, Failover or Key_Shared (or pulsar-perf-go's 0-3)")
	f.IntVarP(&a.subMode, "subscription-mode", "m", int(pulsar.Durable), "subscription mode: 0 durable, 1 non-durable")
	f.StringVar(&a.position, "subscription-position", "Latest", "where a new subscription starts: Latest or Earliest")
	f.IntVarP(&a.receiverQueue, "receiver-queue-size", "r", 1000, "messages the client prefetches per consumer")
	f.IntVar(&a.rate, "rate", 0, "most messages per second to receive (0: no limit)")
	f.Int64Var(&a.numMessages, "num-messages", 0, "stop after receiving this many messages (0: no limit)")
	f.BoolVar(&a.batchIndexAck, "enable-batch-index-ack", false, "acknowledge messages of a batch one by one")
	f.BoolVar(&a.autoScaleQueue, "enable-auto-scaled-queue-size", false, "let the client grow the receiver queue as needed")
	return cmd
}

// subscriptionTypes maps what --subscription-type takes to the type: the
// Pulsar names, and the numbers pulsar-perf-go takes.
var subscriptionTypes = map[string]pulsar.SubscriptionType{
	"exclusive": pulsar.Exclusive, "shared": pulsar.Shared, "failover": pulsar.Failover,
	"key_shared": pulsar.KeyShared, "keyshared": pulsar.KeyShared,
	"0": pulsar.Exclusive, "1": pulsar.Shared, "2": pulsar.Failover, "3": pulsar.KeyShared,
}

// subscriptionPositions maps what --subscription-position takes, in lower
// case, to the position.
var subscriptionPositions = map[string]pulsar.SubscriptionInitialPosition{
	"latest": pulsar.SubscriptionPositionLatest, "earliest": pulsar.SubscriptionPositionEarliest,
}

func (a *consumeArgs) options(topics []string) (pulsar.ConsumerOptions, error) {
	opts := pulsar.ConsumerOptions{
		SubscriptionName:                  a.subscription,
		ReceiverQueueSize:                 a.receiverQueue,
		EnableBatchIndexAcknowledgment:    a.batchIndexAck,
		EnableAutoScaledReceiverQueueSize: a.autoScaleQueue,
	}
	if len(topics) == 1 {
		opts.Topic = topics[0]
	} else {
		opts.Topics = topics
	}
	typ, ok := subscriptionTypes[strings.ToLower(a.subType)]
	if !ok {
		return opts, fmt.Errorf("--subscription-type %q: want Exclusive, Shared, Failover or Key_Shared", a.subType)
	}
	opts.Type = typ
	switch a.subMode {
	case int(pulsar.Durable), int(pulsar.NonDurable):
		opts.SubscriptionMode = pulsar.SubscriptionMode(a.subMode)
	default:
		return opts, fmt.Errorf("--subscription-mode %d: want 0 (durable) or 1 (non-durable)", a.subMode)
	}
	pos, ok := subscriptionPositions[strings.ToLower(a.position)]
	if !ok {
		return opts, fmt.Errorf("--subscription-position %q: want Latest or Earliest", a.position)
	}
	opts.SubscriptionInitialPosition = pos
	switch {
	case a.subscription == "":
		return opts, errors.New("--subscription: want a subscription name")
	case a.receiverQueue < 1:
		return opts, fmt.Errorf("--receiver-queue-size %d: want 1 or more", a.receiverQueue)
	case a.rate < 0:
		return opts, fmt.Errorf("--rate %d: want 0 (no limit) or a positive rate in msg/s", a.rate)
	case a.numMessages < 0:
		return opts, fmt.Errorf("--num-messages %d: want 0 (no limit) or more", a.numMessages)
	}
	return opts, nil
}

func (p *perfCLI) consume(cmd *cobra.Command, topics []string, a *consumeArgs, opts pulsar.ConsumerOptions) error {
	ctx, cancel := p.runContext(cmd.Context())
	defer cancel()
	client, err := p.client(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer client.Close()
	cons, err := client.Subscribe(opts)
	if err != nil {
		return p.unreachable("consumer", strings.Join(topics, ","), err)
	}
	defer cons.Close()
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "perf consume ready: subscription %q (%s) on %d topics\n", a.subscription, a.subType, len(topics))

	m := newMeter()
	work := func() error {
		pace := newPacer(float64(a.rate))
		for n := int64(0); a.numMessages == 0 || n < a.numMessages; n++ {
			if !pace.wait(ctx) {
				return nil
			}
			msg, err := cons.Receive(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("receive: %w", err)
			}
			m.record(time.Since(msg.PublishTime()), len(msg.Payload()))
			if err := cons.Ack(msg); err != nil {
				return fmt.Errorf("ack: %w", err)
			}
		}
		return nil
	}
	return p.measure(out, "consume", topics, m, work)
}

// ---- measurement and report ----

// meter collects one window's latencies. Callers of record are the
// client's callback goroutines (produce) or the receive loop (consume); the
// report loop alone calls swap. A mutex rather than a channel to the
// report loop: recording must not wait on printing.
type meter struct {
	mu struct {
		sync.Mutex
		hist  *hdrhistogram.Histogram
		bytes int64
	}
}

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs)
}

func newMeter() *meter {
	m := &meter{}
	m.mu.hist = newHistogram()
	return m
}

// record adds one message of size bytes that took lat.
func (m *meter) record(lat time.Duration, bytes int) {
	us := min(max(lat.Microseconds(), 0), histMaxMicros)
	m.mu.Lock()
	_ = m.mu.hist.RecordValue(us) // cannot fail: us is within the range
	m.mu.bytes += int64(bytes)
	m.mu.Unlock()
}

// swap returns the window recorded so far and starts the next one in
// spare, which must be empty.
func (m *meter) swap(spare *hdrhistogram.Histogram) (*hdrhistogram.Histogram, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, b := m.mu.hist, m.mu.bytes
	m.mu.hist, m.mu.bytes = spare, 0
	return h, b
}

// perfStats is one window's figures, or the whole run's. Latencies are in
// milliseconds; Max is the histogram's (exact to 0.1%).
type perfStats struct {
	Start    time.Time `json:"start"`
	Seconds  float64   `json:"seconds"`
	Count    int64     `json:"count"`
	Rate     float64   `json:"rate"`     // msg/s
	MBPerSec float64   `json:"mbPerSec"` // MB = 2^20 bytes
	P50      float64   `json:"p50"`
	P95      float64   `json:"p95"`
	P99      float64   `json:"p99"`
	P999     float64   `json:"p999"`
	Max      float64   `json:"max"`
}

// perfSummary is what --json writes.
type perfSummary struct {
	Command string      `json:"command"` // produce or consume
	Topics  []string    `json:"topics"`
	Windows []perfStats `json:"windows"`
	Total   perfStats   `json:"total"`
}

func statsOf(h *hdrhistogram.Histogram, bytes int64, start time.Time, elapsed time.Duration) perfStats {
	ms := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
	s := perfStats{Start: start, Seconds: elapsed.Seconds(), Count: h.TotalCount(),
		P50: ms(50), P95: ms(95), P99: ms(99), P999: ms(99.9), Max: float64(h.Max()) / 1000}
	if h.TotalCount() == 0 {
		s.Max = 0
	}
	if elapsed > 0 {
		s.Rate = float64(s.Count) / elapsed.Seconds()
		s.MBPerSec = float64(bytes) / (1 << 20) / elapsed.Seconds()
	}
	return s
}

func (s perfStats) line() string {
	return fmt.Sprintf("%9.1f msg/s  %8.3f MB/s  latency ms  p50 %.3f  p95 %.3f  p99 %.3f  p99.9 %.3f  max %.3f",
		s.Rate, s.MBPerSec, s.P50, s.P95, s.P99, s.P999, s.Max)
}

// measure runs work, printing a line for each --interval window, until
// work returns (it watches the run's context). Then it prints the
// summary over the whole run, writes --json if asked, and returns work's
// error. This goroutine alone prints and owns the total histogram.
func (p *perfCLI) measure(out io.Writer, name string, topics []string, m *meter, work func() error) error {
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- work() }()
	total, spare := newHistogram(), newHistogram()
	var totalBytes int64
	sum := perfSummary{Command: name, Topics: topics, Windows: []perfStats{}}
	windowStart := began
	closeWindow := func(now time.Time) perfStats {
		h, b := m.swap(spare)
		s := statsOf(h, b, windowStart, now.Sub(windowStart))
		total.Merge(h)
		totalBytes += b
		h.Reset()
		spare = h
		windowStart = now
		sum.Windows = append(sum.Windows, s)
		return s
	}
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	var workErr error
loop:
	for {
		select {
		case now := <-tick.C:
			s := closeWindow(now)
			fmt.Fprintf(out, "%s %s  (%d in total)\n", name, s.line(), total.TotalCount())
		case workErr = <-done:
			break loop
		}
	}
	end := time.Now()
	if end.Sub(windowStart) > 0 {
		closeWindow(end)
	}
	sum.Total = statsOf(total, totalBytes, began, end.Sub(began))
	fmt.Fprintf(out, "%s summary: %d messages in %.1fs: %s\n", name, sum.Total.Count, sum.Total.Seconds, sum.Total.line())
	if p.jsonFile != "" {
		b, err := json.MarshalIndent(sum, "", "  ")
		if err == nil {
			err = os.WriteFile(p.jsonFile, append(b, '\n'), 0o644)
		}
		if err != nil {
			return errors.Join(workErr, fmt.Errorf("--json %s: %w", p.jsonFile, err))
		}
	}
	return workErr
}
