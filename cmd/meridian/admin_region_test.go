package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestAdminNewVerbsAgainstRegion runs the verbs of schemas, topic policies,
// topic permissions, messages, bundles, schema compatibility, broker
// statistics and dynamic configuration against a real standalone region,
// checking that each change shows in the read that follows it.
func TestAdminNewVerbsAgainstRegion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a region")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	region := startRegion(ctx, t)
	webURL, run := serveAdmin(t, region)
	// jsonOf is a verb's --output json, compacted.
	jsonOf := func(args ...string) string {
		t.Helper()
		out := run(append([]string{"-o", "json"}, args...)...)
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(out)); err != nil {
			t.Fatalf("meridian admin -o json %s: not JSON: %v\n%s", strings.Join(args, " "), err, out)
		}
		return b.String()
	}

	// Messages: publish two, read one back by its id, find one by time.
	const topic = "persistent://public/default/new-verbs"
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: region.ServiceURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second).UTC().Format(time.RFC3339)
	var ids []pulsar.MessageID
	for _, payload := range []string{"first", "second"} {
		id, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(payload), Properties: map[string]string{"k": payload}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	producer.Close()
	second := ids[1]
	out := run("topics", "get-message-by-id", topic, "-l", itoa(second.LedgerID()), "-e", itoa(second.EntryID()))
	if !strings.Contains(out, "Properties: k=second") || !strings.Contains(out, "second") {
		t.Errorf("get-message-by-id:\n%s", out)
	}
	if got := run("topics", "get-message-id", topic, "-d", before); got != itoa(ids[0].LedgerID())+":"+itoa(ids[0].EntryID())+"\n" {
		t.Errorf("get-message-id -d %s: %q, want the first message's id", before, got)
	}

	// Topic policies: set, read back, read the applied one, remove.
	run("topics", "set-retention", topic, "-s", "10M", "-t", "2h")
	if got := jsonOf("topics", "get-retention", topic); !jsonEqual(t, got, `{"retentionTimeInMinutes":120,"retentionSizeInMB":10}`) {
		t.Errorf("topics get-retention: %v", got)
	}
	run("topics", "set-message-ttl", topic, "-t", "90")
	if got := run("topics", "get-message-ttl", topic); got != "90\n" {
		t.Errorf("topics get-message-ttl: %q", got)
	}
	run("topics", "remove-message-ttl", topic)
	if got := run("topics", "get-message-ttl", topic); got != "null\n" {
		t.Errorf("topics get-message-ttl after remove: %q", got)
	}
	run("namespaces", "set-message-ttl", "public/default", "-ttl", "300")
	if got := run("topics", "get-message-ttl", topic, "-ap"); got != "300\n" {
		t.Errorf("topics get-message-ttl -ap, the namespace's applying: %q", got)
	}
	run("namespaces", "remove-message-ttl", "public/default")
	run("topics", "set-deduplication", topic, "--enable")
	if got := run("topics", "get-deduplication", topic); got != "true\n" {
		t.Errorf("topics get-deduplication: %q", got)
	}
	run("topics", "set-backlog-quota", topic, "-lt", "3600", "-p", "consumer_backlog_eviction", "-t", "message_age")
	if got := jsonOf("topics", "get-backlog-quotas", topic); !strings.Contains(got, `"limitTime":3600`) {
		t.Errorf("topics get-backlog-quotas: %v", got)
	}
	run("topics", "set-max-producers", topic, "-p", "3")
	if got := run("topics", "get-max-producers", topic); got != "3\n" {
		t.Errorf("topics get-max-producers: %q", got)
	}
	run("topics", "set-dispatch-rate", topic, "-md", "100", "-dt", "2")
	if got := jsonOf("topics", "get-dispatch-rate", topic); !strings.Contains(got, `"dispatchThrottlingRateInMsg":100`) ||
		!strings.Contains(got, `"ratePeriodInSecond":2`) {
		t.Errorf("topics get-dispatch-rate: %v", got)
	}

	// Topic permissions, over the namespace's.
	run("topics", "grant-permission", topic, "--role", "reader", "--actions", "consume")
	if out := run("topics", "permissions", topic); !strings.Contains(out, "reader") || !strings.Contains(out, "consume") {
		t.Errorf("topics permissions:\n%s", out)
	}
	run("topics", "revoke-permission", topic, "--role", "reader")
	if out := run("topics", "permissions", topic); strings.Contains(out, "reader") {
		t.Errorf("topics permissions after revoke:\n%s", out)
	}

	// Schemas.
	schemaFile := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(schemaFile, []byte(`{"type":"STRING","schema":"","properties":{"owner":"team-a"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const schemaTopic = "persistent://public/default/with-schema"
	run("schemas", "upload", schemaTopic, "-f", schemaFile)
	if out := run("schemas", "get", schemaTopic); !strings.Contains(out, "STRING") || !strings.Contains(out, "team-a") {
		t.Errorf("schemas get:\n%s", out)
	}
	if got := jsonOf("schemas", "test-compatibility", schemaTopic, "-f", schemaFile); !strings.Contains(got, "true") {
		t.Errorf("schemas test-compatibility: %v", got)
	}
	run("schemas", "delete", schemaTopic)
	if _, err := runAdmin(t, webURL, "schemas", "get", schemaTopic); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("schemas get after delete: %v, want a 404", err)
	}

	// Schema compatibility strategy, of the namespace and of a topic.
	run("namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "FORWARD")
	if got := run("namespaces", "get-schema-compatibility-strategy", "public/default"); got != "FORWARD\n" {
		t.Errorf("namespaces get-schema-compatibility-strategy: %q", got)
	}
	run("topics", "set-schema-compatibility-strategy", topic, "-s", "FULL")
	if got := run("topics", "get-schema-compatibility-strategy", topic); got != "\"FULL\"\n" {
		t.Errorf("topics get-schema-compatibility-strategy: %q", got)
	}

	// Bundles and the broker's statistics.
	if got := jsonOf("namespaces", "bundles", "public/default"); !strings.Contains(got, "boundaries") {
		t.Errorf("namespaces bundles: %v", got)
	}
	if got := jsonOf("broker-stats", "topics"); !strings.Contains(got, "new-verbs") {
		t.Errorf("broker-stats topics lacks the loaded topic: %s", got)
	}
	jsonOf("broker-stats", "monitoring-metrics")

	// Dynamic configuration.
	if out := run("brokers", "list-dynamic-config"); !strings.Contains(out, "allowAutoTopicCreation\n") {
		t.Errorf("brokers list-dynamic-config:\n%s", out)
	}
	run("brokers", "update-dynamic-config", "-c", "allowAutoTopicCreation", "-v", "false")
	if got := jsonOf("brokers", "get-all-dynamic-config"); !jsonEqual(t, got, `{"allowAutoTopicCreation":"false"}`) {
		t.Errorf("brokers get-all-dynamic-config: %v", got)
	}
	if got := (jsonOf("brokers", "get-runtime-config")); !strings.Contains(got, `"allowAutoTopicCreation":"false"`) {
		t.Errorf("brokers get-runtime-config: %s", got)
	}
	run("brokers", "delete-dynamic-config", "-c", "allowAutoTopicCreation")
	if got := jsonOf("brokers", "get-all-dynamic-config"); !jsonEqual(t, got, `{}`) {
		t.Errorf("brokers get-all-dynamic-config after delete: %v", got)
	}
	if _, err := runAdmin(t, webURL, "brokers", "update-dynamic-config", "-c", "noSuchSetting", "-v", "1"); err == nil {
		t.Error("update-dynamic-config of an unknown setting: no error")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
