//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/global"
)

// TestPlannedSwitchUnderLoad is issue 30's planned switch: three regions
// (20 ms links), namespace ps/ns replicated to all three and active in r1,
// 1,000 msg/s in all from keyed producers on two topics, and two Shared
// consumers of a replicated subscription per topic that ack every message
// (out of order across the pair), all on one service URL listing every
// region's broker. The operator switches the active region to r2, and
// later back to r1. Each switch must move every client with no send
// error, no message lost, and no duplicate: no message delivered again
// after a switch that was acked before it (a message the consumer held
// unacked at the switch comes again, which is not a duplicate). It prints the
// pause each client saw: a producer's longest publish latency and a
// consumer's longest gap between deliveries, around each switch.
func TestPlannedSwitchUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	tr := startThreeRegions(ctx, t, 0, nil, "ps", global.Policies{ReplicationClusters: []string{"r1", "r2", "r3"}, ActiveRegion: "r1"})
	gs, regionOf := tr.gs, tr.regionOf
	// regionOfID names the region whose ledger a message id (idString) is in.
	regionOfID := func(id string) string {
		l, err := strconv.ParseInt(strings.SplitN(id, ":", 2)[0], 10, 64)
		if err != nil {
			return "?"
		}
		return regionOf[ledger.RegionNumberOf(l)]
	}

	client := NewClient(t, tr.serviceURL)
	rec := tr.bed.Recorder()
	topics := []string{"persistent://ps/ns/orders", "persistent://ps/ns/payments"}
	var consumers []*Consumer
	for _, topic := range topics {
		waitProducer(ctx, t, client, topic)
		for i := range 2 {
			c, err := StartConsumer(ctx, client, rec, ConsumerConfig{Region: "any", Topic: topic, Subscription: "s", Type: Shared,
				Name: fmt.Sprintf("%s-c%d", topic[len("persistent://ps/ns/"):], i), Replicated: true, GroupedAcks: true})
			if err != nil {
				t.Fatal(err)
			}
			consumers = append(consumers, c)
		}
	}
	var producers []*Producer
	for _, topic := range topics {
		for i := range 2 {
			p, err := StartProducer(ctx, client, rec, ProducerConfig{Region: "any", Topic: topic, Keys: 16, PayloadSize: 256,
				Name: fmt.Sprintf("%s-p%d", topic[len("persistent://ps/ns/"):], i), Interval: 4 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			producers = append(producers, p)
		}
	}

	// servedFrom reports whether every consumer has had a delivery from
	// region's ledgers since then, and every producer a receipt.
	var unserved []string // the clients the last servedFrom found not served, for the log
	defer func() {
		if t.Failed() && len(unserved) > 0 {
			t.Logf("not served: %v", unserved)
		}
	}()
	servedFrom := func(region string, since time.Time) bool {
		h := rec.History()
		got := map[string]bool{}
		for _, d := range h.Deliveries {
			if d.At.After(since) && regionOfID(d.MessageID) == region {
				got["consumer "+d.Consumer] = true
			}
		}
		for _, s := range h.Sends {
			if s.Acknowledged() && s.ReceiptAt.After(since) && regionOfID(s.MessageID) == region {
				got["producer "+s.Message.Producer] = true
			}
		}
		unserved = unserved[:0]
		for _, topic := range topics {
			short := topic[len("persistent://ps/ns/"):]
			for i := range 2 {
				for _, who := range []string{fmt.Sprintf("consumer %s-c%d", short, i), fmt.Sprintf("producer %s-p%d", short, i)} {
					if !got[who] {
						unserved = append(unserved, who)
					}
				}
			}
		}
		return len(unserved) == 0
	}
	waitUntil(ctx, t, 2*time.Minute, "every client served by r1", func() bool { return servedFrom("r1", time.Time{}) })
	sleep(ctx, t, 10*time.Second)

	type switchAt struct {
		to string
		at time.Time
	}
	var switches []switchAt
	for _, to := range []string{"r2", "r1"} {
		at := time.Now()
		if _, _, err := gs.UpdateNamespace(ctx, "ps", "ns", func(p *global.Policies) error {
			p.ActiveRegion = to
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		switches = append(switches, switchAt{to, at})
		took := waitUntil(ctx, t, 2*time.Minute, "every client served by "+to, func() bool { return servedFrom(to, at) })
		t.Logf("switch to %s: every client served there within %v", to, took.Round(time.Millisecond))
		sleep(ctx, t, 10*time.Second)
	}

	for _, p := range producers {
		if err := p.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var sendErrors []string
	for _, s := range rec.History().Sends {
		if s.Err != "" {
			sendErrors = append(sendErrors, fmt.Sprintf("%v: %s", s.Message, s.Err))
		}
	}
	acked := awaitEveryAcknowledged(ctx, t, rec.History().Sends, func() []Message {
		var got []Message
		for _, d := range rec.History().Deliveries {
			if d.Acked {
				got = append(got, d.Message)
			}
		}
		return got
	})
	for _, c := range consumers {
		c.Stop()
	}
	h := rec.History()

	// Duplicates: a delivery, after a switch, of a message acked before
	// that switch was made. Such an ack reached the old region: the client
	// sends it within its grouping time (100 ms), and the old region waits
	// longer than that (migrationAckGrace) after it sees the switch, before
	// it lets the consumer go. Any other delivery again (of a message held
	// unacked, or acked as the switch went on) is allowed, and counted
	// apart.
	ackedAt, seen := map[Message]time.Time{}, map[Message]bool{}
	var duplicates, redelivered []Delivery
	for _, d := range h.Deliveries {
		if at, ok := ackedAt[d.Message]; ok && slices.ContainsFunc(switches, func(sw switchAt) bool { return at.Before(sw.at) && sw.at.Before(d.At) }) {
			duplicates = append(duplicates, d)
		} else if seen[d.Message] {
			redelivered = append(redelivered, d)
		}
		seen[d.Message] = true
		if _, ok := ackedAt[d.Message]; !ok && d.Acked {
			ackedAt[d.Message] = d.AckAt
		}
	}

	// The pause around each switch, per client: a producer's longest
	// publish latency and a consumer's longest gap between deliveries, in
	// the 10 s that follow it.
	for _, sw := range switches {
		window := func(at time.Time) bool {
			return !at.Before(sw.at.Add(-time.Second)) && at.Before(sw.at.Add(10*time.Second))
		}
		pauses := map[string]time.Duration{}
		for _, s := range h.Sends {
			if s.Acknowledged() && window(s.SentAt) {
				pauses["producer "+s.Message.Producer] = max(pauses["producer "+s.Message.Producer], s.ReceiptAt.Sub(s.SentAt))
			}
		}
		last := map[string]time.Time{}
		for _, d := range h.Deliveries {
			if !window(d.At) {
				continue
			}
			if prev, ok := last[d.Consumer]; ok {
				pauses["consumer "+d.Consumer] = max(pauses["consumer "+d.Consumer], d.At.Sub(prev))
			}
			last[d.Consumer] = d.At
		}
		var producerPauses, consumerPauses []time.Duration
		for who, p := range pauses {
			if strings.HasPrefix(who, "producer") {
				producerPauses = append(producerPauses, p)
			} else {
				consumerPauses = append(consumerPauses, p)
			}
		}
		slices.Sort(producerPauses)
		slices.Sort(consumerPauses)
		t.Logf("planned switch to %s: producers' longest publish latency median %v max %v; consumers' longest gap median %v max %v",
			sw.to, producerPauses[len(producerPauses)/2].Round(time.Millisecond), producerPauses[len(producerPauses)-1].Round(time.Millisecond),
			consumerPauses[len(consumerPauses)/2].Round(time.Millisecond), consumerPauses[len(consumerPauses)-1].Round(time.Millisecond))
	}
	t.Logf("planned switches under load, 3 regions, 20 ms links, 1,000 msg/s: %d acknowledged sends, %d send errors, 0 lost, %d duplicates, %d deliveries again of messages acked as the switch went on or not at all",
		len(acked), len(sendErrors), len(duplicates), len(redelivered))
	if len(sendErrors) > 0 {
		t.Errorf("%d send errors, the first: %s", len(sendErrors), sendErrors[0])
	}
	if len(duplicates) > 0 {
		for _, d := range duplicates[:min(10, len(duplicates))] {
			t.Logf("duplicate: %v delivered to %s at %s from %s (%s), acked at %s", d.Message, d.Consumer,
				d.At.Format("15:04:05.000"), regionOfID(d.MessageID), d.MessageID, ackedAt[d.Message].Format("15:04:05.000"))
		}
		t.Errorf("%d duplicates: deliveries after a switch of messages acked before it", len(duplicates))
	}
}
