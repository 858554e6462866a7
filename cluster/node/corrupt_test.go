package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/replicator"
	"github.com/meridian-mq/meridian/testkit"
)

// TestReplicationStopsAtACorruptEntry: a source entry that fails its
// checksum on every replica stops its task there, with the checksum error
// as the task's lastError; it is never skipped, so the remote receives what
// came before it and nothing after.
func TestReplicationStopsAtACorruptEntry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	etcd := startStandalone(t, func(*node.BrokerConfig) {}) // its embedded etcd, for both regions
	endpoints := etcd.EtcdEndpoints()
	store := metatest.Dial(t, endpoints)
	// east's entries live on an in-memory bookie whose replicas the test
	// can corrupt; west's on a real one.
	memory := ledgertest.NewCluster("east-bookie")
	if err := ledgertest.Register(ctx, store, "east", "east-bookie", "", false); err != nil {
		t.Fatal(err)
	}
	regionCfg := func(name string) node.RegionConfig {
		b := node.DefaultBrokerConfig("127.0.0.1")
		b.BrokerAddr, b.WebAddr = "127.0.0.1:0", "127.0.0.1:0"
		b.Ledgers.EnsembleSize, b.Ledgers.WriteQuorum, b.Ledgers.AckQuorum = 1, 1, 1
		b.Service.ReplicationStartAt = broker.ReplicationStartEarliest
		rep := replicator.DefaultConfig(name)
		rep.ScanInterval, rep.CursorPersistInterval = 50*time.Millisecond, 10*time.Millisecond
		rep.RetryInitial, rep.RetryMax = 50*time.Millisecond, 200*time.Millisecond
		return node.RegionConfig{Name: name, Broker: &b, Replicator: &rep}
	}
	east, west := regionCfg("east"), regionCfg("west")
	east.BookieTransport = memory.Client("east")
	bk := bookie.DefaultConfig()
	bk.ID, bk.ListenAddr, bk.DataDir = "west-bookie", "127.0.0.1:0", t.TempDir()
	west.Bookies = []bookie.Config{bk}
	n := startNode(t, node.Config{Etcd: endpoints, Bootstrap: true, Logger: testLogger(), Regions: []node.RegionConfig{east, west}})
	urls := map[string]string{}
	for _, r := range n.Regions() {
		urls[r.Name()] = r.Broker().ServiceURL()
	}

	// Three messages while public/default replicates nowhere but east;
	// the middle one is then corrupted on east's only replica.
	setClusters(t, n, "east")
	const topic = "persistent://public/default/corrupt"
	p, err := newClient(t, pulsar.ClientOptions{URL: urls["east"]}).CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var ids []pulsar.MessageID
	for _, m := range []string{"m-0", "m-1", "m-2"} {
		id, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(m)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	memory.Corrupt("east-bookie", ids[1].LedgerID(), ids[1].EntryID())

	setClusters(t, n, "east", "west")
	cons := subscribeIn(t, map[string]string{"west": urls["west"]}, topic)["west"]
	checkPayloads(t, receiveAll(t, cons, 1, time.Second), []string{"m-0"})
	var state mledger.ReplicationTaskState
	testkit.WaitFor(t, "the checksum error as the task's lastError", func() bool {
		tasks, err := mledger.ReplicationTasks(ctx, store, "east", topic)
		state = tasks["west"]
		return err == nil && strings.Contains(strings.ToLower(state.LastError), "checksum")
	})
	t.Logf("lastError: %s", state.LastError)
	if want := (mledger.Position{Ledger: ids[0].LedgerID(), Entry: ids[0].EntryID()}); state.MarkDelete != want {
		t.Fatalf("the cursor is at %v, want %v: it must not pass the corrupt entry", state.MarkDelete, want)
	}
	// Retried, never skipped: a later message does not arrive either.
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("m-3")}); err != nil {
		t.Fatal(err)
	}
	receiveAll(t, cons, 0, time.Second)
}
