//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/autorecovery"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/testkit"
)

// TestBookiesLostForGoodAreReReplicated is issue 32's repeated loss: one
// region with 6 bookies and E=3 Qw=3 Qa=2, 6,000 acknowledged messages over
// two closed ledgers and an open one. The three bookies of the first
// ledger's ensemble are lost one after another (SIGKILL, then their data
// directory deleted), each repair awaited before the next loss, and every
// message is read back. Without auto-recovery (the second case) the first
// ledger has no copy left after the third loss, and the read-back fails:
// the first case's success is the repair's doing.
func TestBookiesLostForGoodAreReReplicated(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recovery bool
	}{{"with auto-recovery", true}, {"without auto-recovery", false}} {
		t.Run(tc.name, func(t *testing.T) { repeatedLoss(t, tc.recovery) })
	}
}

func repeatedLoss(t *testing.T, recovery bool) {
	const (
		topic     = "persistent://e2e/ns/durable"
		perLedger = 2500 // managedLedgerMaxEntriesPerLedger: 6,000 unbatched sends make 2 closed ledgers and an open one
		total     = 6000
		afterLoss = 100 // sends after each loss: the open ledger's writer moves off the lost bookie at its next add
	)
	brokerArgs := []string{"--autorecovery=" + strconv.FormatBool(recovery)}
	if recovery {
		brokerArgs = append(brokerArgs, "--lost-bookie-recovery-delay", "2s", "--autorecovery-retry-interval", "500ms")
	}
	bed, brk, store := startRecoveryBed(t, 6, perLedger, brokerArgs...)
	region := bed.Region("r1")
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()

	client := NewClient(t, brk.ServiceURL())
	KeepForReadBack(ctx, t, client, topic) // else retention deletes the closed ledgers
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	sent := 0
	send := func(n int) {
		t.Helper()
		errs := make(chan error, n)
		for range n {
			prod.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m-%d", sent))}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				errs <- err
			})
			sent++
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("send: %v", err)
			}
		}
	}
	began := time.Now()
	send(total)
	t.Logf("%d messages acknowledged in %v", total, time.Since(began).Round(time.Millisecond))

	var ledgers []ledger.Metadata
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range ledgers {
				t.Logf("ledger %d: %s, last entry %d, fragments %+v", l.ID, l.State, l.LastEntry, l.Fragments)
			}
		}
	})
	testkit.WaitFor(t, "two closed ledgers and an open one", func() bool {
		ledgers = regionLedgers(ctx, t, store, region.Name)
		closed := 0
		for _, l := range ledgers {
			if l.State == ledger.StateClosed {
				closed++
			}
		}
		return closed >= 2 && ledgers[len(ledgers)-1].State == ledger.StateOpen
	})
	first := ledgers[0]
	if first.State != ledger.StateClosed || first.LastEntry < perLedger-1 {
		t.Fatalf("the first ledger: %+v, want CLOSED with %d entries", first, perLedger)
	}
	victims := ensembleBookies(t, region, first.Fragments[0].Ensemble)
	t.Logf("ledgers %v; losing the first ledger's ensemble %v one by one", ledgerIDs(ledgers), names(victims))

	for i, victim := range victims {
		lost := time.Now()
		victim.Kill()
		if err := os.RemoveAll(filepath.Join(bed.Dir, victim.Name)); err != nil {
			t.Fatal(err)
		}
		send(afterLoss)
		if !recovery {
			continue
		}
		bytesBefore := bytesCopied(ctx, t, brk)
		// The metadata first (an etcd read), the admin command only once
		// it is clean: the command must agree that nothing is left.
		testkit.WaitFor(t, fmt.Sprintf("every ledger repaired off %s (loss %d)", victim.Name, i+1), func() bool {
			return len(ledgersNaming(regionLedgers(ctx, t, store, region.Name), victim.Name)) == 0 &&
				len(adminUnderReplicated(ctx, t, brk)) == 0
		})
		t.Logf("loss %d: %s SIGKILLed and wiped; every ledger repaired off it %v later, %d bytes copied",
			i+1, victim.Name, time.Since(lost).Round(time.Millisecond), int64(bytesCopied(ctx, t, brk)-bytesBefore))
	}

	// Read everything back from the beginning.
	// Without recovery the read stalls at the first ledger; 20 s shows it.
	readFor := time.Minute
	if !recovery {
		readFor = 20 * time.Second
	}
	readCtx, cancelRead := context.WithTimeout(ctx, readFor)
	defer cancelRead()
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "e2e-read-back",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := make(map[string]bool, sent)
	for len(seen) < sent {
		msg, err := cons.Receive(readCtx)
		if err != nil {
			break
		}
		seen[string(msg.Payload())] = true
		cons.Ack(msg)
	}
	missing := sent - len(seen)
	t.Logf("read back %d of %d acknowledged messages", len(seen), sent)
	switch {
	case recovery && missing != 0:
		t.Fatalf("%d acknowledged messages lost despite auto-recovery", missing)
	case !recovery && missing == 0:
		t.Fatal("without auto-recovery every message was read back after the first ledger's whole ensemble was lost: the loss this test stages did not happen")
	case !recovery:
		t.Logf("without auto-recovery: %d acknowledged messages unreadable, as expected", missing)
	}
	if !recovery {
		return
	}
	var list []autorecovery.BookieInfo
	adminJSON(ctx, t, brk, &list, "bookies", "list")
	for _, b := range list {
		if slices.ContainsFunc(victims, func(p *Process) bool { return p.Name == b.ID }) && b.Ledgers != 0 {
			t.Errorf("meridian admin bookies list: lost bookie %s still holds %d ledgers", b.ID, b.Ledgers)
		}
	}
}

// regionLedgers reads every ledger's metadata in region, by id.
func regionLedgers(ctx context.Context, t *testing.T, store meta.Store, region string) []ledger.Metadata {
	t.Helper()
	kvs, _, err := store.List(ctx, bkproto.LedgersPrefix(region))
	if err != nil {
		t.Fatal(err)
	}
	var out []ledger.Metadata
	for _, kv := range kvs {
		var md ledger.Metadata
		if err := json.Unmarshal(kv.Value, &md); err != nil {
			t.Fatalf("ledger %s: %v", kv.Key, err)
		}
		out = append(out, md)
	}
	slices.SortFunc(out, func(a, b ledger.Metadata) int { return int(a.ID - b.ID) })
	return out
}

func ledgerIDs(ls []ledger.Metadata) []int64 {
	var out []int64
	for _, l := range ls {
		out = append(out, l.ID)
	}
	return out
}

// ledgersNaming lists the ledgers with a fragment on bookie.
func ledgersNaming(ls []ledger.Metadata, bookie string) []int64 {
	var out []int64
	for _, l := range ls {
		if slices.ContainsFunc(l.Fragments, func(f ledger.Fragment) bool { return slices.Contains(f.Ensemble, bookie) }) {
			out = append(out, l.ID)
		}
	}
	return out
}

// adminJSON runs `meridian admin -o json ARGS...` against brk and decodes
// its output into v.
func adminJSON(ctx context.Context, t *testing.T, brk *Broker, v any, args ...string) {
	t.Helper()
	out := admin(ctx, t, brk, append([]string{"-o", "json"}, args...)...)
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("meridian admin %v: %v\n%s", args, err, out)
	}
}

// admin runs `meridian admin ARGS...` against brk and returns its output,
// failing the test if it fails.
func admin(ctx context.Context, t *testing.T, brk *Broker, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, meridianBin, append([]string{"admin", "--admin-url", brk.WebURL()}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("meridian admin %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

func adminUnderReplicated(ctx context.Context, t *testing.T, brk *Broker) []autorecovery.UnderReplicatedLedger {
	t.Helper()
	var out []autorecovery.UnderReplicatedLedger
	adminJSON(ctx, t, brk, &out, "bookies", "under-replicated")
	return out
}

// bytesCopied is what the broker's replication workers have written to
// replacement bookies.
func bytesCopied(ctx context.Context, t *testing.T, brk *Broker) float64 {
	t.Helper()
	const series = "replication_worker_NUM_BYTES_WRITTEN_sum"
	v, err := scrapeMetrics(ctx, brk.WebURL(), series)
	if err != nil {
		t.Fatal(err)
	}
	return v[series]
}

// TestBookieDecommissionUnderLoad is issue 32's decommission: a live
// bookie of the open ledger's ensemble is decommissioned (`meridian admin
// bookies decommission --wait`) while a producer sends 500 msg/s. It ends
// with the bookie in no ensemble; it is then SIGKILLed and wiped, and the
// checker finds nothing lost. A second decommission, which would leave
// fewer writable bookies than an ensemble needs, and one of an unknown
// bookie are refused with their reasons.
func TestBookieDecommissionUnderLoad(t *testing.T) {
	const topic = "persistent://e2e/ns/drained"
	bed, brk, store := startRecoveryBed(t, 4, 1000, "--autorecovery-retry-interval", "500ms")
	region := bed.Region("r1")
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	client := NewClient(t, brk.ServiceURL())
	KeepForReadBack(ctx, t, client, topic)
	rec := bed.Recorder()
	prod, err := StartProducer(ctx, client, rec, ProducerConfig{Region: region.Name, Topic: topic, Name: "e2e-p0", Interval: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rec.WaitAcknowledged(ctx, t, 2500, "before the decommission")

	ledgers := regionLedgers(ctx, t, store, region.Name)
	open := ledgers[len(ledgers)-1]
	victim := open.Fragments[len(open.Fragments)-1].Ensemble[0]
	other := open.Fragments[len(open.Fragments)-1].Ensemble[1]
	adminFails(ctx, t, brk, `no bookie "nobody"`, "bookies", "decommission", "nobody")
	began, before := time.Now(), rec.Acknowledged()
	var d autorecovery.Decommission
	adminJSON(ctx, t, brk, &d, "bookies", "decommission", victim, "--wait", "3m")
	if !d.Done {
		t.Fatalf("decommission of %s not done after 3 minutes: %+v", victim, d)
	}
	t.Logf("decommission of %s (in the open ledger %d's ensemble) done in %v, %d receipts meanwhile: %s",
		victim, open.ID, time.Since(began).Round(time.Millisecond), rec.Acknowledged()-before, d.Message)
	adminFails(ctx, t, brk, "start another bookie first", "bookies", "decommission", other)
	if naming := ledgersNaming(regionLedgers(ctx, t, store, region.Name), victim); len(naming) != 0 {
		t.Fatalf("after the decommission ledgers %v still name %s", naming, victim)
	}
	rec.WaitAcknowledged(ctx, t, rec.Acknowledged()+500, "after the decommission")
	if err := prod.Stop(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	p := ensembleBookies(t, region, []string{victim})[0]
	p.Kill()
	if err := os.RemoveAll(filepath.Join(bed.Dir, victim)); err != nil {
		t.Fatal(err)
	}
	if err := ReadTopic(ctx, client, rec, region.Name, topic); err != nil {
		t.Fatal(err)
	}
	bed.Verify(rec.History(), Rules{})
}

// adminFails runs `meridian admin ARGS...` against brk and wants it to
// fail with want in its message.
func adminFails(ctx context.Context, t *testing.T, brk *Broker, want string, args ...string) {
	t.Helper()
	out, err := exec.CommandContext(ctx, meridianBin, append([]string{"admin", "--admin-url", brk.WebURL()}, args...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("meridian admin %v: %v, %s; want a failure saying %q", args, err, out, want)
	}
	t.Logf("meridian admin %v refused: %s", args, strings.TrimSpace(string(out)))
}

// startRecoveryBed starts region r1 with bookies bookies, E=3 Qw=3 Qa=2,
// ledgers of perLedger entries (rolled over at once) and one broker with
// brokerArgs, and creates namespace e2e/ns in it.
func startRecoveryBed(t *testing.T, bookies, perLedger int, brokerArgs ...string) (*Bed, *Broker, meta.Store) {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("managedLedgerMaxEntriesPerLedger=%d\nmanagedLedgerMinLedgerRolloverTimeMinutes=0\n", perLedger)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Bookie authentication is on: the broker's writer and its
	// auto-recovery's copies must both present the region's token.
	bed := StartBed(t, BedConfig{Binary: meridianBin, Regions: []RegionConfig{{Name: "r1", EtcdMembers: 1, Bookies: bookies, Brokers: 1,
		EnsembleSize: 3, WriteQuorum: 3, AckQuorum: 2, BookieAuth: true, BrokerArgs: append([]string{"--config", conf}, brokerArgs...)}}})
	region := bed.Region("r1")
	ctx := t.Context()
	gs := bed.GlobalStore(ctx)
	if _, err := gs.CreateTenant(ctx, "e2e", global.TenantInfo{AllowedClusters: []string{region.Name}}); err != nil {
		t.Fatal(err)
	}
	if _, err := gs.CreateNamespace(ctx, "e2e", "ns", global.Policies{ReplicationClusters: []string{region.Name}}); err != nil {
		t.Fatal(err)
	}
	store := bed.Dial(ctx, region.EtcdEndpoints())
	requireBookieAuth(ctx, t, store, region)
	return bed, region.Brokers[0], store
}

// requireBookieAuth checks that the region's first bookie refuses a client
// without the region's token: the scenario really runs with bookie
// authentication on.
func requireBookieAuth(ctx context.Context, t *testing.T, store meta.Store, region *Region) {
	t.Helper()
	kv, err := store.Get(ctx, bkproto.BookieKey(region.Name, region.Bookies[0].Name))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := bkproto.ParseRegistration(kv.Value)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bkproto.Dial(ctx, reg.Address, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ReadLAC(ctx, bkproto.ReadLACRequest{LedgerID: 1}); !errors.Is(err, bkproto.ErrUnauthorized) {
		t.Fatalf("a client without the bookie token: %v, want Unauthorized", err)
	}
}
