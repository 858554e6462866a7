//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/drill"
	"github.com/meridian-mq/meridian/global"
)

// TestDrillPlannedIsolate runs `meridian drill`'s planned drill with the
// isolate cut on the bed: three regions, 20 ms links, 1,000 msg/s in all.
// A planned switch must cost no duplicate and no send error, the clients
// must fail back, and the drill's figures must match the bed's own
// checker on the same history.
//
//	flock /tmp/meridian-e2e.lock go test -tags e2e -run TestDrillPlannedIsolate -v ./e2e/
func TestDrillPlannedIsolate(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	tr := startThreeRegions(ctx, t, 0, nil, "dr", global.Policies{ReplicationClusters: []string{"r1", "r2", "r3"}})
	serviceURLs, adminURLs := map[string]string{}, map[string]string{}
	for _, r := range tr.bed.Regions {
		serviceURLs[r.Name] = r.Brokers[0].ServiceURL()
		adminURLs[r.Name] = "http://" + r.Brokers[0].WebLink.Addr()
	}

	cfg := drill.DefaultConfig()
	cfg.Namespace, cfg.Lose, cfg.To, cfg.Mode = "dr/ns", "r1", "r2", drill.Planned
	cfg.Rate, cfg.Before, cfg.Outage, cfg.After = 1000, 5*time.Second, 10*time.Second, 5*time.Second
	cfg.ServiceURLs, cfg.AdminURLs = serviceURLs, adminURLs
	cfg.Thresholds.MaxSendErrors = 0
	cfg.ReportDir = t.TempDir()
	admin := &drill.HTTPAdmin{URL: adminURLs["r1"], Client: http.DefaultClient}
	plan, err := drill.MakePlan(ctx, cfg, admin)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	r, err := drill.Run(ctx, plan, drill.Env{Admin: admin, NewClient: pulsar.NewClient, Out: &out,
		Exit: func(int) { t.Error("the drill asked to exit") }})
	t.Logf("drill output:\n%s\n%s", out.String(), drill.Summary(r))
	if err != nil {
		t.Fatal(err)
	}
	f := r.Figures
	dups := 0
	for _, d := range append(append([]drill.Duplicates{}, f.Duplicates...), f.FailBack.Duplicates...) {
		dups += d.Count
	}
	if !r.Verdict.Pass || f.SendErrors != 0 || dups != 0 || f.LostForGood != 0 || len(f.FailBack.NotHome) != 0 {
		t.Errorf("planned isolate drill: pass %v, %d send errors, %d duplicates, %d lost, not home %v; want a pass with none",
			r.Verdict.Pass, f.SendErrors, dups, f.LostForGood, f.FailBack.NotHome)
	}

	// The bed's checker on the drill's history. A replicated subscription
	// is one subscription whatever region delivers it, so the deliveries
	// go to the checker as one region's.
	h := History{}
	drillHistory, err := drill.ReadHistory(plan.ReportDir)
	if err != nil {
		t.Fatal(err)
	}
	late := map[string]map[drill.Message]bool{}
	for topic, ms := range f.RPO.Late {
		late[topic] = map[drill.Message]bool{}
		for _, m := range ms {
			late[topic][m] = true
		}
	}
	for _, s := range drillHistory.Sends {
		if late[s.Topic][s.Message] {
			continue
		}
		h.Sends = append(h.Sends, Send{Message: Message{Producer: s.Producer, N: s.Seq}, Region: s.Region, Topic: s.Topic,
			Key: s.Key, SequenceID: s.Seq, SentAt: s.SentAt, ReceiptAt: s.ReceiptAt, Err: s.Err})
	}
	for _, d := range drillHistory.Deliveries {
		if late[d.Topic][d.Message] {
			continue // the RPO's: late by definition, left out of the drill's order check, and never lost
		}
		h.Deliveries = append(h.Deliveries, Delivery{Message: Message{Producer: d.Producer, N: d.Seq}, Region: "any", Topic: d.Topic,
			Subscription: d.Subscription, Type: Failover, Consumer: d.Consumer, Key: d.Key, At: d.At, Acked: !d.AckAt.IsZero(), AckAt: d.AckAt})
	}
	rules := Rules{Regions: map[string][]string{}}
	for _, topic := range r.Topics {
		rules.Regions[topic] = []string{"any"}
	}
	rep := Check(h, rules)
	count := map[Kind]int{}
	for _, v := range rep.Violations {
		count[v.Kind]++
	}
	t.Logf("the bed's checker: %s", rep.Summary())
	if count[Lost] != f.LostForGood || count[DuplicateDelivered] != f.Redelivered || count[Order] != f.Order.PerKey {
		t.Errorf("the drill and the checker disagree: lost %d and %d, redelivered after an ack %d and %d, order %d and %d",
			f.LostForGood, count[Lost], f.Redelivered, count[DuplicateDelivered], f.Order.PerKey, count[Order])
	}
	if !rep.OK() {
		for i, v := range rep.Violations {
			if i == 10 {
				break
			}
			t.Log(v)
		}
	}
}
