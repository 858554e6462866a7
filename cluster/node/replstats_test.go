package node_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/replicator"
	"github.com/meridian-mq/meridian/testkit"
)

// replStat is one region's entry of a topic's replication stats, as the
// admin API sends it.
type replStat struct {
	Connected                 bool    `json:"connected"`
	ReplicationBacklog        int64   `json:"replicationBacklog"`
	ReplicationDelayInSeconds int64   `json:"replicationDelayInSeconds"`
	MsgRateOut                float64 `json:"msgRateOut"`
	MsgRateIn                 float64 `json:"msgRateIn"`
	OutboundConnection        string  `json:"outboundConnection"`
	OutboundConnectedSince    string  `json:"outboundConnectedSince"`
	InboundConnection         string  `json:"inboundConnection"`
	LastError                 string  `json:"lastError"`
}

// replicationOf reads topic's stats (path "stats" or "partitioned-stats")
// from the admin API at webURL and returns its replication map.
func replicationOf(t *testing.T, webURL, topic, path string) map[string]replStat {
	t.Helper()
	resp, err := http.Get(webURL + "/admin/v2/persistent/" + strings.TrimPrefix(topic, "persistent://") + "/" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s stats: %s", topic, resp.Status)
	}
	var v struct {
		Replication map[string]replStat `json:"replication"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Replication
}

// waitReplication polls topic's replication stats to remote until ok
// accepts them, failing after a minute, and returns them.
func waitReplication(t *testing.T, webURL, topic, path, remote, what string, ok func(replStat) bool) replStat {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last replStat
	for time.Now().Before(deadline) {
		if st, found := replicationOf(t, webURL, topic, path)[remote]; found {
			if last = st; ok(st) {
				return st
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s stats of %s to %s: never %s; last %+v", path, topic, remote, what, last)
	return last
}

// produceN publishes n messages "prefix-i" to topic and waits for them.
func produceN(t *testing.T, c pulsar.Client, topic, prefix string, n int) {
	t.Helper()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 10,
		BatchingMaxPublishDelay: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range n {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%s-%d", prefix, i)},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil {
					t.Errorf("send: %v", err)
				}
			})
	}
	if err := p.FlushWithCtx(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestReplicationRejectedByRemote: the remote region takes only token
// clients and its cluster record carries no token. The source topic's stats
// show the refusal as lastError, not connected, and the backlog; the logs
// show it too; the task retries with backoff rather than in a tight loop.
// Once the cluster record gains a token (through the global store),
// replication resumes by itself and every message arrives once, in order.
func TestReplicationRejectedByRemote(t *testing.T) {
	secret := auth.GenerateSecretKey()
	token, err := auth.CreateToken(secret, "", "replicator", time.Time{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.Dev(t.TempDir(), []string{"east", "west"}, 0, 0)
	freePorts(&cfg)
	for _, r := range cfg.Regions {
		r.Replicator.ScanInterval = 50 * time.Millisecond
		r.Replicator.CursorPersistInterval = 10 * time.Millisecond
		r.Replicator.StatsInterval = 100 * time.Millisecond
		r.Replicator.RetryInitial, r.Replicator.RetryMax = 100*time.Millisecond, 500*time.Millisecond
	}
	west := cfg.Regions[1].Broker
	west.Auth.Enabled, west.Auth.Providers = true, []string{"token"}
	west.Auth.Token.SecretKey = "data:;base64," + base64.StdEncoding.EncodeToString(secret)
	failures := newRecorder(testLogger().Handler(), func(r slog.Record) bool {
		return strings.HasPrefix(r.Message, "replication task failed")
	})
	cfg.Logger = slog.New(failures)
	n := startNode(t, cfg)
	east := n.Regions()[0].Broker()
	const topic, count = "persistent://public/default/refused", 50

	westClient := newClient(t, pulsar.ClientOptions{URL: n.Regions()[1].Broker().ServiceURL(),
		Authentication: pulsar.NewAuthenticationToken(token)})
	cons, err := westClient.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	produceN(t, newClient(t, pulsar.ClientOptions{URL: east.ServiceURL()}), topic, "m", count)

	refused := waitReplication(t, east.WebURL(), topic, "stats", "west", "showing the refusal",
		func(s replStat) bool { return s.LastError != "" && !s.Connected && s.ReplicationBacklog == count })
	t.Logf("refused: %+v", refused)
	if !strings.Contains(strings.ToLower(refused.LastError), "auth") {
		t.Errorf("lastError %q does not say the remote refused the credentials", refused.LastError)
	}
	if refused.ReplicationDelayInSeconds < 0 {
		t.Errorf("replicationDelayInSeconds = %d", refused.ReplicationDelayInSeconds)
	}
	// Backoff, not a crash loop: over 1.5s at most a few attempts (with
	// a 500ms cap, about 3 to 6; a tight loop makes hundreds). Only the
	// upper bound is asserted: a loaded machine may make fewer.
	before := len(failures.errors())
	time.Sleep(1500 * time.Millisecond) // measuring a rate over a span, not waiting for a state
	attempts := len(failures.errors()) - before
	if attempts > 20 {
		t.Errorf("%d failed attempts in 1.5s; want a few (backoff capped at 500ms)", attempts)
	}
	if logged := failures.errors(); len(logged) == 0 || !strings.Contains(logged[len(logged)-1], "auth") {
		t.Errorf("the logs do not show the refusal: %q", logged)
	}

	if _, _, err := east.Service().Global().UpdateCluster(context.Background(), "west", func(d *global.ClusterData) error {
		d.AuthenticationPlugin, d.AuthenticationParameters = "token", "token:"+token
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	checkPayloads(t, receiveAll(t, cons, count, 500*time.Millisecond), payloads("m", 0, count))
	st := waitReplication(t, east.WebURL(), topic, "stats", "west", "connected and drained",
		func(s replStat) bool { return s.Connected && s.ReplicationBacklog == 0 })
	t.Logf("resumed: %+v", st)
	if st.OutboundConnection == "" || st.OutboundConnectedSince == "" || st.ReplicationDelayInSeconds != 0 {
		t.Errorf("connected stats incomplete: %+v", st)
	}
}

// freeAddr reserves a free loopback port and releases it, for a broker
// that must come back on the same address.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestReplicationRemoteDown: regions east and west run as separate nodes on
// east's etcd. While west is stopped, east's stats show the link
// disconnected and the backlog growing, with its delay; when west starts
// again on the same addresses, the backlog drains with no operator action,
// and west's subscriber gets every message once, in order.
func TestReplicationRemoteDown(t *testing.T) {
	tune := func(cfg *node.Config) {
		for _, r := range cfg.Regions {
			r.Replicator.ScanInterval = 50 * time.Millisecond
			r.Replicator.CursorPersistInterval = 10 * time.Millisecond
			r.Replicator.StatsInterval = 100 * time.Millisecond
			r.Replicator.RetryInitial, r.Replicator.RetryMax = 100*time.Millisecond, 500*time.Millisecond
		}
	}
	eastCfg := node.Dev(t.TempDir(), []string{"east"}, 0, 0)
	freePorts(&eastCfg)
	tune(&eastCfg)
	eastCfg.Logger = testLogger()
	eastNode := startNode(t, eastCfg)
	east := eastNode.Broker()

	// West: its own node on east's etcd, at fixed addresses so that it
	// comes back where the cluster record points.
	westCfg := node.Dev(t.TempDir(), []string{"west"}, 0, 0)
	westCfg.EmbedEtcd, westCfg.EtcdClientURL, westCfg.Etcd = false, "", eastNode.EtcdEndpoints()
	tune(&westCfg)
	wb := westCfg.Regions[0].Broker
	wb.BrokerAddr, wb.WebAddr, wb.AdvertisedHost = freeAddr(t), freeAddr(t), "127.0.0.1"
	westCfg.Logger = testLogger()
	westNode := startNode(t, westCfg)

	const topic = "persistent://public/default/outage"
	subscribe := func() pulsar.Consumer {
		c := newClient(t, pulsar.ClientOptions{URL: westNode.Broker().ServiceURL()})
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	cons := subscribe()
	producer := newClient(t, pulsar.ClientOptions{URL: east.ServiceURL()})
	produceN(t, producer, topic, "before", 20)
	checkPayloads(t, receiveAll(t, cons, 20, 200*time.Millisecond), payloads("before", 0, 20))
	up := waitReplication(t, east.WebURL(), topic, "stats", "west", "connected and drained",
		func(s replStat) bool { return s.Connected && s.ReplicationBacklog == 0 })
	if up.OutboundConnection == "" || up.LastError != "" {
		t.Errorf("a healthy link's stats: %+v", up)
	}
	// West counts east's replication producer as its inbound side.
	waitReplication(t, westNode.Broker().WebURL(), topic, "stats", "east", "showing the inbound connection",
		func(s replStat) bool { return s.InboundConnection != "" })

	cons.Close()
	if err := westNode.Close(); err != nil {
		t.Fatal(err)
	}
	produceN(t, producer, topic, "during", 30)
	down := waitReplication(t, east.WebURL(), topic, "stats", "west", "disconnected with the backlog",
		func(s replStat) bool { return !s.Connected && s.ReplicationBacklog == 30 && s.LastError != "" })
	t.Logf("west down: %+v", down)
	produceN(t, producer, topic, "later", 20)
	// The backlog grows, and its oldest message ages.
	waitReplication(t, east.WebURL(), topic, "stats", "west", "growing and aging",
		func(s replStat) bool {
			return !s.Connected && s.ReplicationBacklog == 50 && s.ReplicationDelayInSeconds >= 1
		})

	westNode = startNode(t, westCfg)
	cons = subscribe()
	defer cons.Close()
	got := receiveAll(t, cons, 50, 500*time.Millisecond)
	checkPayloads(t, got[:30], payloads("during", 0, 30))
	checkPayloads(t, got[30:], payloads("later", 0, 20))
	drained := waitReplication(t, east.WebURL(), topic, "stats", "west", "reconnected and drained",
		func(s replStat) bool {
			return s.Connected && s.ReplicationBacklog == 0 && s.ReplicationDelayInSeconds == 0
		})
	t.Logf("west back: %+v", drained)
}

// TestReplicationPartitionedStats: a partitioned topic's stats carry the
// replication map per partition and summed over them.
func TestReplicationPartitionedStats(t *testing.T) {
	n, urls := startDev(t, "east", "west")
	east := n.Regions()[0].Broker()
	const topic, partitions, count = "persistent://public/default/parts", 2, 40
	req, err := http.NewRequest(http.MethodPut, east.WebURL()+"/admin/v2/persistent/public/default/parts/partitions",
		strings.NewReader(fmt.Sprint(partitions)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("create %s: %s", topic, resp.Status)
	}
	// West learns of the partitions through its global cache: a client that
	// looked the topic up there earlier would take it for unpartitioned.
	tn := mustTopicName(t, topic)
	west := region(t, n, "west").Broker().Service()
	testkit.WaitFor(t, "west to see the topic's partitions", func() bool {
		got, err := west.Partitions(context.Background(), tn)
		return err == nil && got == partitions
	})
	cons := subscribeIn(t, map[string]string{"west": urls["west"]}, topic)["west"]
	produceN(t, newClient(t, pulsar.ClientOptions{URL: urls["east"]}), topic, "m", count)
	receiveAll(t, cons, count, 200*time.Millisecond)
	st := waitReplication(t, east.WebURL(), topic, "partitioned-stats", "west", "connected and drained",
		func(s replStat) bool { return s.Connected && s.ReplicationBacklog == 0 && s.OutboundConnection != "" })
	if st.LastError != "" {
		t.Errorf("a healthy link shows lastError %q", st.LastError)
	}
	for i := range partitions {
		p := fmt.Sprintf("%s-partition-%d", topic, i)
		if ps, ok := replicationOf(t, east.WebURL(), p, "stats")["west"]; !ok || !ps.Connected {
			t.Errorf("%s: replication to west %+v (listed %v)", p, ps, ok)
		}
	}
}

// TestReplicationStatsFromAnotherProcess: east's replication worker runs in
// a node of its own (as `meridian replicator` does), apart from east's
// broker. East's broker answers the stats from the worker's record: the
// link connected while the worker runs, and not once it stopped.
func TestReplicationStatsFromAnotherProcess(t *testing.T) {
	cfg := node.Dev(t.TempDir(), []string{"east", "west"}, 0, 0)
	freePorts(&cfg)
	cfg.Regions[0].Replicator = nil
	cfg.Logger = testLogger()
	brokers := startNode(t, cfg)
	east, west := brokers.Regions()[0].Broker(), brokers.Regions()[1].Broker()

	rep := replicator.DefaultConfig("east")
	rep.ScanInterval, rep.CursorPersistInterval, rep.StatsInterval = 50*time.Millisecond, 10*time.Millisecond, 100*time.Millisecond
	workers := startNode(t, node.Config{Etcd: brokers.EtcdEndpoints(), Logger: testLogger(),
		Regions: []node.RegionConfig{{Name: "east", Replicator: &rep}}})

	const topic, count = "persistent://public/default/apart", 30
	cons := subscribeIn(t, map[string]string{"west": west.ServiceURL()}, topic)["west"]
	produceN(t, newClient(t, pulsar.ClientOptions{URL: east.ServiceURL()}), topic, "m", count)
	checkPayloads(t, receiveAll(t, cons, count, 200*time.Millisecond), payloads("m", 0, count))
	st := waitReplication(t, east.WebURL(), topic, "stats", "west", "connected and drained",
		func(s replStat) bool { return s.Connected && s.ReplicationBacklog == 0 })
	if st.OutboundConnection != west.ServiceURL() || st.OutboundConnectedSince == "" {
		t.Errorf("outbound connection %q since %q, want %s", st.OutboundConnection, st.OutboundConnectedSince, west.ServiceURL())
	}
	if err := workers.Close(); err != nil {
		t.Fatal(err)
	}
	waitReplication(t, east.WebURL(), topic, "stats", "west", "disconnected once the worker stopped",
		func(s replStat) bool { return !s.Connected && s.OutboundConnection == "" })
}
