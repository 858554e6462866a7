//go:build e2e

package sidebyside

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/e2e/plot"
)

func init() { addSuite("catch-up", runCatchUp) }

// The catch-up suite's shape: a backlog of backlogMessages (1 KiB each,
// 2 GB) is stored before the consumer starts; then production goes on
// at liveRate while the consumer reads from the first message.
const (
	backlogMessages = 2_000_000
	liveRate        = 5_000
	// caughtUpWithin is how fresh a live message must be on receipt for
	// the consumer to count as caught up.
	caughtUpWithin = time.Second
	// catchUpLimit bounds a drain; past it the system did not catch up.
	catchUpLimit = 5 * time.Minute
)

// catchUp is one system's figures.
type catchUp struct {
	label string
	// filled is the closed-loop rate the backlog was stored at.
	filled float64
	// backlogRead is when the last message of the backlog arrived, and
	// caughtUp when the first live message no older than caughtUpWithin
	// did, both from the consumer's start; zero if it did not.
	backlogRead, caughtUp time.Duration
	// received is how many messages the consumer had when caught up.
	received int
	// live is the live production's publish latency during the drain;
	// liveProblem says why it stopped early, if it did.
	live        quantiles
	liveProblem string
	// progress is the consumer's receipts, in msg/s, per second of the
	// drain.
	progress []plot.Point
}

// backlogRate is how fast the consumer read the backlog; 0 if it did
// not finish.
func (c catchUp) backlogRate() float64 {
	if c.backlogRead <= 0 {
		return 0
	}
	return backlogMessages / c.backlogRead.Seconds()
}

// drainRate is the consumer's rate over the catch-up: backlog and live
// messages read per second until caught up.
func (c catchUp) drainRate() float64 {
	if c.caughtUp <= 0 {
		return 0
	}
	return float64(c.received) / c.caughtUp.Seconds()
}

func runCatchUp(t *testing.T, e *env) section {
	load := machineLoad()
	e.pin(t, os.Getpid())
	var results []catchUp
	// One system at a time: a drain is the whole machine's work.
	for _, start := range []func() system{
		func() system { return startMeridianOne(t, e) },
		func() system { return startNATSOne(t, e, false) },
	} {
		sys := start()
		results = append(results, drain(t, sys))
		sys.stop()
	}
	return mustSection("catch-up", e, catchUpMarkdown(results, load, machineLoad()), catchUpChart(results))
}

// drain fills a stream with the backlog, then consumes it from the
// start while publishing at liveRate, until the consumer is caught up.
func drain(t *testing.T, sys system) catchUp {
	t.Helper()
	ctx := t.Context()
	const name = "catch-up"
	if err := sys.createStream(ctx, name); err != nil {
		t.Fatalf("%s: create: %v", sys.label(), err)
	}
	defer func() {
		if err := sys.deleteStream(context.WithoutCancel(ctx), name); err != nil {
			t.Logf("%s: delete: %v", sys.label(), err)
		}
	}()
	res := catchUp{label: sys.label()}

	// The backlog, as fast as the client's bounded queue allows.
	fill := newLatencies(time.Time{})
	p, err := sys.producer(ctx, name, func(b []byte) { fill.record(b, time.Now()) })
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for n := 0; n < backlogMessages; {
		switch err := p.publish(stamp(time.Now())); {
		case errors.Is(err, errBehind):
			continue // the queue is full: try again
		case err != nil:
			t.Fatalf("%s: backlog: %v", sys.label(), err)
		}
		n++
	}
	waitCount(t, fill, backlogMessages, 5*time.Minute, sys.label()+": backlog acks")
	res.filled = backlogMessages / time.Since(began).Seconds()
	p.close()
	t.Logf("%s: %d messages of backlog stored at %.0f msg/s", sys.label(), backlogMessages, res.filled)

	// The drain: the consumer and the live producer start together.
	var (
		mu       sync.Mutex
		received int
		perSec   []int
		caught   = make(chan struct{})
		once     sync.Once
		drained  catchUp // the consumer's figures, under mu
	)
	start := time.Now()
	stopConsumer, err := sys.consume(ctx, name, func(b []byte) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		received++
		sec := int(now.Sub(start) / time.Second)
		for len(perSec) <= sec {
			perSec = append(perSec, 0)
		}
		perSec[sec]++
		if received == backlogMessages {
			drained.backlogRead = now.Sub(start)
		}
		if received > backlogMessages && now.Sub(dueOf(b)) <= caughtUpWithin {
			once.Do(func() {
				drained.caughtUp, drained.received = now.Sub(start), received
				close(caught)
			})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	live := newLatencies(start)
	lp, err := sys.producer(ctx, name, func(b []byte) { live.record(b, time.Now()) })
	if err != nil {
		t.Fatal(err)
	}
	liveCtx, stopLive := context.WithCancel(ctx)
	produced := make(chan error, 1)
	// The live producer: it ends when stopLive is called or catchUpLimit
	// passes, or when it falls behind its schedule.
	go func() {
		_, behind, err := drive(liveCtx, lp, liveRate, start, start, start.Add(catchUpLimit))
		if behind {
			err = fmt.Errorf("fell more than %v behind %d msg/s", maxLag, liveRate)
		}
		produced <- err
	}()
	var liveErr error
	liveEnded := false
	select {
	case <-caught:
	case liveErr = <-produced:
		// Production stopped early: no live message will come to catch
		// up with.
		liveEnded = true
	case <-time.After(catchUpLimit):
		t.Logf("%s: not caught up after %v", sys.label(), catchUpLimit)
	case <-ctx.Done():
	}
	stopLive()
	if !liveEnded {
		liveErr = <-produced
	}
	if liveErr != nil && !errors.Is(liveErr, context.Canceled) {
		res.liveProblem = liveErr.Error()
		t.Logf("%s: live production: %v", sys.label(), liveErr)
	}
	lp.close()
	stopConsumer()
	res.live = live.quantiles()
	mu.Lock()
	res.backlogRead, res.caughtUp, res.received = drained.backlogRead, drained.caughtUp, drained.received
	for i, n := range perSec {
		res.progress = append(res.progress, plot.Point{X: float64(i), Y: float64(n)})
	}
	mu.Unlock()
	t.Logf("%s: backlog read in %v, caught up in %v after %d messages (%.0f msg/s); live publish %v ms",
		sys.label(), res.backlogRead, res.caughtUp, res.received, res.drainRate(), res.live)
	return res
}

// waitCount polls l until it holds n records, or fails the test after
// timeout.
func waitCount(t *testing.T, l *latencies, n int, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, _ := l.snapshot()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d after %v", what, got, n, timeout)
		}
		time.Sleep(10 * time.Millisecond) // polling the count, bounded by deadline
	}
}

func catchUpMarkdown(results []catchUp, loadBefore, loadAfter string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "```sh\ncd e2e/sidebyside && go test -mod=mod -tags e2e -count=1 -timeout 60m -run 'TestSideBySide/catch-up' -v .\n```\n\n")
	fmt.Fprintf(&b, "The same servers and clients as the one-region suite (Meridian standalone with fsync before every "+
		"acknowledgement; JetStream R1 file storage with its default sync), one system at a time. A backlog of "+
		"%d messages of 1 KiB (2 GB) is published as fast as the client allows and stored; then a consumer "+
		"reads the stream from its first message while a producer goes on publishing at %d msg/s. The consumer "+
		"is **caught up** at the first live message it receives no more than %v after that message was due. "+
		"The drain rate is every message received (backlog and live) over the time to catch up. Load average "+
		"%s at the start, %s at the end (other sessions' work shared the machine).\n\n",
		backlogMessages, liveRate, caughtUpWithin, loadBefore, loadAfter)
	fmt.Fprintf(&b, "| system | backlog stored at | backlog read in (rate) | caught up in | drain rate | live publish p50 / p99 / p99.9 ms during the drain |\n|---|---|---|---|---|---|\n")
	for _, r := range results {
		caught := "**not caught up**"
		if r.caughtUp > 0 {
			caught = r.caughtUp.Round(100 * time.Millisecond).String()
		}
		live := r.live.String()
		if r.liveProblem != "" {
			live += " (live production " + r.liveProblem + ")"
		}
		fmt.Fprintf(&b, "| %s | %.0f msg/s | %v (%.0f msg/s) | %s | %.0f msg/s | %s |\n", r.label, r.filled,
			r.backlogRead.Round(100*time.Millisecond), r.backlogRate(), caught, r.drainRate(), live)
	}
	b.WriteString("\n![messages received per second during the catch-up](img/sidebyside-catch-up.png)\n")
	return b.String()
}

func catchUpChart(results []catchUp) chart {
	c := chart{File: "sidebyside-catch-up.png", Chart: plot.Chart{Title: fmt.Sprintf("Catch-up: 2 GB backlog, production at %d msg/s", liveRate),
		XLabel: "seconds since the consumer started", YLabel: "messages received per second"}}
	for _, r := range results {
		c.Series = append(c.Series, plot.Series{Name: r.label, Points: r.progress})
	}
	return c
}
