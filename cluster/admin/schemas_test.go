package admin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

const (
	userV1 = `{"type":"record","name":"User","namespace":"test","fields":[{"name":"name","type":"string"}]}`
	userV2 = `{"type":"record","name":"User","namespace":"test","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}`
	// userBad drops a field without a default and adds one without: no
	// strategy but ALWAYS_COMPATIBLE accepts it after userV2.
	userBad = `{"type":"record","name":"User","namespace":"test","fields":[{"name":"email","type":"string"}]}`
)

// TestSchemas drives the schema endpoints through pulsaradmin.
func TestSchemas(t *testing.T) {
	adm := newAdmin(t, web.URL)
	topic := "persistent://public/default/schemas-admin-" + uniq()
	if _, err := adm.Schemas().GetSchemaInfo(topic); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("schema of a topic without one: %v, want 404", err)
	}
	v1 := utils.SchemaInfo{Type: "AVRO", Schema: []byte(userV1), Properties: map[string]string{"k": "v"}}
	if err := adm.Schemas().CreateSchemaBySchemaInfo(topic, v1); err != nil {
		t.Fatal(err)
	}
	got, err := adm.Schemas().GetSchemaInfoWithVersion(topic)
	if err != nil || got.Version != 0 || got.SchemaInfo.Type != "AVRO" || string(got.SchemaInfo.Schema) != userV1 ||
		got.SchemaInfo.Properties["k"] != "v" || got.SchemaInfo.Timestamp == 0 {
		t.Fatalf("latest schema %+v, %v", got, err)
	}
	v2 := utils.SchemaInfo{Type: "AVRO", Schema: []byte(userV2)}
	compat, err := adm.Schemas().TestCompatibilityWithSchemaInfo(topic, v2)
	if err != nil || !compat.IsCompatibility {
		t.Fatalf("v2 compatibility %+v, %v", compat, err)
	}
	bad := utils.SchemaInfo{Type: "AVRO", Schema: []byte(userBad)}
	compat, err = adm.Schemas().TestCompatibilityWithSchemaInfo(topic, bad)
	if err != nil || compat.IsCompatibility || compat.SchemaCompatibilityStrategy == "" {
		t.Fatalf("incompatible schema: %+v, %v", compat, err)
	}
	if err := adm.Schemas().CreateSchemaBySchemaInfo(topic, bad); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("uploading an incompatible schema: %v, want 409", err)
	}
	if err := adm.Schemas().CreateSchemaBySchemaInfo(topic, v2); err != nil {
		t.Fatal(err)
	}
	if v, err := adm.Schemas().GetVersionBySchemaInfo(topic, v1); err != nil || v != 0 {
		t.Fatalf("version of v1: %d, %v", v, err)
	}
	if byVersion, err := adm.Schemas().GetSchemaInfoByVersion(topic, 1); err != nil || string(byVersion.Schema) != userV2 {
		t.Fatalf("schema version 1: %+v, %v", byVersion, err)
	}
	all, err := adm.Schemas().GetAllSchemas(topic)
	if err != nil || len(all) != 2 {
		t.Fatalf("all schemas: %v, %v", all, err)
	}
	if err := adm.Schemas().DeleteSchema(topic); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Schemas().GetSchemaInfo(topic); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("schema after delete: %v, want 404", err)
	}
}

// TestHTTPServiceURL runs pulsar-client-go with an http:// service URL
// against the admin API alone for its lookups (DESIGN §5): partitioned
// metadata with auto-creation, lookups, the schema of a topic, and the
// namespace's topics for a regex consumer.
func TestHTTPServiceURL(t *testing.T) {
	id := uniq()
	adm := newAdmin(t, web.URL)
	c := newClient(t, web.URL)
	ctx := context.Background()

	part := topicName(t, "persistent://public/default/http-part-"+id)
	if err := adm.Topics().Create(part, 2); err != nil {
		t.Fatal(err)
	}
	type user struct {
		Name string `json:"name"`
	}
	js := pulsar.NewJSONSchema(userV1, nil)
	for _, topic := range []string{"http-plain-" + id, "persistent://public/default/http-part-" + id} {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Schema: js,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatalf("%s: subscribe: %v", topic, err)
		}
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: js})
		if err != nil {
			t.Fatalf("%s: producer: %v", topic, err)
		}
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Value: &user{Name: "ada"}}); err != nil {
			t.Fatal(err)
		}
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var u user
		if err := m.GetSchemaValue(&u); err != nil || u.Name != "ada" {
			t.Fatalf("%s: received %+v, %v", topic, u, err)
		}
		p.Close()
		cons.Close()
	}
	if md, err := adm.Topics().GetMetadata(part); err != nil || md.Partitions != 2 {
		t.Fatalf("metadata %+v %v", md, err)
	}

	// A regex consumer lists the namespace's topics over HTTP.
	rc, err := c.Subscribe(pulsar.ConsumerOptions{TopicsPattern: "persistent://public/default/http-plain-" + id + "$",
		SubscriptionName: "re", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	m, err := rc.Receive(ctx)
	if err != nil || !strings.HasSuffix(m.Topic(), "http-plain-"+id) {
		t.Fatalf("regex consumer received from %v, %v", m, err)
	}
}
