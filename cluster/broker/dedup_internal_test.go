package broker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/testkit"
)

// testAppend is an append whose outcome the test decides (finishOnce).
type testAppend struct {
	once sync.Once
	done chan struct{}
	pos  mledger.Position
	err  error
}

func newTestAppend() *testAppend { return &testAppend{done: make(chan struct{})} }

func (a *testAppend) Done() <-chan struct{} { return a.done }

func (a *testAppend) Result() (mledger.Position, error) {
	<-a.done
	return a.pos, a.err
}

// finishOnce completes the append with its outcome, the first time it is
// called.
func (a *testAppend) finishOnce(pos mledger.Position, err error) {
	a.once.Do(func() {
		a.pos, a.err = pos, err
		close(a.done)
	})
}

// TestDedupStopWhileQueueFull: a topic's close stops the deduplication
// recorder within its deadline even while a SEND waits, under the topic's
// append lock, for room in the recorder's queue (the store is slow to
// confirm), and that SEND then goes on: it is dropped, not left blocked.
func TestDedupStopWhileQueueFull(t *testing.T) {
	d := newDedup(1000, clockwork.NewRealClock())
	d.startRecording(1)
	stuck := newTestAppend()
	defer func() {
		stuck.finishOnce(mledger.Position{}, errors.New("failed")) // the store answers at last: the recorder ends
		<-d.recorderDone
	}()
	d.queueAppend("p", 1, stuck) // taken by the recorder, which waits on it
	testkit.WaitFor(t, "the recorder to take the first append", func() bool { return len(d.appends) == 0 })
	d.queueAppend("p", 2, stuck) // fills the queue
	blocked := make(chan struct{})
	go func() {
		defer close(blocked)
		d.queueAppend("p", 3, stuck) // waits for room, holding the queue's lock
	}()
	testkit.WaitFor(t, "the third append to wait for room", func() bool {
		if d.queue.TryLock() {
			d.queue.Unlock()
			return false
		}
		return true
	})

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- d.stopRecording(ctx) }()
	select {
	case err := <-stopped:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("stopRecording: %v, want its deadline exceeded (the recorder waits on the store)", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("stopRecording overran its deadline by a minute: it waited for the blocked SEND's queueing")
	}
	select {
	case <-blocked:
	case <-time.After(time.Minute):
		t.Fatal("the SEND waiting for room in the queue is still blocked after the recorder stopped")
	}
}

// TestDedupResendWhileEarlierCopyPending: after an append fails, a resend
// of an earlier message whose append is still under way is in doubt (the
// client is asked to send it again), not new: once that append is stored
// the resend is a duplicate, and had it failed the resend would be new. On
// the old rule (pushed fell back to the persisted id on any failure) the
// resend was taken as new and stored a second time (a nemesis run stored
// replicated entries twice so).
func TestDedupResendWhileEarlierCopyPending(t *testing.T) {
	for _, tc := range []struct {
		name       string
		firstErr   error
		afterwards dedupStatus
	}{
		{"earlier copy stored", nil, sendDuplicate},
		{"earlier copy failed", errors.New("bookies gone"), sendNew},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDedup(1000, clockwork.NewRealClock())
			d.startRecording(16)
			first := newTestAppend()
			defer func() {
				first.finishOnce(mledger.Position{}, errors.New("test over")) // the recorder waits on it
				_ = d.stopRecording(context.Background())
			}()
			if got, _ := d.push("p", 1, 1, true); got != sendNew {
				t.Fatalf("first send: %v, want new", got)
			}
			d.queueAppend("p", 1, first) // handed to the managed ledger, not yet confirmed
			if got, _ := d.push("p", 2, 2, true); got != sendNew {
				t.Fatalf("second send: %v, want new", got)
			}
			d.failed("p") // the second's append failed (its connection closed)

			if got, _ := d.push("p", 1, 1, true); got != sendInDoubt {
				t.Fatalf("resend of the first while its append is under way: %v, want in doubt", got)
			}
			first.finishOnce(mledger.Position{Ledger: 1, Entry: 0}, tc.firstErr)
			testkit.WaitFor(t, "the recorder to record the first append", func() bool {
				d.mu.Lock()
				defer d.mu.Unlock()
				return len(d.pending) == 0
			})
			if got, _ := d.push("p", 1, 1, true); got != tc.afterwards {
				t.Fatalf("resend of the first once its append ended: %v, want %v", got, tc.afterwards)
			}
		})
	}
}

// TestDedupBatchRanges: a batch is judged by the run of its ids, its first
// to its highest. None above the persisted id: a duplicate. Some at or
// below it and some above, with nothing of the name on its way to storage:
// an overlap, stored without the first ones (the persisted id returned).
// The same while an append of the name is still under way: in doubt.
func TestDedupBatchRanges(t *testing.T) {
	d := newDedup(1000, clockwork.NewRealClock())
	d.startRecording(16)
	defer func() { _ = d.stopRecording(context.Background()) }()
	stored := func(seq, highest int64) {
		t.Helper()
		if got, _ := d.push("p", seq, highest, true); got != sendNew {
			t.Fatalf("[%d, %d]: %v, want new", seq, highest, got)
		}
		a := newTestAppend()
		d.queueAppend("p", highest, a)
		a.finishOnce(mledger.Position{Ledger: 1, Entry: seq}, nil)
		testkit.WaitFor(t, "the recorder to record the append", func() bool { return d.lastSequence("p") == highest })
	}
	stored(0, 8)
	for _, tc := range []struct {
		seq, highest int64
		want         dedupStatus
		upTo         int64
	}{
		{0, 8, sendDuplicate, 0},
		{2, 5, sendDuplicate, 0},
		{8, 8, sendDuplicate, 0},
		{0, 30, sendOverlap, 8},
	} {
		if got, upTo := d.push("p", tc.seq, tc.highest, true); got != tc.want || upTo != tc.upTo {
			t.Errorf("[%d, %d] after [0, 8] stored: %v (up to %d), want %v (up to %d)", tc.seq, tc.highest, got, upTo, tc.want, tc.upTo)
		}
	}
	// The overlap [0, 30] was pushed: until it is stored or has failed, a
	// batch over it is in doubt, and one of its own ids too.
	for _, r := range [][2]int64{{4, 40}, {9, 12}} {
		if got, _ := d.push("p", r[0], r[1], true); got != sendInDoubt {
			t.Errorf("[%d, %d] while [0, 30] is on its way: %v, want in doubt", r[0], r[1], got)
		}
	}
	d.failed("p")
	if got, upTo := d.push("p", 4, 40, true); got != sendOverlap || upTo != 8 {
		t.Errorf("[4, 40] once [0, 30] failed: %v (up to %d), want an overlap up to 8", got, upTo)
	}
}
