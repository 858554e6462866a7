package node_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/replicator/remote"
	"github.com/meridian-mq/meridian/topology"
)

// startRegionNamed starts a standalone region named name, without a
// replication worker, on free ports, and returns its broker.
func startRegionNamed(t *testing.T, name string) *node.Broker {
	t.Helper()
	cfg := node.Standalone(t.TempDir())
	freePorts(&cfg)
	cfg.Regions[0].Name, cfg.Regions[0].Replicator = name, nil
	cfg.Logger = testLogger()
	return startNode(t, cfg).Broker()
}

// TestRemoteProducerReplicatesAStoredBatch: a batch that pulsar-client-go
// published in region us-east is read back from us-east's managed ledger
// as stored, sent whole by a remote.Producer to region eu-west, and
// consumed there by pulsar-client-go with its keys, properties, event
// times, original publish time and replicated_from.
func TestRemoteProducerReplicatesAStoredBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	source := startRegionNamed(t, "us-east")
	dest := startRegionNamed(t, "eu-west")
	const topic = "persistent://public/default/replicated-batch"
	const n = 3

	// A compressed batch of n keyed messages, published in us-east.
	prod, err := newClient(t, pulsar.ClientOptions{URL: source.ServiceURL()}).CreateProducer(pulsar.ProducerOptions{
		Topic: topic, Name: "orders-app", CompressionType: pulsar.LZ4,
		BatchingMaxMessages: 100, BatchingMaxPublishDelay: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := make(chan pulsar.MessageID, n)
	for i := range n {
		prod.SendAsync(ctx, &pulsar.ProducerMessage{
			Payload: []byte(fmt.Sprint("payload ", i)), Key: fmt.Sprint("key-", i),
			Properties: map[string]string{"n": strconv.Itoa(i)}, EventTime: time.UnixMilli(1_600_000_000_000 + int64(i)),
		}, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				t.Error(err)
			}
			ids <- id
		})
	}
	if err := prod.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	var id pulsar.MessageID
	for range n {
		select {
		case id = <-ids:
		case <-ctx.Done():
			t.Fatal("the batch was not acknowledged")
		}
	}
	prod.Close()

	// The entry exactly as us-east stored it.
	name, err := topology.ParseTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	st, err := source.Service().Topic(ctx, name, false)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := st.Message(ctx, mledger.Position{Ledger: id.LedgerID(), Entry: id.EntryID()})
	if err != nil {
		t.Fatal(err)
	}
	_, stored, err := entry.Split()
	if err != nil {
		t.Fatal(err)
	}
	storedMD := &pb.MessageMetadata{}
	if mdBytes, _, err := wire.SplitMessage(stored); err != nil || proto.Unmarshal(mdBytes, storedMD) != nil {
		t.Fatalf("stored entry: %v", err)
	}
	if storedMD.GetNumMessagesInBatch() != n {
		t.Fatalf("the source stored %d messages in the entry, want one batch of %d", storedMD.GetNumMessagesInBatch(), n)
	}

	// Replicate it to eu-west.
	cfg := remote.DefaultConfig("us-east", topic, dest.ClusterData())
	cfg.Logger, cfg.Incarnation = testLogger(), 1
	p, err := remote.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Send(ctx, entry.Data)
	if err != nil {
		t.Fatal(err)
	}
	remoteID, err := r.Wait(ctx)
	if err != nil || remoteID.Duplicate() {
		t.Fatalf("remote receipt %+v, %v", remoteID, err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A task that restarts before moving its cursor sends the entry again,
	// on a new producer: the destination recognises it.
	if p, err = remote.Open(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if r, err = p.Send(ctx, entry.Data); err != nil {
		t.Fatal(err)
	}
	if again, err := r.Wait(ctx); err != nil || !again.Duplicate() {
		t.Fatalf("the entry sent again: receipt %+v, %v; want a duplicate", again, err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	dt, err := dest.Service().Topic(ctx, name, false)
	if err != nil {
		t.Fatal(err)
	}
	if last := dt.LastMessageID(); last != (mledger.Position{Ledger: remoteID.Ledger, Entry: remoteID.Entry}) {
		t.Fatalf("eu-west's last entry is %v, want the one replicated entry at %+v", last, remoteID)
	}

	cons, err := newClient(t, pulsar.ClientOptions{URL: dest.ServiceURL()}).Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "check", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for i := range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("message %d in eu-west: %v", i, err)
		}
		if string(m.Payload()) != fmt.Sprint("payload ", i) || m.Key() != fmt.Sprint("key-", i) || m.Properties()["n"] != strconv.Itoa(i) ||
			m.EventTime().UnixMilli() != 1_600_000_000_000+int64(i) {
			t.Errorf("message %d: payload %q key %q properties %v event time %v", i, m.Payload(), m.Key(), m.Properties(), m.EventTime())
		}
		if m.GetReplicatedFrom() != "us-east" || m.ProducerName() != "orders-app" ||
			m.PublishTime().UnixMilli() != int64(storedMD.GetPublishTime()) {
			t.Errorf("message %d: replicated from %q, producer %q, published %v; want us-east, orders-app, %d (the source's publish time)",
				i, m.GetReplicatedFrom(), m.ProducerName(), m.PublishTime().UnixMilli(), storedMD.GetPublishTime())
		}
		if m.ID().LedgerID() != remoteID.Ledger || m.ID().EntryID() != remoteID.Entry || m.ID().BatchIdx() != int32(i) {
			t.Errorf("message %d at %v, want batch index %d of the entry the receipt named (%+v)", i, m.ID(), i, remoteID)
		}
		cons.Ack(m)
	}
}
