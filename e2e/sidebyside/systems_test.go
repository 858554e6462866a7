//go:build e2e

package sidebyside

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// subscription is the one subscription (Meridian) or durable consumer
// (JetStream) a benchmark reads a stream with.
const subscription = "bench"

// meridianOne is `meridian standalone`, one process holding an embedded
// etcd, one bookie and the broker: ledgers at E=Qw=Qa=1 on that bookie,
// which fdatasyncs its journal before it acknowledges an add (the
// bookie's only mode on disk), and the broker acknowledges a publish
// once the add is confirmed. Driven by pulsar-client-go.
type meridianOne struct {
	proc       *server
	serviceURL string // pulsar://, for tools outside this process
	client     pulsar.Client
	webURL     string
	batchWait  time.Duration
	closeOnce  sync.Once // of client
}

// startMeridianOne starts the standalone on free loopback ports, pinned
// to the env's cores, on a data directory of its own.
func startMeridianOne(t *testing.T, e *env) *meridianOne {
	t.Helper()
	return startMeridianOneIn(t, e, t.TempDir())
}

// startMeridianOneIn is startMeridianOne with its data under dir.
func startMeridianOneIn(t *testing.T, e *env, dir string) *meridianOne {
	t.Helper()
	proc, ready := startServer(t, e, "meridian-standalone", "standalone ready: ", e.meridian, "standalone",
		"--data-dir", filepath.Join(dir, "data"), "--broker-listen", "127.0.0.1:0", "--web-listen", "127.0.0.1:0",
		"--advertised-address", "127.0.0.1", "--log-level", "warn")
	// standalone ready: pulsar://127.0.0.1:P http://127.0.0.1:W etcd=...
	fields := strings.Fields(ready[strings.Index(ready, "standalone ready: "):])
	if len(fields) < 4 {
		t.Fatalf("unexpected ready line %q", ready)
	}
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: fields[2], OperationTimeout: 30 * time.Second,
		ConnectionTimeout: 5 * time.Second, Logger: plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	m := &meridianOne{proc: proc, serviceURL: fields[2], client: client, webURL: fields[3], batchWait: time.Millisecond}
	t.Cleanup(m.stop)
	return m
}

func (m *meridianOne) label() string { return "Meridian (1 bookie, fsync per ack)" }

func (m *meridianOne) stop() {
	m.closeOnce.Do(m.client.Close)
	m.proc.stop()
}

func (m *meridianOne) topic(name string) string { return "persistent://public/default/" + name }

// createStream creates the topic with its subscription at the start, so
// that what is published stays until it is read.
func (m *meridianOne) createStream(ctx context.Context, name string) error {
	c, err := m.client.Subscribe(pulsar.ConsumerOptions{Topic: m.topic(name), SubscriptionName: subscription,
		Type: pulsar.Exclusive, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

// deleteStream deletes the topic through the admin API (with its
// subscription), so that its ledgers go.
func (m *meridianOne) deleteStream(ctx context.Context, name string) error {
	url := m.webURL + "/admin/v2/persistent/public/default/" + name + "?force=true"
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("DELETE %s: %s: %s", url, resp.Status, body)
	}
	return nil
}

type pulsarProducer struct {
	p     pulsar.Producer
	onAck func([]byte)
	mu    sync.Mutex
	err   error // the first failed send
}

// producer batches for 1 ms, as `meridian perf -b 1` and
// pulsar-client-go's perf tool do.
func (m *meridianOne) producer(ctx context.Context, name string, onAck func([]byte)) (producer, error) {
	p, err := m.client.CreateProducer(pulsar.ProducerOptions{Topic: m.topic(name),
		BatchingMaxPublishDelay: m.batchWait, MaxPendingMessages: maxPending, SendTimeout: time.Minute})
	if err != nil {
		return nil, err
	}
	return &pulsarProducer{p: p, onAck: onAck}, nil
}

func (p *pulsarProducer) publish(payload []byte) error {
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err != nil {
		return err
	}
	p.p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: payload},
		func(_ pulsar.MessageID, msg *pulsar.ProducerMessage, err error) {
			if err != nil {
				p.mu.Lock()
				p.err = errors.Join(p.err, err)
				p.mu.Unlock()
				return
			}
			p.onAck(msg.Payload)
		})
	return nil
}

func (p *pulsarProducer) close() { p.p.Close() }

func (m *meridianOne) consume(ctx context.Context, name string, onReceive func([]byte)) (func(), error) {
	c, err := m.client.Subscribe(pulsar.ConsumerOptions{Topic: m.topic(name), SubscriptionName: subscription,
		Type: pulsar.Exclusive, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		ReceiverQueueSize: receiveQueue})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	// The reader: it ends when stop cancels its context.
	go func() {
		defer close(done)
		for n := 1; ; n++ {
			msg, err := c.Receive(ctx)
			if err != nil {
				return
			}
			onReceive(msg.Payload())
			if n%ackEvery == 0 {
				_ = c.AckCumulative(msg) // progress only: the figures do not depend on it
			}
		}
	}()
	return func() { cancel(); <-done; c.Close() }, nil
}

// natsOne is nats-server with JetStream, one R1 stream per benchmark on
// file storage, driven by nats.go's jetstream package (async publish,
// pull consumer).
type natsOne struct {
	proc       *server
	conn       *nats.Conn
	js         jetstream.JetStream
	syncAlways bool
}

// startNATSOne starts nats-server on a free loopback port, pinned to the
// env's cores, storing in a directory of its own; syncAlways sets
// `sync_interval: always` (an fsync after every write), otherwise the
// server's default applies.
func startNATSOne(t *testing.T, e *env, syncAlways bool) *natsOne {
	t.Helper()
	dir := t.TempDir()
	js := fmt.Sprintf("jetstream {\n  store_dir: %q\n", filepath.Join(dir, "js"))
	if syncAlways {
		js += "  sync_interval: always\n"
	}
	conf := "listen: \"127.0.0.1:-1\"\n" + js + "}\n"
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	name := "nats-server"
	if syncAlways {
		name += "-sync-always"
	}
	proc, ready := startServer(t, e, name, "Listening for client connections on ", e.natsServer, "-c", path)
	addr := strings.TrimSpace(ready[strings.Index(ready, "Listening for client connections on ")+len("Listening for client connections on "):])
	if _, err := proc.waitLog(t.Context(), "Server is ready", time.Minute); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	j, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	n := &natsOne{proc: proc, conn: nc, js: j, syncAlways: syncAlways}
	t.Cleanup(n.stop)
	return n
}

func (n *natsOne) label() string {
	if n.syncAlways {
		return "JetStream R1, sync always"
	}
	return "JetStream R1, default sync"
}

func (n *natsOne) stop() {
	n.conn.Close()
	n.proc.stop()
}

func (n *natsOne) createStream(ctx context.Context, name string) error {
	_, err := n.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name},
		Storage: jetstream.FileStorage, Replicas: 1})
	return err
}

func (n *natsOne) deleteStream(ctx context.Context, name string) error {
	return n.js.DeleteStream(ctx, name)
}

type natsProducer struct {
	conn    *nats.Conn
	js      jetstream.JetStream
	subject string
	mu      sync.Mutex
	err     error // the first failed publish
}

// producer publishes asynchronously on a connection of its own, so that
// its acknowledgement handler is its own.
func (n *natsOne) producer(ctx context.Context, name string, onAck func([]byte)) (producer, error) {
	nc, err := nats.Connect(n.conn.ConnectedUrl())
	if err != nil {
		return nil, err
	}
	p := &natsProducer{conn: nc, subject: name}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPending),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) { onAck(m.Data) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			p.mu.Lock()
			p.err = errors.Join(p.err, err)
			p.mu.Unlock()
		}))
	if err != nil {
		nc.Close()
		return nil, err
	}
	p.js = js
	return p, nil
}

func (p *natsProducer) publish(payload []byte) error {
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err != nil {
		return err
	}
	// A full queue of unacknowledged messages blocks the publish, as it
	// does pulsar-client-go's, up to maxLag instead of 200 ms.
	_, err = p.js.PublishAsync(p.subject, payload, jetstream.WithStallWait(maxLag))
	if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
		return fmt.Errorf("%w: %w", errBehind, err)
	}
	return err
}

func (p *natsProducer) close() {
	select {
	case <-p.js.PublishAsyncComplete():
	case <-time.After(maxLag):
		// Not sustained: what is still queued is dropped with the
		// connection.
	}
	p.conn.Close()
}

func (n *natsOne) consume(ctx context.Context, name string, onReceive func([]byte)) (func(), error) {
	c, err := n.js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: subscription,
		AckPolicy: jetstream.AckAllPolicy, MaxAckPending: 2 * receiveQueue, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, err
	}
	count := 0
	cc, err := c.Consume(func(msg jetstream.Msg) {
		onReceive(msg.Data())
		if count++; count%ackEvery == 0 {
			_ = msg.Ack() // progress only: the figures do not depend on it
		}
	}, jetstream.PullMaxMessages(receiveQueue))
	if err != nil {
		return nil, err
	}
	return func() { cc.Stop(); <-cc.Closed() }, nil
}
