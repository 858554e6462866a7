package broker

import (
	"runtime"
	"testing"
)

// TestProducerMemoryFollowsInFlight: a producer with nothing in flight
// holds a few KB, not a queue of maxReceipts receipts (about 480 KB each:
// 2,000 producers on one connection took about 1 GB).
func TestProducerMemoryFollowsInFlight(t *testing.T) {
	const n = 500
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ps := make([]*producer, n)
	for i := range ps {
		ps[i] = newProducer(nil, nil, uint64(i), "p", false, 0)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ps)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	if per > 16<<10 {
		t.Fatalf("a producer holds %d bytes with nothing in flight, want at most 16 KiB", per)
	}
	t.Logf("a producer holds %d bytes with nothing in flight", per)
}

// TestReceiptQueue: receipts come out in order, the queue takes at most
// maxReceipts (a push past it waits for a pop, or gives up on stop), lets
// its memory go once empty, and a close ends the pops after what is
// queued, while a stop ends them at once.
func TestReceiptQueue(t *testing.T) {
	never := make(chan struct{})
	stopped := make(chan struct{})
	close(stopped)

	q := newReceiptQueue()
	for i := range maxReceipts {
		if !q.push(receipt{turn: uint64(i)}, never, never) {
			t.Fatalf("push %d refused", i)
		}
	}
	if q.push(receipt{turn: maxReceipts}, stopped, never) {
		t.Fatal("a push past maxReceipts did not wait")
	}
	pushed := make(chan bool)
	go func() { pushed <- q.push(receipt{turn: maxReceipts}, never, never) }()
	for i := range maxReceipts + 1 {
		r, ok := q.pop(never, never)
		if !ok || r.turn != uint64(i) {
			t.Fatalf("pop %d: %d, %v", i, r.turn, ok)
		}
		if i == 0 && !<-pushed {
			t.Fatal("the waiting push gave up")
		}
	}
	q.mu.Lock()
	items := q.mu.items
	q.mu.Unlock()
	if items != nil {
		t.Fatalf("an empty queue keeps an array of %d", cap(items))
	}

	q.push(receipt{turn: 1}, never, never)
	q.close()
	if r, ok := q.pop(never, never); !ok || r.turn != 1 {
		t.Fatalf("after close: %d, %v; want the queued receipt", r.turn, ok)
	}
	if _, ok := q.pop(never, never); ok {
		t.Fatal("a closed, empty queue popped")
	}

	q = newReceiptQueue()
	q.push(receipt{turn: 1}, never, never)
	if _, ok := q.pop(stopped, never); ok {
		t.Fatal("a stopped queue popped")
	}
}
