package broker_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
)

// receiveWait bounds every Receive of a message the test expects.
const receiveWait = 10 * time.Second

// topicFor is a topic of namespace public/default named after the (sub)test.
func topicFor(t testing.TB, suffix ...string) string {
	return topicIn(t, "public/default", suffix...)
}

// topicIn is a topic of namespace ns ("tenant/ns") named after the test.
func topicIn(t testing.TB, ns string, suffix ...string) string {
	name := strings.NewReplacer("/", "-", " ", "-", "_", "-", "=", "-").Replace(strings.ToLower(t.Name()))
	return "persistent://" + ns + "/" + name + strings.Join(suffix, "")
}

// receive returns the next message of c, failing the test after receiveWait.
func receive(t testing.TB, c interface {
	Receive(context.Context) (pulsar.Message, error)
}) pulsar.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), receiveWait)
	defer cancel()
	m, err := c.Receive(ctx)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return m
}

// next returns the reader's next message, failing the test after
// receiveWait.
func next(t testing.TB, r pulsar.Reader) pulsar.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), receiveWait)
	defer cancel()
	m, err := r.Next(ctx)
	if err != nil {
		t.Fatalf("reader next: %v", err)
	}
	return m
}

// expectNothing fails the test if c delivers a message within d.
func expectNothing(t testing.TB, c pulsar.Consumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if m, err := c.Receive(ctx); err == nil {
		t.Fatalf("unexpected message %q (id %v)", m.Payload(), m.ID())
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("receive: %v", err)
	}
}

// produce sends n messages "<prefix><i>" synchronously and returns their ids.
func produce(t testing.TB, p pulsar.Producer, prefix string, n int) []pulsar.MessageID {
	t.Helper()
	ids := make([]pulsar.MessageID, 0, n)
	for i := range n {
		id, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%s%d", prefix, i)})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		ids = append(ids, id)
	}
	return ids
}

func createProducer(t testing.TB, c pulsar.Client, opts pulsar.ProducerOptions) pulsar.Producer {
	t.Helper()
	p, err := c.CreateProducer(opts)
	if err != nil {
		t.Fatalf("create producer on %s: %v", opts.Topic, err)
	}
	t.Cleanup(p.Close)
	return p
}

func subscribe(t testing.TB, c pulsar.Client, opts pulsar.ConsumerOptions) pulsar.Consumer {
	t.Helper()
	cons, err := c.Subscribe(opts)
	if err != nil {
		t.Fatalf("subscribe %s to %s%s: %v", opts.SubscriptionName, opts.Topic, opts.TopicsPattern, err)
	}
	t.Cleanup(cons.Close)
	return cons
}

// compareIDs orders message ids of one topic partition.
func compareIDs(a, b pulsar.MessageID) int {
	switch {
	case a.LedgerID() != b.LedgerID():
		return cmpInt(a.LedgerID(), b.LedgerID())
	case a.EntryID() != b.EntryID():
		return cmpInt(a.EntryID(), b.EntryID())
	default:
		return cmpInt(a.BatchIdx(), b.BatchIdx())
	}
}

func cmpInt[T int64 | int32](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// createNamespace creates public/<name> in the region with policies p
// and waits until the broker's policy cache shows it. It returns
// "public/<name>".
func createNamespace(t testing.TB, r *brokertest.Broker, name string, p global.Policies) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if p.ReplicationClusters == nil {
		p.ReplicationClusters = []string{"standalone"}
	}
	receipt, err := r.Service().Global().CreateNamespace(ctx, "public", name, p)
	if err != nil {
		t.Fatalf("create namespace public/%s: %v", name, err)
	}
	if err := r.Service().Policies().Await(ctx, receipt); err != nil {
		t.Fatal(err)
	}
	return "public/" + name
}

// createPartitioned creates topic with n partitions and waits for the cache.
func createPartitioned(t testing.TB, r *brokertest.Broker, topic string, n int) {
	t.Helper()
	createTopic(t, r, topic, global.TopicPolicies{Partitions: n})
}

// createTopic creates topic's global record with policies p and waits until
// the broker's policy cache shows it.
func createTopic(t testing.TB, r *brokertest.Broker, topic string, p global.TopicPolicies) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	receipt, err := r.Service().Global().CreateTopic(ctx, mustTopic(t, topic), p)
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if err := r.Service().Policies().Await(ctx, receipt); err != nil {
		t.Fatal(err)
	}
}

// meridianGoroutines counts the goroutines with a Meridian cluster
// function on their stack (the broker's, the bookie's, etcd wrappers';
// the test's own goroutine counts too, the same before and after).
func meridianGoroutines() (int, string) {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	var stacks []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "meridian/cluster/") {
			n++
			stacks = append(stacks, g)
		}
	}
	return n, strings.Join(stacks, "\n\n")
}

// awaitGoroutines waits until at most base Meridian goroutines run.
func awaitGoroutines(t testing.TB, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, stacks := meridianGoroutines()
		if n <= base {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Meridian goroutines, baseline %d:\n%s", n, base, stacks)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// brokerAddr is the host:port of the region's Pulsar protocol listener.
func brokerAddr(r *brokertest.Broker) string { return strings.TrimPrefix(r.ServiceURL(), "pulsar://") }

// expect returns the next command, failing unless it has type want.
func (c *rawClient) expect(want pb.BaseCommand_Type) *pb.BaseCommand {
	c.t.Helper()
	return c.expectOneOf(want)
}

// expectOneOf returns the next command, failing unless its type is one of
// want.
func (c *rawClient) expectOneOf(want ...pb.BaseCommand_Type) *pb.BaseCommand {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(receiveWait))
	defer c.nc.SetReadDeadline(time.Time{})
	cmd, err := c.next()
	if err != nil {
		c.t.Fatalf("waiting for %v: %v", want, err)
	}
	if !slices.Contains(want, cmd.GetType()) {
		c.t.Fatalf("got %v, want %v", cmd, want)
	}
	return cmd
}

// sendMessage sends one unbatched message for producer id.
func (c *rawClient) sendMessage(producerID uint64, producerName string, seq uint64, payload []byte) {
	c.t.Helper()
	msg, err := wire.AppendMessage(nil, pb.MessageMetadata_builder{
		ProducerName: proto.String(producerName), SequenceId: proto.Uint64(seq),
		PublishTime: proto.Uint64(uint64(time.Now().UnixMilli())),
	}.Build(), payload)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := pb.BaseCommand_builder{Type: pb.BaseCommand_SEND.Enum(), Send: pb.CommandSend_builder{
		ProducerId: proto.Uint64(producerID), SequenceId: proto.Uint64(seq), NumMessages: proto.Int32(1),
	}.Build()}.Build()
	if err := c.w.WritePayloadCommand(cmd, nil, msg); err != nil {
		c.t.Fatal(err)
	}
	if err := c.w.Flush(); err != nil {
		c.t.Fatal(err)
	}
}
