package e2e

import (
	"strings"
	"testing"
	"time"
)

// The hand-made histories below are one region r1 (r2 for the wrong
// region), one topic t, producers a and b, and subscription s, unless a
// case says otherwise.
var (
	t0 = time.Unix(1000, 0)
	a0 = Message{"a", 0}
	a1 = Message{"a", 1}
	a2 = Message{"a", 2}
	b0 = Message{"b", 0}
)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func sends(ms ...Message) []Send {
	var out []Send
	for i, m := range ms {
		out = append(out, Send{Message: m, Region: "r1", Topic: "t", SentAt: at(i), ReceiptAt: at(10 + i)})
	}
	return out
}

// keyOf gives a0 and a2 the key "x", a1 "y", b0 "z".
func keyOf(m Message) string {
	switch {
	case m.Producer == "b":
		return "z"
	case m.N == 1:
		return "y"
	}
	return "x"
}

func stored(region string, ms ...Message) ReadBack {
	rb := ReadBack{Region: region, Topic: "t"}
	for _, m := range ms {
		rb.Messages = append(rb.Messages, Stored{Message: m})
	}
	return rb
}

// acked is a delivery to s at ms whose ack was confirmed 1ms later.
func acked(m Message, ms int) Delivery {
	return Delivery{Message: m, Region: "r1", Topic: "t", Subscription: "s", Type: Exclusive, At: at(ms), Acked: true, AckAt: at(ms + 1)}
}

func unacked(m Message, ms int) Delivery {
	d := acked(m, ms)
	d.Acked, d.AckAt = false, time.Time{}
	return d
}

// keyed gives every message of h its key (keyOf).
func keyed(h History) History {
	for i := range h.Sends {
		h.Sends[i].Key = keyOf(h.Sends[i].Message)
	}
	for i := range h.Deliveries {
		h.Deliveries[i].Key = keyOf(h.Deliveries[i].Message)
	}
	for _, rb := range h.ReadBacks {
		for i := range rb.Messages {
			rb.Messages[i].Key = keyOf(rb.Messages[i].Message)
		}
	}
	return h
}

func typed(typ SubscriptionType, ds ...Delivery) []Delivery {
	for i := range ds {
		ds[i].Type = typ
	}
	return ds
}

func inRegion(region string, ds ...Delivery) []Delivery {
	for i := range ds {
		ds[i].Region = region
	}
	return ds
}

// TestCheck shows that the checker catches each defect it is for, and
// excuses only what the subscription type and a crash window allow.
func TestCheck(t *testing.T) {
	crash := Disruption{Start: at(1000), End: at(1050)}
	for _, tc := range []struct {
		name       string
		h          History
		rules      Rules
		wantKind   Kind   // "" for a clean history
		wantDetail string // part of the first violation of wantKind
		window     int    // window redeliveries expected
	}{
		{name: "clean",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21), acked(a1, 22)}}},
		{name: "lost from the topic",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21)}},
			wantKind: Lost, wantDetail: "a:1 in t of r1: acknowledged, but not stored"},
		{name: "never acked by the subscription",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21), unacked(a1, 22)}},
			wantKind: Lost, wantDetail: "a:1 in t of r1: acknowledged, but s never acked it"},
		{name: "a failed send may be missing",
			h: History{Sends: append(sends(a0, b0), Send{Message: a1, Region: "r1", Topic: "t", SentAt: at(5), Err: "timeout"}),
				ReadBacks: []ReadBack{stored("r1", a0, b0)}, Deliveries: []Delivery{acked(a0, 20), acked(b0, 21)}}},
		{name: "stored twice",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1, a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21), acked(a1, 22)}},
			wantKind: DuplicateStored, wantDetail: "a:1"},
		{name: "stored out of order",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a1, b0, a0)},
				Deliveries: []Delivery{acked(a1, 20), acked(b0, 21), acked(a0, 22)}},
			wantKind: Order, wantDetail: "a:0 in t of r1: stored after a:1"},
		{name: "first delivered out of order",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: []Delivery{acked(a1, 20), acked(b0, 21), acked(a0, 22)}},
			wantKind: Order, wantDetail: "a:0 in t of r1: first delivered to s after a:1"},
		{name: "recorded after a later delivery's ack",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21), acked(a1, 40), unacked(a1, 22)}}},
		{name: "delivered again after the ack",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21), acked(a1, 22), acked(a0, 30)}},
			wantKind: DuplicateDelivered, wantDetail: "a:0"},
		{name: "redelivered before any ack",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: []Delivery{unacked(a0, 20), acked(a0, 21), acked(b0, 22), acked(a1, 23)}}},
		{name: "redelivered within the crash window",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21), acked(a1, 900), acked(a1, 1100)}},
			rules: Rules{Disruptions: []Disruption{crash}, RedeliveryWindow: 500 * time.Millisecond}, window: 1},
		{name: "ack recorded during the crash",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21), acked(a1, 1020), acked(a1, 1100)}},
			rules: Rules{Disruptions: []Disruption{crash}, RedeliveryWindow: 500 * time.Millisecond}, window: 1},
		{name: "acked by the restarted broker",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21), acked(a1, 1060), acked(a1, 1100)}},
			rules:    Rules{Disruptions: []Disruption{crash}, RedeliveryWindow: 500 * time.Millisecond},
			wantKind: DuplicateDelivered, wantDetail: "a:1"},
		{name: "acked while the clients reconnect",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21), acked(a1, 1060), acked(a1, 1100)}},
			rules:  Rules{Disruptions: []Disruption{crash}, RedeliveryWindow: 500 * time.Millisecond, ReconnectWindow: 100 * time.Millisecond},
			window: 1},
		{name: "acked after the reconnect window",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21), acked(a1, 1200), acked(a1, 1300)}},
			rules:    Rules{Disruptions: []Disruption{crash}, RedeliveryWindow: 500 * time.Millisecond, ReconnectWindow: 100 * time.Millisecond},
			wantKind: DuplicateDelivered, wantDetail: "a:1"},
		{name: "acked long before the crash",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21), acked(a1, 22), acked(a0, 1100)}},
			rules:    Rules{Disruptions: []Disruption{crash}, RedeliveryWindow: 500 * time.Millisecond},
			wantKind: DuplicateDelivered, wantDetail: "a:0"},
		{name: "a crash in another region excuses nothing",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21), acked(a1, 900), acked(a1, 1100)}},
			rules:    Rules{Disruptions: []Disruption{{Region: "r2", Start: crash.Start, End: crash.End}}, RedeliveryWindow: 500 * time.Millisecond},
			wantKind: DuplicateDelivered, wantDetail: "a:1"},
		{name: "delivered but not in the topic",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21), acked(a1, 22)}},
			wantKind: NotStored, wantDetail: "a:1"},
		{name: "stored but never sent",
			h: History{Sends: sends(a0, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21)}},
			wantKind: NeverSent, wantDetail: "a:1 in t of r1: stored"},
		{name: "stored in a region it does not belong in",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1), stored("r2", a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(b0, 21), acked(a1, 22)}},
			wantKind: WrongRegion, wantDetail: "a:1 in t of r2: stored, but the topic belongs in [r1]"},
		{name: "delivered in a region it does not belong in",
			h: History{Sends: sends(a0, a1, b0), ReadBacks: []ReadBack{stored("r1", a0, b0, a1)},
				Deliveries: append([]Delivery{acked(a0, 20), acked(b0, 21), acked(a1, 22)}, inRegion("r2", acked(b0, 30))...)},
			rules:    Rules{Regions: map[string][]string{"t": {"r1"}}},
			wantKind: WrongRegion, wantDetail: "b:0 in t of r2: delivered to s"},
		{name: "replicated to every region it belongs in",
			h: History{Sends: sends(a0, b0), ReadBacks: []ReadBack{stored("r1", a0, b0), stored("r2", b0, a0)},
				Deliveries: append([]Delivery{acked(a0, 20), acked(b0, 21)}, inRegion("r2", acked(b0, 30), acked(a0, 31))...)},
			rules: Rules{Regions: map[string][]string{"t": {"r1", "r2"}}}},
		{name: "lost in one region of two",
			h:        History{Sends: sends(a0, b0), ReadBacks: []ReadBack{stored("r1", a0, b0), stored("r2", b0)}},
			rules:    Rules{Regions: map[string][]string{"t": {"r1", "r2"}}},
			wantKind: Lost, wantDetail: "a:0 in t of r2"},
		{name: "Key_Shared may interleave keys",
			h: keyed(History{Sends: sends(a0, a1, a2), ReadBacks: []ReadBack{stored("r1", a0, a1, a2)},
				Deliveries: typed(KeyShared, acked(a1, 20), acked(a0, 21), acked(a2, 22))})},
		{name: "Key_Shared breaks a key's order",
			h: keyed(History{Sends: sends(a0, a1, a2), ReadBacks: []ReadBack{stored("r1", a0, a1, a2)},
				Deliveries: typed(KeyShared, acked(a2, 20), acked(a1, 21), acked(a0, 22))}),
			wantKind: Order, wantDetail: "a:0 in t of r1: first delivered to s after a:2"},
		{name: "keyed batches may be stored out of the producer's order",
			h: keyed(History{Sends: sends(a0, a1, a2), ReadBacks: []ReadBack{stored("r1", a0, a2, a1)},
				Deliveries: []Delivery{acked(a0, 20), acked(a2, 21), acked(a1, 22)}})},
		{name: "a key stored out of order",
			h: keyed(History{Sends: sends(a0, a1, a2), ReadBacks: []ReadBack{stored("r1", a2, a1, a0)},
				Deliveries: []Delivery{acked(a2, 20), acked(a1, 21), acked(a0, 22)}}),
			wantKind: Order, wantDetail: "a:0 in t of r1: stored after a:2"},
		{name: "Shared promises no order",
			h: History{Sends: sends(a0, a1, a2), ReadBacks: []ReadBack{stored("r1", a0, a1, a2)},
				Deliveries: typed(Shared, acked(a2, 20), acked(a1, 21), acked(a0, 22))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.h, tc.rules)
			if tc.wantKind == "" {
				for _, v := range r.Violations {
					t.Errorf("unexpected %s", v)
				}
			} else {
				found := false
				for _, v := range r.Violations {
					if v.Kind == tc.wantKind && strings.Contains(v.String(), tc.wantDetail) {
						found = true
						break
					}
				}
				if !found {
					t.Errorf("no %q violation with %q among %v", tc.wantKind, tc.wantDetail, r.Violations)
				}
			}
			if r.WindowRedeliveries != tc.window {
				t.Errorf("%d window redeliveries, want %d", r.WindowRedeliveries, tc.window)
			}
		})
	}
}

func TestReportSummary(t *testing.T) {
	r := Check(History{Sends: sends(a0, b0), ReadBacks: []ReadBack{stored("r1", a0, b0)},
		Deliveries: []Delivery{unacked(a0, 20), acked(a0, 21), acked(b0, 22)}}, Rules{})
	want := "2 sends (2 acknowledged), 2 stored, 3 deliveries (2 distinct), 1 redelivered before an ack, 0 redelivered around a disruption, 0 violations"
	if got := r.Summary(); got != want || !r.OK() {
		t.Errorf("summary %q (ok %v), want %q", got, r.OK(), want)
	}
}
