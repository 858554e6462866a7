package broker_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
)

// authzServer serves the protocol with anonymous authentication and
// authorization over a global store of tenant acme with namespaces closed
// (no grants) and open (anonymous may produce); its topics are fakes.
func authzServer(t *testing.T) *testServer {
	ctx := context.Background()
	gs, err := global.NewStore(metatest.Memory(t), global.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gs.CreateCluster(ctx, "r1", global.ClusterData{ServiceURL: "http://r1:8080"}); err != nil {
		t.Fatal(err)
	}
	if _, err := gs.CreateTenant(ctx, "acme", global.TenantInfo{AllowedClusters: []string{"r1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := gs.CreateNamespace(ctx, "acme", "closed", global.Policies{}); err != nil {
		t.Fatal(err)
	}
	r, err := gs.CreateNamespace(ctx, "acme", "open", global.Policies{AuthPolicies: global.AuthPolicies{
		NamespaceAuth: map[string][]global.AuthAction{"anonymous": {global.ActionProduce}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := global.StartCache(gs, global.DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	if err := cache.Await(ctx, r); err != nil {
		t.Fatal(err)
	}
	authn, err := auth.NewWithProviders("anonymous")
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, func(c *broker.Config) { c.Auth, c.Authz = authn, auth.NewAuthorizer(nil, cache) })
}

// TestSchemaAndTopicListAuthorized: the binary commands around a topic's
// schema and a namespace's topics need the permissions Pulsar asks for. An
// anonymous client granted nothing on acme/closed may not register a
// schema there (which would lock out the real producers), read one, or
// list the namespace's topics; on acme/open, where the namespace grants it
// produce, each reaches the topics (whose fakes answer TopicNotFound for
// schemas).
func TestSchemaAndTopicListAuthorized(t *testing.T) {
	s := authzServer(t)
	c := dialRaw(t, s.addr)
	c.connect(20)

	requestID := uint64(0)
	// Each request's outcome: "ok", or the error code's name.
	outcome := func(failed bool, code pb.ServerError) string {
		if !failed {
			return "ok"
		}
		return code.String()
	}
	getOrCreate := func(topic string) string {
		requestID++
		c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_GET_OR_CREATE_SCHEMA.Enum(), GetOrCreateSchema: pb.CommandGetOrCreateSchema_builder{
			RequestId: proto.Uint64(requestID), Topic: proto.String(topic),
			Schema: pb.Schema_builder{Name: proto.String("x"), Type: pb.Schema_String.Enum(), SchemaData: []byte{}}.Build(),
		}.Build()}.Build())
		resp := c.expect(pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE).GetGetOrCreateSchemaResponse()
		return outcome(resp.HasErrorCode(), resp.GetErrorCode())
	}
	get := func(topic string) string {
		requestID++
		c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_GET_SCHEMA.Enum(), GetSchema: pb.CommandGetSchema_builder{
			RequestId: proto.Uint64(requestID), Topic: proto.String(topic),
		}.Build()}.Build())
		resp := c.expect(pb.BaseCommand_GET_SCHEMA_RESPONSE).GetGetSchemaResponse()
		return outcome(resp.HasErrorCode(), resp.GetErrorCode())
	}
	list := func(namespace string) string {
		requestID++
		c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_GET_TOPICS_OF_NAMESPACE.Enum(), GetTopicsOfNamespace: pb.CommandGetTopicsOfNamespace_builder{
			RequestId: proto.Uint64(requestID), Namespace: proto.String(namespace),
		}.Build()}.Build())
		reply, err := c.next()
		if err != nil {
			t.Fatalf("listing %s: %v", namespace, err)
		}
		return outcome(reply.GetType() != pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE, reply.GetError().GetError())
	}
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"register a schema on a closed namespace", getOrCreate("persistent://acme/closed/orders"), "AuthorizationError"},
		{"read a schema on a closed namespace", get("persistent://acme/closed/orders"), "AuthorizationError"},
		{"list a closed namespace", list("acme/closed"), "AuthorizationError"},
		{"register a schema where the role may produce", getOrCreate("persistent://acme/open/orders"), "TopicNotFound"},
		{"read a schema where the role may produce", get("persistent://acme/open/orders"), "TopicNotFound"},
		{"list a namespace that grants the role", list("acme/open"), "ok"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// openCommands are the commands a connection may send whatever its role's
// grants, each with the reason: they name no topic or namespace.
var openCommands = map[pb.BaseCommand_Type]string{
	pb.BaseCommand_PING: "the keep-alive: it carries nothing",
	pb.BaseCommand_PONG: "the keep-alive's answer",
	pb.BaseCommand_AUTH_RESPONSE: "fresh credentials of the connection's own role (reauth.go): " +
		"any other role, or none, closes the connection",
}

// TestEveryCommandAuthorized walks every command of the protocol as an
// anonymous role granted nothing on acme/closed. Each command that names a
// topic or a namespace there is refused with AuthorizationError; each
// that acts on a producer or consumer the connection holds finds none
// (only a refused PRODUCER or SUBSCRIBE could have made one) and does
// nothing; the keep-alive and re-authentication are open (openCommands);
// and every other command, a broker's answers and transactions among
// them, closes the connection.
func TestEveryCommandAuthorized(t *testing.T) {
	s := authzServer(t)
	const topic, ns = "persistent://acme/closed/t", "acme/closed"
	id := proto.Uint64(1)
	named := map[pb.BaseCommand_Type]*pb.BaseCommand{
		pb.BaseCommand_LOOKUP: pb.BaseCommand_builder{Type: pb.BaseCommand_LOOKUP.Enum(),
			LookupTopic: pb.CommandLookupTopic_builder{Topic: proto.String(topic), RequestId: id}.Build()}.Build(),
		pb.BaseCommand_PARTITIONED_METADATA: pb.BaseCommand_builder{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(),
			PartitionMetadata: pb.CommandPartitionedTopicMetadata_builder{Topic: proto.String(topic), RequestId: id}.Build()}.Build(),
		pb.BaseCommand_GET_TOPICS_OF_NAMESPACE: pb.BaseCommand_builder{Type: pb.BaseCommand_GET_TOPICS_OF_NAMESPACE.Enum(),
			GetTopicsOfNamespace: pb.CommandGetTopicsOfNamespace_builder{Namespace: proto.String(ns), RequestId: id}.Build()}.Build(),
		pb.BaseCommand_PRODUCER: pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(),
			Producer: pb.CommandProducer_builder{Topic: proto.String(topic), ProducerId: id, RequestId: id}.Build()}.Build(),
		pb.BaseCommand_SUBSCRIBE: pb.BaseCommand_builder{Type: pb.BaseCommand_SUBSCRIBE.Enum(),
			Subscribe: pb.CommandSubscribe_builder{Topic: proto.String(topic), Subscription: proto.String("s"),
				SubType: pb.CommandSubscribe_Shared.Enum(), ConsumerId: id, RequestId: id}.Build()}.Build(),
		pb.BaseCommand_GET_SCHEMA: pb.BaseCommand_builder{Type: pb.BaseCommand_GET_SCHEMA.Enum(),
			GetSchema: pb.CommandGetSchema_builder{Topic: proto.String(topic), RequestId: id}.Build()}.Build(),
		pb.BaseCommand_GET_OR_CREATE_SCHEMA: pb.BaseCommand_builder{Type: pb.BaseCommand_GET_OR_CREATE_SCHEMA.Enum(),
			GetOrCreateSchema: pb.CommandGetOrCreateSchema_builder{Topic: proto.String(topic), RequestId: id,
				Schema: pb.Schema_builder{Name: proto.String("x"), Type: pb.Schema_String.Enum(), SchemaData: []byte{}}.Build(),
			}.Build()}.Build(),
	}
	// The error each answer to a named command carries.
	refusal := func(reply *pb.BaseCommand) pb.ServerError {
		switch reply.GetType() {
		case pb.BaseCommand_LOOKUP_RESPONSE:
			return reply.GetLookupTopicResponse().GetError()
		case pb.BaseCommand_PARTITIONED_METADATA_RESPONSE:
			return reply.GetPartitionMetadataResponse().GetError()
		case pb.BaseCommand_GET_SCHEMA_RESPONSE:
			return reply.GetGetSchemaResponse().GetErrorCode()
		case pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE:
			return reply.GetGetOrCreateSchemaResponse().GetErrorCode()
		case pb.BaseCommand_ERROR:
			return reply.GetError().GetError()
		}
		return -1
	}
	// The commands on a producer or consumer id, and what each answers
	// when the connection holds none: an ERROR, SUCCESS (closing what is
	// not held is done), nothing (the next PING's PONG comes first), or a
	// closed connection.
	held := map[pb.BaseCommand_Type]struct {
		cmd    *pb.BaseCommand
		answer pb.BaseCommand_Type // -1: the connection closes
	}{
		pb.BaseCommand_SEND: {pb.BaseCommand_builder{Type: pb.BaseCommand_SEND.Enum(),
			Send: pb.CommandSend_builder{ProducerId: id, SequenceId: id}.Build()}.Build(), -1},
		pb.BaseCommand_CLOSE_PRODUCER: {pb.BaseCommand_builder{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(),
			CloseProducer: pb.CommandCloseProducer_builder{ProducerId: id, RequestId: id}.Build()}.Build(), pb.BaseCommand_SUCCESS},
		pb.BaseCommand_FLOW: {pb.BaseCommand_builder{Type: pb.BaseCommand_FLOW.Enum(),
			Flow: pb.CommandFlow_builder{ConsumerId: id, MessagePermits: proto.Uint32(100)}.Build()}.Build(), pb.BaseCommand_PONG},
		pb.BaseCommand_ACK: {pb.BaseCommand_builder{Type: pb.BaseCommand_ACK.Enum(),
			Ack: pb.CommandAck_builder{ConsumerId: id, AckType: pb.CommandAck_Individual.Enum()}.Build()}.Build(), pb.BaseCommand_PONG},
		pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES: {pb.BaseCommand_builder{Type: pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES.Enum(),
			RedeliverUnacknowledgedMessages: pb.CommandRedeliverUnacknowledgedMessages_builder{ConsumerId: id}.Build()}.Build(), pb.BaseCommand_PONG},
		pb.BaseCommand_CLOSE_CONSUMER: {pb.BaseCommand_builder{Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(),
			CloseConsumer: pb.CommandCloseConsumer_builder{ConsumerId: id, RequestId: id}.Build()}.Build(), pb.BaseCommand_SUCCESS},
		pb.BaseCommand_UNSUBSCRIBE: {pb.BaseCommand_builder{Type: pb.BaseCommand_UNSUBSCRIBE.Enum(),
			Unsubscribe: pb.CommandUnsubscribe_builder{ConsumerId: id, RequestId: id}.Build()}.Build(), pb.BaseCommand_ERROR},
		pb.BaseCommand_SEEK: {pb.BaseCommand_builder{Type: pb.BaseCommand_SEEK.Enum(),
			Seek: pb.CommandSeek_builder{ConsumerId: id, RequestId: id, MessagePublishTime: proto.Uint64(1)}.Build()}.Build(), pb.BaseCommand_ERROR},
		pb.BaseCommand_GET_LAST_MESSAGE_ID: {pb.BaseCommand_builder{Type: pb.BaseCommand_GET_LAST_MESSAGE_ID.Enum(),
			GetLastMessageId: pb.CommandGetLastMessageId_builder{ConsumerId: id, RequestId: id}.Build()}.Build(), pb.BaseCommand_ERROR},
	}
	ping := pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}.Build()

	values := pb.BaseCommand_PING.Descriptor().Values()
	for i := range values.Len() {
		typ := pb.BaseCommand_Type(values.Get(i).Number())
		if typ == pb.BaseCommand_CONNECT {
			continue // the first command of every connection here
		}
		c := dialRaw(t, s.addr)
		c.connect(20)
		if cmd, ok := named[typ]; ok {
			c.send(cmd)
			reply, err := c.next()
			if err != nil || refusal(reply) != pb.ServerError_AuthorizationError {
				t.Errorf("%v on %s: %v, %v; want AuthorizationError", typ, topic, reply, err)
			}
			continue
		}
		if h, ok := held[typ]; ok {
			// The connection asked for producer and consumer 1 and was
			// refused both.
			for _, cmd := range []pb.BaseCommand_Type{pb.BaseCommand_PRODUCER, pb.BaseCommand_SUBSCRIBE} {
				c.send(named[cmd])
				if reply, err := c.next(); err != nil || refusal(reply) != pb.ServerError_AuthorizationError {
					t.Fatalf("%v: %v, %v", cmd, reply, err)
				}
			}
			c.send(h.cmd)
			if h.answer == -1 {
				if !c.closed() {
					t.Errorf("%v without a producer or consumer: the connection stays open", typ)
				}
				continue
			}
			c.send(ping)
			reply, err := c.next()
			for err == nil && h.answer != pb.BaseCommand_PONG && reply.GetType() == pb.BaseCommand_PONG {
				reply, err = c.next() // the answer of a request handled in a goroutine of its own
			}
			if err != nil || reply.GetType() != h.answer {
				t.Errorf("%v without a producer or consumer: %v, %v; want %v", typ, reply, err, h.answer)
			}
			continue
		}
		if _, ok := openCommands[typ]; ok {
			continue
		}
		c.send(pb.BaseCommand_builder{Type: typ.Enum()}.Build())
		if !c.closed() {
			t.Errorf("%v: the connection stays open, want it closed (or the command listed with what it needs)", typ)
		}
	}
}
