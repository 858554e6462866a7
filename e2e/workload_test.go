//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestPacer holds the pacer to the clock: a send is let through only once
// it falls due, and after a stall every send that fell due meanwhile goes
// at once, and no more.
func TestPacer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	clock := clockwork.NewFakeClock()
	p := newPacer(clock, 100*time.Microsecond)
	defer p.stop()
	if !p.wait(ctx) {
		t.Fatal("the first send, due at the start, was not let through")
	}
	passed := make(chan bool)
	go func() { passed <- p.wait(ctx) }()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-passed:
		t.Fatal("the second send went before it fell due")
	default:
	}
	clock.Advance(100 * time.Microsecond)
	if !<-passed {
		t.Fatal("the second send was refused when it fell due")
	}
	// A stall of a millisecond: the ten sends due at 200..1100 µs since
	// the start go at once.
	clock.Advance(time.Millisecond)
	for i := range 10 {
		go func() { passed <- p.wait(ctx) }()
		select {
		case ok := <-passed:
			if !ok {
				t.Fatalf("overdue send %d was refused", i)
			}
		case <-time.After(10 * time.Second): // only bounds a failure: the clock stands still
			t.Fatalf("overdue send %d waited for the clock", i)
		}
	}
	ended, end := context.WithCancel(ctx)
	go func() { passed <- p.wait(ended) }()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	end()
	if <-passed {
		t.Fatal("a send not yet due was let through after its ctx ended")
	}
}
