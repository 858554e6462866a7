//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
)

// longestGap returns the two consecutive times of the sorted ts with the
// longest wait between them whose later one falls in (from, to): the
// pause maxGap measures; zero times if there are none.
func longestGap(ts []time.Time, from, to time.Time) (start, end time.Time) {
	for i := 1; i < len(ts); i++ {
		if ts[i].After(from) && ts[i].Before(to) && !ts[i-1].After(to) && ts[i].Sub(ts[i-1]) > end.Sub(start) {
			start, end = ts[i-1], ts[i]
		}
	}
	return start, end
}

// maxGap is the longest wait between consecutive times in ts (sorted) whose
// later end falls in (from, to): how long the service paused after a fault
// at from.
func maxGap(ts []time.Time, from, to time.Time) time.Duration {
	start, end := longestGap(ts, from, to)
	return end.Sub(start)
}

// TestScenarioRegionFaults runs a real region on the test bed as separate
// processes (three `meridian etcd`, four `meridian bookie`, one `meridian
// broker` with E=3 Qw=3 Qa=2) under a pulsar-client-go workload with
// deduplication on: two producers with fixed names and a consumer that
// acks every message. The fault schedule SIGKILLs a bookie of the topic's
// current ensemble (which one is drawn from the bed's seed), then later
// SIGKILLs the broker and restarts it, and then, while the ensemble's
// disks are slow (every journal fsync of its bookies first waits slowSync,
// a failpoint), SIGKILLs the broker and the ensemble's bookies together
// and restarts them, so that they die with adds the bookies had taken but
// not yet made durable. The checker (Check) then
// proves over the recorded history that no acknowledged message was lost,
// none stored twice, none delivered again after a confirmed ack (except
// once per crash for acks within the redelivery window before it: the
// cursor persist interval, 1s, plus a round trip, taken as 3s for a loaded
// machine; see cluster/mledger's "What survives a crash"), and that each
// producer's messages were stored and first delivered in order. It also
// reports the pause each fault caused (the longest gap between send
// receipts, and between deliveries). Run it with
//
//	go test -tags e2e -race -run TestScenarioRegionFaults -v ./e2e/
func TestScenarioRegionFaults(t *testing.T) {
	const (
		topic            = "persistent://e2e/ns/faults"
		sub              = "checker"
		perPhase         = 600 // receipts between faults
		redeliveryWindow = 3 * time.Second
		// reconnectWindow excuses an ack the consumer retried across a
		// broker restart: it reaches the new broker after the broker has
		// dispatched the message again (the cursor had not persisted the
		// ack), and the consumer takes that copy after the ack's answer,
		// as the nemesis allows (nemesisReconnect).
		reconnectWindow = 2 * time.Second
		// slowSync is the slow disks' delay on each journal fsync, and
		// slowFor how long they are slow before the crash. No commit
		// started after the disks turned slow completes in between, so
		// every add of those 8 s is unconfirmed and, but for the first
		// commit's, still queued in the bookies' memory; and none has
		// waited the brokers' 10 s add timeout yet, so the correct broker
		// sees a slow disk, not a failed bookie.
		slowSync = 10 * time.Second
		slowFor  = 8 * time.Second
	)
	bed := StartBed(t, BedConfig{Binary: meridianBin, Regions: []RegionConfig{
		{Name: "r1", EtcdMembers: 3, Bookies: 4, Brokers: 1, EnsembleSize: 3, WriteQuorum: 3, AckQuorum: 2, BookieFailpoints: true}}})
	region := bed.Region("r1")
	brk := region.Brokers[0]
	t.Logf("scenario: bookie SIGKILL with Qw > Qa, then broker SIGKILL, on 1 region (3 etcd, 4 bookies, 1 broker, E=3 Qw=3 Qa=2), 400 msg/s (2 producers of 200); region up in %v",
		bed.StartedIn.Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	store := bed.Dial(ctx, region.EtcdEndpoints())

	// The broker created its cluster record, with its advertised (proxied)
	// URL; the operator's part is the tenant and a namespace with
	// deduplication on.
	gs := bed.GlobalStore(ctx)
	if c, err := gs.Cluster(ctx, region.Name); err != nil || c.BrokerServiceURL != brk.ServiceURL() {
		t.Fatalf("cluster record of %s: %+v, %v (want the broker's URL %s)", region.Name, c, err, brk.ServiceURL())
	}
	if _, err := gs.CreateTenant(ctx, "e2e", global.TenantInfo{AllowedClusters: []string{region.Name}}); err != nil {
		t.Fatal(err)
	}
	on := true
	if _, err := gs.CreateNamespace(ctx, "e2e", "ns", global.Policies{ReplicationClusters: []string{region.Name}, DeduplicationEnabled: &on}); err != nil {
		t.Fatal(err)
	}

	pc, cc := NewClient(t, region.ServiceURL()), NewClient(t, region.ServiceURL())
	WaitDeduplication(ctx, t, pc, topic+"-probe")

	// Each broker restart starts a ledger: keep the older ones, consumed,
	// for the read-back.
	KeepForReadBack(ctx, t, cc, topic)

	rec := bed.Recorder()
	cons, err := StartConsumer(ctx, cc, rec, ConsumerConfig{Region: region.Name, Topic: topic,
		Subscription: sub, Type: Exclusive, Name: "c0"})
	if err != nil {
		t.Fatal(err)
	}
	// Producers: fixed names, a steady 200 msg/s each.
	var producers []*Producer
	for _, name := range []string{"e2e-p0", "e2e-p1"} {
		p, err := StartProducer(ctx, pc, rec, ProducerConfig{Region: region.Name, Topic: topic, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		producers = append(producers, p)
	}

	// Fault 1: SIGKILL a bookie of the topic's current ensemble.
	rec.WaitAcknowledged(ctx, t, perPhase, "before the bookie fault")
	ensemble := currentEnsemble(ctx, t, store, region.Name, topic)
	victim := ensembleBookies(t, region, ensemble)[bed.Rand.IntN(len(ensemble))]
	before := rec.Acknowledged()
	bookieFault := time.Now()
	victim.Kill()
	t.Logf("fault 1: SIGKILLed %s of ensemble %v after %d receipts", victim.Name, ensemble, before)
	rec.WaitAcknowledged(ctx, t, before+perPhase, "after the bookie fault")
	after := currentEnsemble(ctx, t, store, region.Name, topic)
	t.Logf("after fault 1: %d receipts; the ensemble is now %v", rec.Acknowledged(), after)
	if slices.Contains(after, victim.Name) {
		t.Errorf("the killed bookie %s is still in the ensemble new entries go to: %v", victim.Name, after)
	}

	// Fault 2: SIGKILL the broker, then restart it on the same id.
	before = rec.Acknowledged()
	brokerFault := time.Now()
	brk.Restart(ctx)
	restarted := time.Since(brokerFault)
	t.Logf("fault 2: SIGKILLed the broker after %d receipts; restarted and serving in %v", before, restarted.Round(time.Millisecond))
	rec.WaitAcknowledged(ctx, t, before+perPhase, "after the broker fault")

	// Fault 3: slow the disks of the ensemble's bookies; slowFor later,
	// SIGKILL the broker and those bookies together (a rack that loses
	// power, as far as a process kill goes: what a bookie wrote and had not
	// yet fsynced stays in the page cache, what it held queued for its
	// journal is gone). They restart on fast disks (a restart arms no
	// failpoint), the bookies first.
	slow := ensembleBookies(t, region, currentEnsemble(ctx, t, store, region.Name, topic))
	for _, b := range slow {
		setFailpoints(ctx, t, b, fmt.Sprintf("journal-fsync=delay:%v", slowSync))
	}
	slowAt := time.Now()
	before, sentBefore := rec.Acknowledged(), len(rec.History().Sends)
	sleep(ctx, t, slowFor)
	slowFault := time.Now()
	brk.Kill()
	for _, b := range slow {
		b.Kill()
	}
	t.Logf("fault 3: the disks of %v turned slow (%v a journal fsync); %v later, after %d sends and %d receipts, SIGKILLed the broker and them",
		names(slow), slowSync, slowFault.Sub(slowAt).Round(time.Millisecond), len(rec.History().Sends)-sentBefore, rec.Acknowledged()-before)
	for _, p := range append(slow, brk.Process) {
		from := p.LogSize()
		p.Start()
		p.WaitReady(ctx, from)
	}
	slowRestarted := time.Since(slowFault)
	before = rec.Acknowledged()
	t.Logf("fault 3: the bookies and the broker serve again %v after their SIGKILL, with %d receipts", slowRestarted.Round(time.Millisecond), before)
	rec.WaitAcknowledged(ctx, t, before+perPhase, "after the crash on slow disks")
	for _, p := range producers {
		if err := p.Stop(ctx); err != nil {
			t.Logf("flush: %v", err)
		}
	}
	end := time.Now()

	// Wait until the consumer has acked every message that has a receipt.
	// A receipted message that never comes is lost: the wait gives up
	// after allAckedWait, and the checker reports it below.
	ackCtx, cancelAck := context.WithTimeout(ctx, allAckedWait)
	if err := rec.awaitAllAcked(ackCtx, 50*time.Millisecond); err != nil {
		t.Errorf("the consumer after %v: %v; the checker runs on what is stored", allAckedWait, err)
	}
	cancelAck()
	cons.Stop()
	if err := ReadTopic(ctx, cc, rec, region.Name, topic); err != nil {
		t.Fatal(err)
	}

	h := rec.History()
	bed.Verify(h, Rules{Disruptions: []Disruption{{Start: brokerFault, End: brokerFault.Add(restarted)},
		{Start: slowFault, End: slowFault.Add(slowRestarted)}}, RedeliveryWindow: redeliveryWindow, ReconnectWindow: reconnectWindow})
	receiptTimes, deliveryTimes := eventTimes(h)
	t.Logf("pause after fault 1 (bookie SIGKILL): receipts %v, deliveries %v",
		maxGap(receiptTimes, bookieFault, brokerFault).Round(time.Millisecond), maxGap(deliveryTimes, bookieFault, brokerFault).Round(time.Millisecond))
	t.Logf("pause after fault 2 (broker SIGKILL + restart, serving again after %v): receipts %v, deliveries %v",
		restarted.Round(time.Millisecond), maxGap(receiptTimes, brokerFault, slowAt).Round(time.Millisecond), maxGap(deliveryTimes, brokerFault, slowAt).Round(time.Millisecond))
	t.Logf("pause after fault 3 (slow disks, then broker SIGKILL + restart, serving again after %v): receipts %v, deliveries %v",
		slowRestarted.Round(time.Millisecond), maxGap(receiptTimes, slowAt, end).Round(time.Millisecond), maxGap(deliveryTimes, slowAt, end).Round(time.Millisecond))
	for _, s := range h.Sends {
		if s.Err != "" {
			t.Logf("send %s failed: %s", s.Message, s.Err)
			break
		}
	}

	// SIGTERM stops the broker cleanly: exit status 0.
	stopped := time.Now()
	brk.Terminate()
	if err := brk.Wait(ctx); err != nil {
		t.Errorf("broker after SIGTERM: %v", err)
	}
	t.Logf("broker exited %v after SIGTERM", time.Since(stopped).Round(time.Millisecond))
}

// currentEnsemble returns the bookies new entries of topic go to: the last
// ensemble of the last ledger in its managed-ledger record.
func currentEnsemble(ctx context.Context, t *testing.T, store meta.Store, region, topic string) []string {
	t.Helper()
	kvs, _, err := store.List(ctx, meta.Prefix(meta.RegionKey(region, "mledgers")))
	if err != nil {
		t.Fatal(err)
	}
	local := topic[strings.LastIndex(topic, "/")+1:]
	for _, kv := range kvs {
		if !strings.HasSuffix(kv.Key, local) {
			continue
		}
		var ml struct {
			Ledgers []struct {
				ID int64 `json:"id"`
			} `json:"ledgers"`
		}
		if err := json.Unmarshal(kv.Value, &ml); err != nil || len(ml.Ledgers) == 0 {
			t.Fatalf("managed ledger %s: %s (%v)", kv.Key, kv.Value, err)
		}
		lkv, err := store.Get(ctx, ledger.LedgerKey(region, ml.Ledgers[len(ml.Ledgers)-1].ID))
		if err != nil {
			t.Fatal(err)
		}
		var md ledger.Metadata
		if err := json.Unmarshal(lkv.Value, &md); err != nil {
			t.Fatal(err)
		}
		return md.LastEnsemble()
	}
	t.Fatalf("no managed ledger for %s among %d", topic, len(kvs))
	return nil
}

// allAckedWait bounds a scenario's wait for its consumer to ack every
// receipted message: past it the missing ones are taken as lost, for the
// checker to name.
const allAckedWait = 2 * time.Minute

// ensembleBookies returns region's bookies named in ensemble.
func ensembleBookies(t *testing.T, region *Region, ensemble []string) []*Process {
	t.Helper()
	var out []*Process
	for _, id := range ensemble {
		i := slices.IndexFunc(region.Bookies, func(p *Process) bool { return p.Name == id })
		if i < 0 {
			t.Fatalf("ensemble %v names no bookie of ours", ensemble)
		}
		out = append(out, region.Bookies[i])
	}
	return out
}

// names lists the processes' names.
func names(ps []*Process) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// setFailpoints arms spec on bookie b ("" clears), failing the test if b
// does not take it.
func setFailpoints(ctx context.Context, t *testing.T, b *Process, spec string) {
	t.Helper()
	if got, err := b.SetFailpoints(ctx, spec); err != nil || got != spec {
		t.Fatalf("failpoints %q on %s: armed %q, %v", spec, b.Name, got, err)
	}
}
