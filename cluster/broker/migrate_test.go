package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
)

// TestSwitchTellsClientsEveryRegion: when its namespace's active region
// becomes east, the broker answers the SEND it took, then sends the
// producer and the consumer TOPIC_MIGRATED with the brokers of every
// region of the set (east's first, then its own region's) and closes them;
// the replicator's producer stays and replicates on. A late SEND of the
// moved producer does not close the connection.
func TestSwitchTellsClientsEveryRegion(t *testing.T) {
	r := startBroker(t, nil)
	addRegion(t, r, "east")
	ns := createNamespace(t, r, "switching", global.Policies{ReplicationClusters: []string{"standalone", "east"}})
	topic := "persistent://" + ns + "/t"

	rc := dialRaw(t, brokerAddr(r))
	rc.connect(int32(pb.ProtocolVersion_v20))
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
		Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1), ProducerName: proto.String("app"),
	}.Build()}.Build())
	rc.expect(pb.BaseCommand_PRODUCER_SUCCESS)
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: pb.CommandSubscribe_builder{
		Topic: proto.String(topic), Subscription: proto.String("s"), SubType: pb.CommandSubscribe_Shared.Enum(),
		ConsumerId: proto.Uint64(2), RequestId: proto.Uint64(2),
	}.Build()}.Build())
	rc.expect(pb.BaseCommand_SUCCESS)
	repl := openReplicationProducer(t, r.ServiceURL(), topic)

	// The SEND goes out with the switch: it is answered before the producer
	// is told to go, or dropped unanswered (the client sends it again in
	// the new region); never lost in between.
	rc.sendMessage(1, "app", 0, []byte("m0"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, rcpt, err := r.Service().Global().UpdateNamespace(ctx, "public", "switching", func(p *global.Policies) error {
		p.ActiveRegion = "east"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Service().Policies().Await(ctx, rcpt); err != nil {
		t.Fatal(err)
	}

	want := "pulsar://e1:6650,e2:6650," + brokerAddr(r)
	migrated := map[pb.CommandTopicMigrated_ResourceType]bool{}
	closed := map[string]bool{}
	for len(closed) < 2 {
		cmd := rc.expectOneOf(pb.BaseCommand_SEND_RECEIPT, pb.BaseCommand_TOPIC_MIGRATED, pb.BaseCommand_CLOSE_PRODUCER, pb.BaseCommand_CLOSE_CONSUMER)
		switch cmd.GetType() {
		case pb.BaseCommand_SEND_RECEIPT:
			if migrated[pb.CommandTopicMigrated_Producer] {
				t.Fatal("the receipt came after TOPIC_MIGRATED")
			}
		case pb.BaseCommand_TOPIC_MIGRATED:
			tm := cmd.GetTopicMigrated()
			if got := tm.GetBrokerServiceUrl(); got != want {
				t.Fatalf("TOPIC_MIGRATED for %v names %q, want every region's brokers, %q", tm.GetResourceType(), got, want)
			}
			wantID := map[pb.CommandTopicMigrated_ResourceType]uint64{pb.CommandTopicMigrated_Producer: 1, pb.CommandTopicMigrated_Consumer: 2}
			if tm.GetResourceId() != wantID[tm.GetResourceType()] {
				t.Fatalf("TOPIC_MIGRATED %v", tm)
			}
			migrated[tm.GetResourceType()] = true
		case pb.BaseCommand_CLOSE_PRODUCER:
			if !migrated[pb.CommandTopicMigrated_Producer] || cmd.GetCloseProducer().GetProducerId() != 1 {
				t.Fatalf("%v before its TOPIC_MIGRATED", cmd)
			}
			closed["producer"] = true
		case pb.BaseCommand_CLOSE_CONSUMER:
			if !migrated[pb.CommandTopicMigrated_Consumer] || cmd.GetCloseConsumer().GetConsumerId() != 2 {
				t.Fatalf("%v before its TOPIC_MIGRATED", cmd)
			}
			closed["consumer"] = true
		}
	}
	// A SEND that crossed the CLOSE_PRODUCER on the wire is dropped; the
	// connection, which may carry consumers still being handed over, stays.
	rc.sendMessage(1, "app", 1, []byte("late"))
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: pb.CommandPing_builder{}.Build()}.Build())
	rc.expect(pb.BaseCommand_PONG)
	md := pb.MessageMetadata_builder{ProducerName: proto.String("app"), SequenceId: proto.Uint64(0),
		PublishTime: proto.Uint64(uint64(time.Now().UnixMilli()))}.Build()
	repl.replicate(1, 7, md, []byte("replicated"))
	for _, tp := range r.Service().LoadedTopics() {
		for _, p := range tp.Stats().Publishers {
			if !strings.HasPrefix(p.ProducerName, broker.ReplicationProducerPrefix) {
				t.Fatalf("producer %s still on %s", p.ProducerName, tp.Name())
			}
		}
	}
}

// TestTopicActiveRegionMovesOnlyItsTopic: a topic's own active region
// (a drill's switch) moves that topic's clients and redirects its lookups,
// while another topic of the namespace keeps its clients and is answered
// here.
func TestTopicActiveRegionMovesOnlyItsTopic(t *testing.T) {
	r := startBroker(t, nil)
	addRegion(t, r, "east")
	ns := createNamespace(t, r, "topicswitch", global.Policies{ReplicationClusters: []string{brokertest.Region, "east"}})
	moved, stays := "persistent://"+ns+"/moved", "persistent://"+ns+"/stays"

	rc := dialRaw(t, brokerAddr(r))
	rc.connect(int32(pb.ProtocolVersion_v20))
	for i, topic := range []string{moved, stays} {
		id := uint64(i + 1)
		rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: pb.CommandSubscribe_builder{
			Topic: proto.String(topic), Subscription: proto.String("s"), SubType: pb.CommandSubscribe_Shared.Enum(),
			ConsumerId: proto.Uint64(id), RequestId: proto.Uint64(id),
		}.Build()}.Build())
		rc.expect(pb.BaseCommand_SUCCESS)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var tp global.TopicPolicies
	tp.SetActiveRegion("east")
	rcpt, err := r.Service().Global().CreateTopic(ctx, mustTopic(t, moved), tp)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Service().Policies().Await(ctx, rcpt); err != nil {
		t.Fatal(err)
	}
	tm := rc.expect(pb.BaseCommand_TOPIC_MIGRATED).GetTopicMigrated()
	if tm.GetResourceId() != 1 || tm.GetBrokerServiceUrl() != "pulsar://e1:6650,e2:6650,"+brokerAddr(r) {
		t.Fatalf("TOPIC_MIGRATED %v, want consumer 1 sent to every region's brokers, east's first", tm)
	}
	if cc := rc.expect(pb.BaseCommand_CLOSE_CONSUMER).GetCloseConsumer(); cc.GetConsumerId() != 1 {
		t.Fatalf("closed consumer %d, want 1 (the moved topic's)", cc.GetConsumerId())
	}
	if loc := lookup(t, r, moved); !loc.Redirect || loc.WebURL != "http://e1:8080" {
		t.Fatalf("lookup of the moved topic answered %+v, want a redirect to east", loc)
	}
	if loc := lookup(t, r, stays); loc.Redirect {
		t.Fatalf("lookup of the other topic answered %+v, want this region", loc)
	}
	// The pass that moved the one topic looked at the other too, at once
	// (migrateInactiveTopics): a move of it would have come by now, before
	// the PONG to a PING sent after the close.
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: pb.CommandPing_builder{}.Build()}.Build())
	rc.expect(pb.BaseCommand_PONG)
	for _, tp := range r.Service().LoadedTopics() {
		if tp.Name() != stays {
			continue
		}
		if s := tp.Stats().Subscriptions["s"]; len(s.Consumers) != 1 {
			t.Fatalf("the other topic's subscription has %d consumers, want 1", len(s.Consumers))
		}
	}
}
