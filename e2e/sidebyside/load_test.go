//go:build e2e

package sidebyside

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// This file holds what the one-region and catch-up suites share: the
// server processes they start, the two systems behind one interface, the
// open-loop load generator and its latency records.

// addSuite appends a suite to TestSideBySide's list; each suite's file
// registers itself from its init.
func addSuite(name string, run func(t *testing.T, e *env) section) {
	suites = append(suites, struct {
		name string
		run  func(t *testing.T, e *env) section
	}{name, run})
}

// messageSize is every benchmark message's payload: 1 KiB.
const messageSize = 1024

// server is a server process of either system, started and stopped by
// PID. Its output goes to a log in the test's temporary folder.
type server struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when the process has ended
}

// startServer runs bin with args, pinned to the env's cores, and waits
// until its log holds a line containing ready, which it returns. The
// process is SIGKILLed (by PID) when the test ends, if still running.
func startServer(t *testing.T, e *env, name, ready string, bin string, args ...string) (*server, string) {
	t.Helper()
	s := &server{name: name, logPath: filepath.Join(t.TempDir(), name+".log"), exited: make(chan struct{})}
	logf, err := os.Create(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// A test process that dies without its cleanups takes its servers
	// with it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	// The waiter ends with the process; stop (registered below) ends the
	// process.
	go func() {
		s.cmd.Wait()
		logf.Close()
		close(s.exited)
	}()
	t.Cleanup(s.stop)
	e.pin(t, s.pid())
	line, err := s.waitLog(t.Context(), ready, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return s, line
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop SIGKILLs the process by its PID and waits until it is gone.
func (s *server) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	if err := syscall.Kill(s.pid(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return
	}
	<-s.exited
}

// waitLog polls the log until a line contains want, the process exits,
// or timeout passes.
func (s *server) waitLog(ctx context.Context, want string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(s.logPath)
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.Contains(line, want) {
				return line, nil
			}
		}
		select {
		case <-s.exited:
			return "", fmt.Errorf("%s exited before logging %q; log:\n%s", s.name, want, tail(b, 3000))
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s did not log %q in %v; log:\n%s", s.name, want, timeout, tail(b, 3000))
		}
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// system is one side of a comparison, behind what a benchmark needs of
// it. Every stream is created empty by createStream and holds what is
// published to it until deleteStream, whether or not it has been read.
type system interface {
	// label names the system and its settings in tables and charts.
	label() string
	createStream(ctx context.Context, name string) error
	// producer publishes to the stream; onAck is called, from any
	// goroutine, with each payload once the system has stored it.
	producer(ctx context.Context, name string, onAck func(payload []byte)) (producer, error)
	// consume delivers the stream from its first message to onReceive,
	// on one goroutine, acknowledging progress every ackEvery messages,
	// until the returned stop is called.
	consume(ctx context.Context, name string, onReceive func(payload []byte)) (stop func(), err error)
	deleteStream(ctx context.Context, name string) error
	// stop closes the clients and kills the servers (by PID); the
	// test's end does it too.
	stop()
}

// producer is a system's asynchronous publisher. publish blocks only
// while the client's bounded queue of unacknowledged messages
// (maxPending) is full; a client that can bound that wait returns
// errBehind after maxLag.
type producer interface {
	publish(payload []byte) error
	close()
}

// Bounds both clients share, so that neither gets a deeper queue.
const (
	// maxPending is the publisher's bound on unacknowledged messages:
	// 100 ms of the highest fixed rate. A system slower than that fills
	// it, and the open-loop generator falls behind.
	maxPending = 5_000
	// receiveQueue is how many messages a consumer may hold unread.
	receiveQueue = 10_000
	// ackEvery is how often a consumer acknowledges (cumulatively).
	ackEvery = 500
)

// stamp writes due (when the message was due to be sent) into the first
// bytes of a new payload.
func stamp(due time.Time) []byte {
	p := make([]byte, messageSize)
	binary.LittleEndian.PutUint64(p, uint64(due.UnixNano()))
	return p
}

// dueOf reads a payload's stamp.
func dueOf(payload []byte) time.Time {
	if len(payload) < 8 {
		return time.Time{}
	}
	return time.Unix(0, int64(binary.LittleEndian.Uint64(payload)))
}

// latencies records the latency of each message due at or after from,
// counted from its due time: an open-loop measurement, so that a stall
// delays in the figures every message due behind it.
type latencies struct {
	from time.Time

	mu    sync.Mutex
	hist  *hdrhistogram.Histogram // 1 µs to 10 min, 3 significant digits
	count int
	last  time.Time // the latest record's time
	// all and lastAll count every message, from before from too.
	all     int
	lastAll time.Time
}

func newLatencies(from time.Time) *latencies {
	return &latencies{from: from, hist: hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)}
}

// record notes, at now, the message whose payload is p.
func (l *latencies) record(p []byte, now time.Time) {
	due := dueOf(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all++
	l.lastAll = now
	if due.Before(l.from) {
		return
	}
	l.hist.RecordValue(max(1, now.Sub(due).Microseconds()))
	l.count++
	l.last = now
}

// snapshot is the count so far, and the time of the latest record.
func (l *latencies) snapshot() (int, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count, l.last
}

// total is the count of every message recorded, and the time of the
// latest.
func (l *latencies) total() (int, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all, l.lastAll
}

// quantiles are the latencies' p50, p99 and p99.9.
type quantiles struct{ p50, p99, p999 time.Duration }

func (l *latencies) quantiles() quantiles {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := func(p float64) time.Duration { return time.Duration(l.hist.ValueAtQuantile(p)) * time.Microsecond }
	return quantiles{q(50), q(99), q(99.9)}
}

// String is the three in milliseconds; "none" when nothing was
// recorded (a latency is never below 1 µs).
func (q quantiles) String() string {
	if q.p50 == 0 {
		return "none"
	}
	return fmt.Sprintf("%s / %s / %s", ms(q.p50), ms(q.p99), ms(q.p999))
}

// ms formats d in milliseconds for a table.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// maxLag is how far behind its schedule the open-loop generator may
// fall (a publish blocked on a full client queue) before the run stops
// as not sustained.
const maxLag = 3 * time.Second

// errBehind is a publish that could not be queued within maxLag.
var errBehind = errors.New("sidebyside: the client's queue stayed full")

// drive publishes through p the messages due from start until end: open loop at rate
// msg/s, each message stamped with the time it was due (message i at
// start + i/rate) and sent as soon as it is due. A rate of +Inf sends
// as fast as p takes them (closed loop, bounded by maxPending), each
// stamped with its send time. It returns how many of the messages it
// sent were stamped at or after from, and whether it stopped early
// because it fell more than maxLag behind (open loop only).
func drive(ctx context.Context, p producer, rate float64, start, from, end time.Time) (inWindow int, behind bool, err error) {
	closed := math.IsInf(rate, 1)
	interval := time.Duration(0)
	if !closed {
		interval = time.Duration(float64(time.Second) / rate)
	}
	sent := 0
	for ctx.Err() == nil {
		now := time.Now()
		due := now
		if !closed {
			due = start.Add(time.Duration(sent) * interval)
		}
		// The run is the messages due in [start, end): a late loop still
		// sends those due before end.
		if !due.Before(end) {
			return inWindow, false, nil
		}
		if !closed {
			if d := due.Sub(now); d > 0 {
				// Pacing the offered load: everything due by the wake-up
				// goes out then, each stamped with its own due time.
				time.Sleep(d)
				continue
			}
			if now.Sub(due) > maxLag {
				return inWindow, true, nil
			}
		}
		switch err := p.publish(stamp(due)); {
		case errors.Is(err, errBehind) && !closed:
			return inWindow, true, nil
		case errors.Is(err, errBehind):
			continue // closed loop: the queue is full, as it should be
		case err != nil:
			return inWindow, false, err
		}
		sent++
		if !due.Before(from) {
			inWindow++
		}
	}
	return inWindow, false, ctx.Err()
}

// rateResult is one system's run at one offered rate.
type rateResult struct {
	rate float64 // offered msg/s; +Inf for the closed-loop probe
	// sent is how many messages were due (and sent) in the measured
	// window; acked and received how many of those were stored and
	// delivered before the run gave up waiting.
	sent, acked, received int
	// reached is the stored rate: acked over the time from the window's
	// start to the last ack (the delivered rate likewise). For a run
	// that is not sustained, it counts every message stored since the
	// run's start instead, warm-up included, over the time to the last.
	reached, delivered float64
	// behind is a run the generator stopped because it fell more than
	// maxLag behind its schedule.
	behind bool
	// late is how long after the window's end its last message was
	// stored or delivered, whichever came later.
	late              time.Duration
	sustained         bool
	publish, endToEnd quantiles
}

// sustainedShare is how close to the offered rate a run must store and
// deliver for the rate to count as sustained: every message of the
// window acknowledged and delivered, at no less than 95% of the offered
// rate over the time from the window's start to the last of them. A
// window of 10 s thus allows 0.53 s after its end for the last message,
// longer than this disk's occasional 300-500 ms stalls, and shorter than
// a queue that grows for the whole window takes to drain.
const sustainedShare = 0.95

// runRate publishes to a fresh stream at rate for warm and then window,
// consuming it at the same time, and measures the messages due in the
// window. It waits up to drainWait after the window for the last of
// them.
func runRate(t *testing.T, sys system, name string, rate float64, warm, window time.Duration) rateResult {
	t.Helper()
	ctx := t.Context()
	if err := sys.createStream(ctx, name); err != nil {
		t.Fatalf("%s: create %s: %v", sys.label(), name, err)
	}
	defer func() {
		if err := sys.deleteStream(context.WithoutCancel(ctx), name); err != nil {
			t.Logf("%s: delete %s: %v", sys.label(), name, err)
		}
	}()
	start := time.Now().Add(100 * time.Millisecond)
	from := start.Add(warm)
	end := from.Add(window)
	pub, e2e := newLatencies(from), newLatencies(from)
	stop, err := sys.consume(ctx, name, func(p []byte) { e2e.record(p, time.Now()) })
	if err != nil {
		t.Fatalf("%s: consume %s: %v", sys.label(), name, err)
	}
	defer stop()
	p, err := sys.producer(ctx, name, func(b []byte) { pub.record(b, time.Now()) })
	if err != nil {
		t.Fatalf("%s: producer %s: %v", sys.label(), name, err)
	}
	defer p.close()
	inWindow, behind, err := drive(ctx, p, rate, start, from, end)
	if err != nil {
		t.Fatalf("%s at %s: publish: %v", sys.label(), rateName(rate), err)
	}
	// Long enough for a sustained run's last message (see
	// sustainedShare), and for a closed-loop run's queue to empty.
	drainWait := 5 * time.Second
	if math.IsInf(rate, 1) {
		drainWait = 30 * time.Second
	}
	deadline := time.Now().Add(drainWait)
	var acked, received int
	var lastAck, lastReceive time.Time
	for {
		acked, lastAck = pub.snapshot()
		received, lastReceive = e2e.snapshot()
		if (acked >= inWindow && received >= inWindow) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling the counts, bounded by deadline
	}
	r := rateResult{rate: rate, sent: inWindow, acked: acked, received: received, behind: behind,
		publish: pub.quantiles(), endToEnd: e2e.quantiles()}
	if lastAck.After(from) {
		r.reached = float64(acked) / lastAck.Sub(from).Seconds()
	}
	if lastReceive.After(from) {
		r.delivered = float64(received) / lastReceive.Sub(from).Seconds()
	}
	r.late = max(lastAck.Sub(end), lastReceive.Sub(end))
	r.sustained = !math.IsInf(rate, 1) && !behind && acked >= inWindow && received >= inWindow &&
		r.reached >= sustainedShare*rate && r.delivered >= sustainedShare*rate
	if !r.sustained {
		r.reached, r.delivered = sinceStart(pub, start), sinceStart(e2e, start)
	}
	t.Logf("%s at %s: sent %d, acked %d (%.0f msg/s), received %d (%.0f msg/s), sustained %v; publish %v ms, end-to-end %v ms",
		sys.label(), rateName(rate), r.sent, acked, r.reached, received, r.delivered, r.sustained, r.publish, r.endToEnd)
	return r
}

// sinceStart is l's rate over every message it recorded since start.
func sinceStart(l *latencies, start time.Time) float64 {
	n, last := l.total()
	if n == 0 || !last.After(start) {
		return 0
	}
	return float64(n) / last.Sub(start).Seconds()
}

// rateName is a rate as the tables state it.
func rateName(rate float64) string {
	if math.IsInf(rate, 1) {
		return "closed loop"
	}
	return fmt.Sprintf("%.0f msg/s", rate)
}
