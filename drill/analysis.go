package drill

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Timeline is when each step of a drill happened. A zero time is a step
// that did not happen.
type Timeline struct {
	Start time.Time `json:"start"`
	// Switch is when the active region moved to the new region (by the
	// drill, or seen done by automatic failover).
	Switch   time.Time `json:"switch,omitzero"`
	Cut      time.Time `json:"cut"`
	Restore  time.Time `json:"restore,omitzero"`
	FailBack time.Time `json:"failBack,omitzero"`
	// Stop is when the producers stopped; End when the drain ended.
	Stop   time.Time `json:"stop,omitzero"`
	End    time.Time `json:"end,omitzero"`
	Phases []Phase   `json:"phases"`
}

// Phase is one named span of the drill.
type Phase struct {
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// failover is when the failover began: the switch in a planned drill,
// the cut in an unplanned one.
func (t Timeline) failover(mode Mode) time.Time {
	if mode == Planned && !t.Switch.IsZero() {
		return t.Switch
	}
	return t.Cut
}

// Figures are what a drill measured, all from the recorded history.
type Figures struct {
	Sends      int `json:"sends"`
	Receipted  int `json:"receipted"`
	SendErrors int `json:"sendErrors"`
	Deliveries int `json:"deliveries"`
	RPO        RPO `json:"rpo"`
	RTO        RTO `json:"rto"`
	// Duplicates are per subscription, from the failover to the fail back.
	Duplicates []Duplicates `json:"duplicates"`
	// Redelivered counts every delivery, at any time, of a message whose
	// ack the broker had confirmed before: the duplicates above and those
	// of no step (what the e2e bed's checker calls a duplicate delivery).
	Redelivered int      `json:"redelivered"`
	Order       Order    `json:"order"`
	FailBack    FailBack `json:"failBack"`
	// LostForGood are receipted messages their subscription never got.
	LostForGood int       `json:"lostForGood"`
	Lost        []Message `json:"lost,omitempty"`
}

// RPO: messages the lost region receipted before the cut took effect
// (before the restore) that the new region did not have while it served:
// neither acked before the cut nor stored elsewhere before the restore.
// "Stored elsewhere" is a delivery outside the lost region of a copy its
// region stored before the restore (Delivery.StoredAt), whenever it was
// delivered, so that a consumer behind its backlog does not count as a
// loss of data; without StoredAt, a delivery elsewhere between the
// failover (the switch, when planned) and the restore.
type RPO struct {
	Messages int `json:"messages"`
	// Seconds is the span of their send times: the seconds of traffic.
	Seconds float64 `json:"seconds"`
	// ArrivedAfterRestore are those delivered once the region came back.
	ArrivedAfterRestore int `json:"arrivedAfterRestore"`
	// Late are the messages, by topic: late by definition, they are left
	// out of the order check.
	Late map[string][]Message `json:"late,omitempty"`
}

// ClientTime is one client's time to a step.
type ClientTime struct {
	Client string  `json:"client"`
	Millis float64 `json:"millis"`
}

// RTO: from the failover (the cut, or the switch when planned) to each
// producer's first receipt and each consumer's first delivery in a region
// other than the lost one.
type RTO struct {
	Producers []ClientTime `json:"producers"`
	Consumers []ClientTime `json:"consumers"`
	// MedianMillis and MaxMillis are over every client.
	MedianMillis float64 `json:"medianMillis"`
	MaxMillis    float64 `json:"maxMillis"`
	// Unrecovered are the clients that never served elsewhere.
	Unrecovered []string `json:"unrecovered,omitempty"`
}

// Duplicates of one subscription: deliveries after a step (the failover,
// the fail back) of messages the consumer acked before it.
type Duplicates struct {
	Topic        string `json:"topic"`
	Subscription string `json:"subscription"`
	Count        int    `json:"count"`
	// Seconds is the traffic they span, in acks: how long before the
	// step the oldest of their acks was confirmed.
	Seconds float64 `json:"seconds"`
}

// Order counts messages first delivered after a later one of the same
// key of the same producer (PerKey), or of the same producer (PerProducer).
// Messages counted in the RPO are left out: they arrive late by
// definition.
type Order struct {
	PerKey      int  `json:"perKey"`
	PerProducer int  `json:"perProducer"`
	Judged      bool `json:"judged"` // false for Shared, which promises no order
	// Examples are the first few, as "topic subscription producer:seq key
	// after seq".
	Examples []string `json:"examples,omitempty"`
}

// maxOrderExamples bounds Order.Examples.
const maxOrderExamples = 10

// FailBack: from the fail back to every client's first receipt or
// delivery in the lost region again, with its own duplicates and losses.
type FailBack struct {
	Clients      []ClientTime `json:"clients"`
	MedianMillis float64      `json:"medianMillis"`
	MaxMillis    float64      `json:"maxMillis"`
	NotHome      []string     `json:"notHome,omitempty"`
	Duplicates   []Duplicates `json:"duplicates"`
	// Lost are messages receipted between the failover and the fail back
	// that their subscription never got.
	Lost int `json:"lost"`
}

// topicMessage names a message of one topic.
type topicMessage struct {
	topic string
	Message
}

// Analyze computes the Figures of h. lose is the region lost; subType
// decides whether order is judged.
func Analyze(h History, tl Timeline, mode Mode, lose, subType string) Figures {
	var f Figures
	t0 := tl.failover(mode)
	f.Sends = len(h.Sends)
	deliveries := map[topicMessage][]Delivery{}
	for _, d := range h.Deliveries {
		k := topicMessage{d.Topic, d.Message}
		deliveries[k] = append(deliveries[k], d)
	}
	f.Deliveries = len(h.Deliveries)

	// RPO and losses.
	rpo := map[topicMessage]bool{}
	beforeRestore := func(t time.Time) bool { return tl.Restore.IsZero() || t.Before(tl.Restore) }
	var rpoFirst, rpoLast time.Time
	for _, s := range h.Sends {
		if !s.Receipted() {
			f.SendErrors++
			continue
		}
		f.Receipted++
		k := topicMessage{s.Topic, s.Message}
		ds := deliveries[k]
		if len(ds) == 0 {
			f.LostForGood++
			f.Lost = append(f.Lost, s.Message)
			if !tl.FailBack.IsZero() && !s.ReceiptAt.Before(t0) && s.ReceiptAt.Before(tl.FailBack) {
				f.FailBack.Lost++
			}
		}
		// The lost region may still receipt a send in the moment between
		// the cut's request and its effect (a fence reaches the region's
		// brokers through a watch): every receipt of the lost region
		// before the restore counts.
		if s.Region != lose || !beforeRestore(s.ReceiptAt) {
			continue
		}
		available := slices.ContainsFunc(ds, func(d Delivery) bool {
			acked := !d.AckAt.IsZero() && d.AckAt.Before(tl.Cut)
			heldElsewhere := d.Region != lose && !d.At.Before(t0) && beforeRestore(d.At)
			if !d.StoredAt.IsZero() {
				heldElsewhere = d.Region != lose && beforeRestore(d.StoredAt)
			}
			return acked || heldElsewhere
		})
		if available {
			continue
		}
		rpo[k] = true
		f.RPO.Messages++
		if f.RPO.Late == nil {
			f.RPO.Late = map[string][]Message{}
		}
		f.RPO.Late[s.Topic] = append(f.RPO.Late[s.Topic], s.Message)
		if rpoFirst.IsZero() || s.SentAt.Before(rpoFirst) {
			rpoFirst = s.SentAt
		}
		rpoLast = later(rpoLast, s.SentAt)
		if !tl.Restore.IsZero() && slices.ContainsFunc(ds, func(d Delivery) bool { return !d.At.Before(tl.Restore) }) {
			f.RPO.ArrivedAfterRestore++
		}
	}
	if f.RPO.Messages > 1 {
		f.RPO.Seconds = rpoLast.Sub(rpoFirst).Seconds()
	}

	// RTO: the first receipt or delivery of each client after t0 outside
	// the lost region.
	producers, consumers := clients(h)
	firstAway := firstTimes(h, t0, time.Time{}, func(region string) bool { return region != lose && region != "" && region != "?" })
	for _, p := range producers {
		f.RTO.Producers = appendClientTime(f.RTO.Producers, &f.RTO.Unrecovered, p, firstAway, t0)
	}
	for _, c := range consumers {
		f.RTO.Consumers = appendClientTime(f.RTO.Consumers, &f.RTO.Unrecovered, c, firstAway, t0)
	}
	f.RTO.MedianMillis, f.RTO.MaxMillis = medianMax(append(slices.Clone(f.RTO.Producers), f.RTO.Consumers...))

	// Duplicates, between the failover and the fail back, and after it.
	f.Duplicates = duplicates(h, t0, tl.FailBack)
	if !tl.FailBack.IsZero() {
		f.FailBack.Duplicates = duplicates(h, tl.FailBack, time.Time{})
		firstHome := firstTimes(h, tl.FailBack, time.Time{}, func(region string) bool { return region == lose })
		for _, c := range append(producers, consumers...) {
			f.FailBack.Clients = appendClientTime(f.FailBack.Clients, &f.FailBack.NotHome, c, firstHome, tl.FailBack)
		}
		f.FailBack.MedianMillis, f.FailBack.MaxMillis = medianMax(f.FailBack.Clients)
	}

	f.Order = order(h, rpo, subType)
	f.Redelivered = redelivered(h)
	return f
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// clients lists the producers and consumers of h, sorted.
func clients(h History) (producers, consumers []string) {
	for _, s := range h.Sends {
		if !slices.Contains(producers, s.Producer) {
			producers = append(producers, s.Producer)
		}
	}
	for _, d := range h.Deliveries {
		if !slices.Contains(consumers, d.Consumer) {
			consumers = append(consumers, d.Consumer)
		}
	}
	slices.Sort(producers)
	slices.Sort(consumers)
	return producers, consumers
}

// firstTimes returns, per client, its first receipt (producers) or
// delivery (consumers) at or after from (and before until, unless zero) in
// a region where ok holds.
func firstTimes(h History, from, until time.Time, ok func(region string) bool) map[string]time.Time {
	first := map[string]time.Time{}
	note := func(client string, at time.Time, region string) {
		if at.Before(from) || (!until.IsZero() && !at.Before(until)) || !ok(region) {
			return
		}
		if t, seen := first[client]; !seen || at.Before(t) {
			first[client] = at
		}
	}
	for _, s := range h.Sends {
		if s.Receipted() {
			note(s.Producer, s.ReceiptAt, s.Region)
		}
	}
	for _, d := range h.Deliveries {
		note(d.Consumer, d.At, d.Region)
	}
	return first
}

func appendClientTime(out []ClientTime, missing *[]string, client string, first map[string]time.Time, from time.Time) []ClientTime {
	t, ok := first[client]
	if !ok {
		*missing = append(*missing, client)
		return out
	}
	return append(out, ClientTime{Client: client, Millis: float64(t.Sub(from).Microseconds()) / 1000})
}

func medianMax(ts []ClientTime) (median, maxMillis float64) {
	if len(ts) == 0 {
		return 0, 0
	}
	ms := make([]float64, len(ts))
	for i, t := range ts {
		ms[i] = t.Millis
	}
	slices.Sort(ms)
	return ms[len(ms)/2], ms[len(ms)-1]
}

// duplicates counts, per subscription, the deliveries at or after from
// (and before until, unless zero) of messages whose ack the broker had
// confirmed before from, and how long before from the oldest of those
// acks was: #17's measure ("nothing acked more than one sync interval
// before the cut is delivered again").
func duplicates(h History, from, until time.Time) []Duplicates {
	type sub struct{ topic, name string }
	ackedAt := map[sub]map[Message]time.Time{}
	for _, d := range h.Deliveries {
		s := sub{d.Topic, d.Subscription}
		if ackedAt[s] == nil {
			ackedAt[s] = map[Message]time.Time{}
		}
		if at, seen := ackedAt[s][d.Message]; !d.AckAt.IsZero() && d.AckAt.Before(from) && (!seen || d.AckAt.Before(at)) {
			ackedAt[s][d.Message] = d.AckAt
		}
	}
	var out []Duplicates
	for s, acked := range ackedAt {
		dup := Duplicates{Topic: s.topic, Subscription: s.name}
		for _, d := range h.Deliveries {
			at, ok := acked[d.Message]
			if d.Topic != s.topic || d.Subscription != s.name || !ok || d.At.Before(from) || (!until.IsZero() && !d.At.Before(until)) {
				continue
			}
			dup.Count++
			dup.Seconds = max(dup.Seconds, from.Sub(at).Seconds())
		}
		out = append(out, dup)
	}
	slices.SortFunc(out, func(a, b Duplicates) int {
		return strings.Compare(a.Topic+"\x00"+a.Subscription, b.Topic+"\x00"+b.Subscription)
	})
	return out
}

// redelivered counts the deliveries of messages whose ack a subscription
// had had confirmed before they arrived.
func redelivered(h History) int {
	type key struct {
		topic, sub string
		Message
	}
	acked := map[key]time.Time{}
	for _, d := range h.Deliveries {
		k := key{d.Topic, d.Subscription, d.Message}
		if at, ok := acked[k]; !d.AckAt.IsZero() && (!ok || d.AckAt.Before(at)) {
			acked[k] = d.AckAt
		}
	}
	n := 0
	for _, d := range h.Deliveries {
		if at, ok := acked[key{d.Topic, d.Subscription, d.Message}]; ok && at.Before(d.At) {
			n++
		}
	}
	return n
}

// order counts first deliveries out of send order, per key and per
// producer, in each subscription, leaving out the RPO's messages: a first
// delivery that is not above the stream's previous first delivery, as the
// e2e bed's checker counts them (e2e/checker.go), so that one message
// delivered early counts once, not with every message after it.
func order(h History, rpo map[topicMessage]bool, subType string) Order {
	o := Order{Judged: subType != "Shared"}
	type stream struct{ topic, sub, producer, key string }
	seen := map[stream]map[int64]bool{}
	lastKey, lastProducer := map[stream]int64{}, map[stream]int64{}
	for _, d := range h.Deliveries {
		if rpo[topicMessage{d.Topic, d.Message}] {
			continue
		}
		byProducer := stream{d.Topic, d.Subscription, d.Producer, ""}
		if seen[byProducer] == nil {
			seen[byProducer] = map[int64]bool{}
		}
		if seen[byProducer][d.Seq] {
			continue // a redelivery, not a first delivery
		}
		seen[byProducer][d.Seq] = true
		byKey := byProducer
		byKey.key = d.Key
		if last, ok := lastKey[byKey]; ok && d.Seq <= last {
			o.PerKey++
			if len(o.Examples) < maxOrderExamples {
				o.Examples = append(o.Examples, fmt.Sprintf("%s %s %s key %s after %d, at %s in %s",
					d.Topic, d.Subscription, d.Message, d.Key, last, d.At.UTC().Format("15:04:05.000"), d.Region))
			}
		}
		lastKey[byKey] = d.Seq
		if last, ok := lastProducer[byProducer]; ok && d.Seq <= last {
			o.PerProducer++
		}
		lastProducer[byProducer] = d.Seq
	}
	return o
}

// Check is one threshold weighed.
type Check struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Limit string `json:"limit"`
	Pass  bool   `json:"pass"`
}

// Verdict is the drill's outcome: it passes when every check does.
type Verdict struct {
	Pass   bool    `json:"pass"`
	Checks []Check `json:"checks"`
}

// Failed lists the checks that failed.
func (v Verdict) Failed() []Check {
	var out []Check
	for _, c := range v.Checks {
		if !c.Pass {
			out = append(out, c)
		}
	}
	return out
}

// Judge weighs f against th. Lost for good is always judged: it must be 0
// while the lost region's storage survives.
func Judge(f Figures, th Thresholds, subType string) Verdict {
	var v Verdict
	add := func(name, value, limit string, pass bool) {
		v.Checks = append(v.Checks, Check{Name: name, Value: value, Limit: limit, Pass: pass})
	}
	ms := func(m float64) string {
		return (time.Duration(m * float64(time.Millisecond))).Round(time.Millisecond).String()
	}
	add("lost for good", fmt.Sprint(f.LostForGood), "0", f.LostForGood == 0)
	add("rto (max over clients)", ms(f.RTO.MaxMillis)+unrecovered(f.RTO.Unrecovered), "--max-rto "+th.MaxRTO.String(),
		len(f.RTO.Unrecovered) == 0 && f.RTO.MaxMillis <= float64(th.MaxRTO.Milliseconds()))
	worst := 0.0
	for _, d := range f.Duplicates {
		worst = max(worst, d.Seconds)
	}
	add("duplicates (seconds of traffic, worst subscription)", fmt.Sprintf("%.3fs", worst),
		fmt.Sprintf("--max-duplicates-seconds %g", th.MaxDuplicatesSeconds), worst <= th.MaxDuplicatesSeconds)
	worstBack := 0.0
	for _, d := range f.FailBack.Duplicates {
		worstBack = max(worstBack, d.Seconds)
	}
	add("fail back duplicates (seconds of traffic, worst subscription)", fmt.Sprintf("%.3fs", worstBack),
		fmt.Sprintf("--max-duplicates-seconds %g", th.MaxDuplicatesSeconds), worstBack <= th.MaxDuplicatesSeconds)
	add("fail back (max over clients)", ms(f.FailBack.MaxMillis)+unrecovered(f.FailBack.NotHome), "--max-fail-back "+th.MaxFailBack.String(),
		len(f.FailBack.NotHome) == 0 && f.FailBack.MaxMillis <= float64(th.MaxFailBack.Milliseconds()))
	if subType != "Shared" {
		n := f.Order.PerKey
		if subType != "Key_Shared" {
			n = max(n, f.Order.PerProducer)
		}
		add("order (first deliveries out of order)", fmt.Sprint(n), fmt.Sprintf("--max-order-violations %d", th.MaxOrderViolations), n <= th.MaxOrderViolations)
	}
	if th.MaxSendErrors >= 0 {
		add("send errors", fmt.Sprint(f.SendErrors), fmt.Sprintf("--max-send-errors %d", th.MaxSendErrors), f.SendErrors <= th.MaxSendErrors)
	}
	v.Pass = len(v.Failed()) == 0
	return v
}

func unrecovered(clients []string) string {
	if len(clients) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d clients never: %v)", len(clients), clients)
}
