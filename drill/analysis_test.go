package drill

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// script builds a synthetic history on a timeline of whole
// milliseconds from t0.
type script struct {
	t0 time.Time
	h  History
}

func (s *script) at(ms int) time.Time { return s.t0.Add(time.Duration(ms) * time.Millisecond) }

// send records producer p's message seq (key k), sent at ms and receipted
// 5ms later in region (region "" for a send that failed).
func (s *script) send(p string, seq int64, ms int, region string) {
	snd := Send{Message: Message{Producer: p, Seq: seq}, Topic: "t", Key: fmt.Sprintf("k%d", seq%2), SentAt: s.at(ms)}
	if region == "" {
		snd.Err = "timeout"
	} else {
		snd.ReceiptAt, snd.Region = s.at(ms+5), region
	}
	s.h.Sends = append(s.h.Sends, snd)
}

// deliver records consumer c getting p's seq at ms in region, acked 1ms
// later (unless ack is false).
func (s *script) deliver(c, p string, seq int64, ms int, region string, ack bool) {
	d := Delivery{Message: Message{Producer: p, Seq: seq}, Topic: "t", Subscription: "s", Consumer: c, Key: fmt.Sprintf("k%d", seq%2),
		At: s.at(ms), Region: region}
	if ack {
		d.AckAt = s.at(ms + 1)
	}
	s.h.Deliveries = append(s.h.Deliveries, d)
}

// unplannedDrill is an unplanned drill losing east for west, with a cut
// at 1000ms, the switch at 1010ms, the restore at 5000ms and the fail
// back at 6000ms. Producer p sends one message every 100ms.
//
//   - East receipts 0..8 before the cut, and 9 just after its request
//     (before the fence took effect); c gets and acks 0..7 in east; 8
//     and 9 never reached west (replication lag).
//   - After the cut, p's first receipt in west is at 1305ms (seq 10);
//     c's first delivery in west is at 1400ms.
//   - c gets 6 and 7 again in west at 1400ms: acked at 611 and 711ms,
//     389ms and 289ms before the cut.
//   - 8 and 9 arrive in west only after the restore (5100ms).
//   - After the fail back, p is home at 6105ms, c at 6200ms, and c gets
//     message 20 again (acked in west at 2501ms, 3.499s before).
func unplannedDrill() (*script, Timeline) {
	s := &script{t0: time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC)}
	for seq := int64(0); seq < 9; seq++ {
		s.send("p", seq, int(seq)*100, "east")
	}
	s.send("p", 9, 1010, "east") // after the cut's request, before the fence took effect
	for seq := int64(0); seq < 8; seq++ {
		s.deliver("c", "p", seq, int(seq)*100+10, "east", true)
	}
	for seq := int64(10); seq < 50; seq++ {
		s.send("p", seq, 1300+int(seq-10)*100, "west")
	}
	s.deliver("c", "p", 6, 1400, "west", true)
	s.deliver("c", "p", 7, 1410, "west", true)
	for seq := int64(10); seq < 48; seq++ {
		s.deliver("c", "p", seq, 1500+int(seq-10)*100, "west", true)
	}
	s.deliver("c", "p", 8, 5100, "west", true)
	s.deliver("c", "p", 9, 5110, "west", true)

	for seq := int64(50); seq < 60; seq++ {
		s.send("p", seq, 6100+int(seq-50)*100, "east")
	}
	s.deliver("c", "p", 20, 6200, "east", true)
	s.deliver("c", "p", 48, 6210, "east", true)
	s.deliver("c", "p", 49, 6220, "east", true)
	for seq := int64(50); seq < 60; seq++ {
		s.deliver("c", "p", seq, 6300+int(seq-50)*100, "east", true)
	}
	tl := Timeline{Start: s.t0, Cut: s.at(1000), Switch: s.at(1010), Restore: s.at(5000), FailBack: s.at(6000), Stop: s.at(7100), End: s.at(7500)}
	return s, tl
}

func TestAnalyzeUnplanned(t *testing.T) {
	s, tl := unplannedDrill()
	f := Analyze(s.h, tl, Unplanned, "east", "Failover")
	if f.Sends != 60 || f.Receipted != 60 || f.SendErrors != 0 {
		t.Errorf("sends %d receipted %d errors %d, want 60 60 0", f.Sends, f.Receipted, f.SendErrors)
	}
	if f.RPO.Messages != 2 || f.RPO.ArrivedAfterRestore != 2 || f.RPO.Seconds != 0.21 {
		t.Errorf("RPO %+v, want 2 messages over 0.21s (8, and 9 receipted after the cut's request), both after the restore", f.RPO)
	}
	if f.LostForGood != 0 {
		t.Errorf("lost for good %d, want 0", f.LostForGood)
	}
	if f.Redelivered != 3 || len(f.RPO.Late["t"]) != 2 {
		t.Errorf("redelivered %d (want 6, 7 and 20), late %v (want 8 and 9)", f.Redelivered, f.RPO.Late)
	}
	if len(f.RTO.Producers) != 1 || f.RTO.Producers[0].Millis != 305 || len(f.RTO.Consumers) != 1 || f.RTO.Consumers[0].Millis != 400 {
		t.Errorf("RTO %+v, want p 305ms and c 400ms", f.RTO)
	}
	if f.RTO.MaxMillis != 400 || len(f.RTO.Unrecovered) != 0 {
		t.Errorf("RTO max %v unrecovered %v, want 400 and none", f.RTO.MaxMillis, f.RTO.Unrecovered)
	}
	if len(f.Duplicates) != 1 || f.Duplicates[0].Count != 2 || f.Duplicates[0].Seconds != 0.389 {
		t.Errorf("duplicates %+v, want 2, the oldest acked 0.389s before the cut", f.Duplicates)
	}
	if f.Order.PerKey != 0 || f.Order.PerProducer != 0 {
		t.Errorf("order %+v: the late 8 and 9 are the RPO's, not order violations", f.Order)
	}
	if f.FailBack.MaxMillis != 200 || len(f.FailBack.NotHome) != 0 {
		t.Errorf("fail back %+v, want 200ms max", f.FailBack)
	}
	if len(f.FailBack.Duplicates) != 1 || f.FailBack.Duplicates[0].Count != 1 || f.FailBack.Duplicates[0].Seconds != 3.499 {
		t.Errorf("fail back duplicates %+v, want message 20, acked 3.499s before the fail back", f.FailBack.Duplicates)
	}
	v := Judge(f, DefaultThresholds(), "Failover")
	if names := failedNames(v); names != "fail back duplicates" {
		t.Errorf("failed %q, want only the fail back's duplicates (3.499s > 1.5s)", names)
	}
}

func failedNames(v Verdict) string {
	var names []string
	for _, c := range v.Failed() {
		names = append(names, strings.SplitN(c.Name, " (", 2)[0])
	}
	return strings.Join(names, ", ")
}

// TestJudgeFailsWhatIsMissed: a threshold set below what the history shows
// fails the verdict and names itself; a message lost for good fails it
// whatever the thresholds; a client that never recovers fails the RTO.
func TestJudgeFailsWhatIsMissed(t *testing.T) {
	s, tl := unplannedDrill()
	f := Analyze(s.h, tl, Unplanned, "east", "Failover")
	th := DefaultThresholds()
	th.MaxDuplicatesSeconds = 10 // leave the fail back's duplicates out of it
	if v := Judge(f, th, "Failover"); !v.Pass {
		t.Fatalf("failed %q with generous thresholds", failedNames(v))
	}
	th.MaxRTO = 300 * time.Millisecond
	if names := failedNames(Judge(f, th, "Failover")); names != "rto" {
		t.Errorf("--max-rto 300ms: failed %q, want rto (the consumer's 400ms)", names)
	}

	th = DefaultThresholds()
	th.MaxDuplicatesSeconds = 0.3
	th.MaxFailBack = 100 * time.Millisecond
	if names := failedNames(Judge(f, th, "Failover")); names != "duplicates, fail back duplicates, fail back" {
		t.Errorf("failed %q", names)
	}

	// Message 30 never delivered: lost for good.
	lost := *s
	lost.h.Deliveries = nil
	for _, d := range s.h.Deliveries {
		if d.Seq != 30 {
			lost.h.Deliveries = append(lost.h.Deliveries, d)
		}
	}
	f = Analyze(lost.h, tl, Unplanned, "east", "Failover")
	if f.LostForGood != 1 || f.Lost[0] != (Message{"p", 30}) || f.FailBack.Lost != 1 {
		t.Fatalf("lost %d %v (fail back %d), want p:30", f.LostForGood, f.Lost, f.FailBack.Lost)
	}
	th.MaxDuplicatesSeconds, th.MaxFailBack = 10, time.Minute
	if names := failedNames(Judge(f, th, "Failover")); names != "lost for good" {
		t.Errorf("failed %q, want lost for good", names)
	}

	// The consumer never gets anything in west.
	stuck := *s
	stuck.h.Deliveries = nil
	for _, d := range s.h.Deliveries {
		if d.Region != "west" {
			stuck.h.Deliveries = append(stuck.h.Deliveries, d)
		}
	}
	f = Analyze(stuck.h, tl, Unplanned, "east", "Failover")
	if len(f.RTO.Unrecovered) != 1 || f.RTO.Unrecovered[0] != "c" {
		t.Fatalf("unrecovered %v, want c", f.RTO.Unrecovered)
	}
	if v := Judge(f, th, "Failover"); !strings.Contains(failedNames(v), "rto") {
		t.Errorf("failed %q, want rto among them", failedNames(v))
	}
}

func TestAnalyzeOrder(t *testing.T) {
	s := &script{t0: time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC)}
	for seq := int64(0); seq < 6; seq++ {
		s.send("p", seq, int(seq)*10, "east")
	}
	// Keys alternate (k0, k1): 2 (k0) after 4 (k0) breaks key order and
	// producer order; 3 after 2 breaks nothing more (the previous first
	// delivery is 2, as the bed's checker counts); a redelivery of 0 is
	// not a first delivery.
	for _, seq := range []int64{0, 1, 4, 2, 3, 0, 5} {
		s.deliver("c", "p", seq, 100+int(seq), "east", true)
	}
	tl := Timeline{Start: s.t0, Cut: s.at(1000)}
	f := Analyze(s.h, tl, Unplanned, "east", "Failover")
	if f.Order.PerKey != 1 || f.Order.PerProducer != 1 || !f.Order.Judged || len(f.Order.Examples) != 1 {
		t.Fatalf("order %+v, want 1 per key, 1 per producer, judged", f.Order)
	}
	th := DefaultThresholds()
	th.MaxRTO, th.MaxFailBack = time.Hour, time.Hour
	for _, tc := range []struct {
		subType, want string
	}{
		{"Failover", "rto, order"},
		{"Key_Shared", "rto, order"},
		{"Shared", "rto"}, // promises no order
	} {
		if got := failedNames(Judge(Analyze(s.h, tl, Unplanned, "east", tc.subType), th, tc.subType)); got != tc.want {
			t.Errorf("%s: failed %q, want %q", tc.subType, got, tc.want)
		}
	}
	th.MaxOrderViolations = 1
	if got := failedNames(Judge(Analyze(s.h, tl, Unplanned, "east", "Key_Shared"), th, "Key_Shared")); got != "rto" {
		t.Errorf("Key_Shared with one violation allowed: failed %q, want rto only", got)
	}
}

// TestAnalyzePlanned: in a planned drill the RTO runs from the switch.
func TestAnalyzePlanned(t *testing.T) {
	s := &script{t0: time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC)}
	s.send("p", 0, 0, "east")
	s.send("p", 1, 600, "west")
	s.deliver("c", "p", 0, 10, "east", true)
	s.deliver("c", "p", 1, 700, "west", true)
	tl := Timeline{Start: s.t0, Switch: s.at(500), Cut: s.at(900)}
	f := Analyze(s.h, tl, Planned, "east", "Failover")
	if f.RTO.Producers[0].Millis != 105 || f.RTO.Consumers[0].Millis != 200 {
		t.Fatalf("RTO %+v, want 105ms and 200ms from the switch", f.RTO)
	}
	if f.RPO.Messages != 0 || len(f.Duplicates) != 1 || f.Duplicates[0].Count != 0 {
		t.Fatalf("RPO %+v duplicates %+v, want none", f.RPO, f.Duplicates)
	}
	// East receipted 2 before the switch; west delivered it after the
	// switch and before the cut, unacked until after it: west had it.
	s.send("p", 2, 100, "east")
	s.deliver("c", "p", 2, 800, "west", false)
	s.deliver("c", "p", 2, 950, "west", true)
	if f = Analyze(s.h, tl, Planned, "east", "Failover"); f.RPO.Messages != 0 {
		t.Fatalf("RPO %+v duplicates %+v, want none", f.RPO, f.Duplicates)
	}
}

// TestRPOLeavesOutALaggingConsumer: a message the lost region receipted
// before the cut, stored in the new region before the restore (its
// StoredAt) but delivered there only after it, by a consumer behind its
// backlog, was not lost with the region: it is not in the RPO. Without
// StoredAt (a broker that does not send it), the delivery time decides.
func TestRPOLeavesOutALaggingConsumer(t *testing.T) {
	s, tl := unplannedDrill()
	for i := range s.h.Deliveries {
		d := &s.h.Deliveries[i]
		if d.Region == "west" && d.Seq == 8 {
			d.StoredAt = s.at(1200) // replicated to west before the cut took effect there
		}
		if d.Region == "west" && d.Seq == 9 {
			d.StoredAt = s.at(5050) // brought by the restored region's replicator
		}
	}
	f := Analyze(s.h, tl, Unplanned, "east", "Failover")
	if f.RPO.Messages != 1 || len(f.RPO.Late["t"]) != 1 || f.RPO.Late["t"][0].Seq != 9 {
		t.Errorf("RPO %+v, want message 9 alone: 8 was in west before the restore", f.RPO)
	}
}
