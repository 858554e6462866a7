package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/testkit"
)

// stuckAppend is an append the store has not confirmed yet.
type stuckAppend struct{ done chan struct{} }

func (a stuckAppend) Done() <-chan struct{} { return a.done }
func (a stuckAppend) Result() (mledger.Position, error) {
	<-a.done
	return mledger.Position{}, errors.New("failed")
}

// TestDedupStopWhileQueueFull: a topic's close stops the deduplication
// recorder within its deadline even while a SEND waits, under the topic's
// append lock, for room in the recorder's queue (the store is slow to
// confirm), and that SEND then goes on: it is dropped, not left blocked.
func TestDedupStopWhileQueueFull(t *testing.T) {
	d := &dedup{pushed: map[string]int64{}, persisted: map[string]int64{}, changed: map[string]struct{}{}}
	d.startRecording(1)
	stuck := stuckAppend{done: make(chan struct{})}
	defer func() {
		close(stuck.done) // the store answers at last: the recorder ends
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
