//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestProducerRate runs one workload producer per asked rate against a
// one-broker bed, and reports the rate asked, the rate of sends made and
// the rate acknowledged over the same window; every send must have its
// receipt. The figures are the evidence of ProducerConfig.Interval's
// pacing: before it, a ticker-paced producer asked for 5k and 10k msg/s
// sent about 1.2k and 1.4k on this machine.
func TestProducerRate(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	b := startOneBroker(ctx, t, oneBroker{Tenant: "rate", LocalClients: true})
	c := NewClient(t, b.ServiceURL())
	waitProducer(ctx, t, c, "persistent://rate/ns/probe")
	const window = 5 * time.Second
	for _, rate := range []int{1000, 5000, 10000} {
		rec := &Recorder{}
		topic := fmt.Sprintf("persistent://rate/ns/rate-%d", rate)
		p, err := StartProducer(ctx, c, rec, ProducerConfig{Region: "r1", Topic: topic, Name: fmt.Sprint("rate-", rate),
			Interval: time.Second / time.Duration(rate), PayloadSize: msgSize})
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		sleep(ctx, t, window)
		ran := time.Since(began)
		if err := p.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		sends, acked := 0, 0
		for _, s := range rec.History().Sends {
			if s.SentAt.Sub(began) < ran {
				sends++
				if s.Acknowledged() {
					acked++
				}
			}
		}
		if acked < sends {
			t.Errorf("%d msg/s: %d of %d sends have no receipt", rate, sends-acked, sends)
		}
		t.Logf("%d msg/s asked: %.0f msg/s sent, %.0f msg/s acked over %v", rate,
			float64(sends)/ran.Seconds(), float64(acked)/ran.Seconds(), ran.Round(time.Millisecond))
	}
}
