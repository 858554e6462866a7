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

// TestSchemaAndTopicListAuthorized: the binary commands around a topic's
// schema and a namespace's topics need the permissions Pulsar asks for. An
// anonymous client granted nothing on acme/closed may not register a
// schema there (which would lock out the real producers), read one, or
// list the namespace's topics; on acme/open, where the namespace grants it
// produce, each reaches the topics (whose fakes answer TopicNotFound for
// schemas).
func TestSchemaAndTopicListAuthorized(t *testing.T) {
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
	s := startServer(t, func(c *broker.Config) { c.Auth, c.Authz = authn, auth.NewAuthorizer(nil, cache) })
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
