package drill

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// The live display: the phase, rates per region over the last second, and
// counts so far. On a terminal it is one line rewritten in place every
// second; elsewhere (a pipe, cron, CI) one plain line every five seconds
// and one per phase.

// say prints one line (ending the progress line on a terminal first).
func (d *drill) say(format string, args ...any) {
	if d.env.Out == nil {
		return
	}
	prefix := ""
	if d.env.Terminal {
		prefix = "\r\033[K"
	}
	fmt.Fprintf(d.env.Out, prefix+format+"\n", args...)
}

// phase ends the current phase and starts name; planned is its expected
// length, for the display (0: as long as it takes).
func (d *drill) phase(name string, planned time.Duration) {
	now := time.Now()
	d.closePhaseAt(now)
	d.tl.Phases = append(d.tl.Phases, Phase{Name: name, Start: now})
	d.mu.Lock()
	d.mu.phase = name
	d.mu.Unlock()
	if planned > 0 {
		d.say("%s: %s (%v)", now.UTC().Format("15:04:05"), name, planned)
	} else {
		d.say("%s: %s", now.UTC().Format("15:04:05"), name)
	}
}

func (d *drill) closePhase() { d.closePhaseAt(time.Now()) }

func (d *drill) closePhaseAt(t time.Time) {
	if n := len(d.tl.Phases); n > 0 && d.tl.Phases[n-1].End.IsZero() {
		d.tl.Phases[n-1].End = t
	}
}

// startProgress shows progress until the returned function is called.
func (d *drill) startProgress(wl *Workload) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		every := 5 * time.Second
		if d.env.Terminal {
			every = time.Second
		}
		tick := time.NewTicker(every)
		defer tick.Stop()
		last := d.rec.Counts()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			now := d.rec.Counts()
			d.mu.Lock()
			phase := d.mu.phase
			d.mu.Unlock()
			line := fmt.Sprintf("%-9s %5.0fs  sent/s %s  delivered/s %s  sent %d delivered %d errors %d",
				phase, time.Since(d.tl.Start).Seconds(), perSecond(last.Receipts, now.Receipts, every),
				perSecond(last.Deliveries, now.Deliveries, every), sum(now.Receipts), sum(now.Deliveries), now.SendErrors)
			last = now
			if d.env.Out == nil {
				continue
			}
			if d.env.Terminal {
				fmt.Fprintf(d.env.Out, "\r\033[K%s", line)
			} else {
				fmt.Fprintln(d.env.Out, line)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		if d.env.Terminal && d.env.Out != nil {
			fmt.Fprintln(d.env.Out)
		}
	}
}

func perSecond(before, after map[string]int, over time.Duration) string {
	regions := slices.Sorted(maps.Keys(after))
	var parts []string
	for _, r := range regions {
		parts = append(parts, fmt.Sprintf("%s %.0f", r, float64(after[r]-before[r])/over.Seconds()))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
