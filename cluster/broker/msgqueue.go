package broker

import "sync"

// frameOverhead is what a MESSAGE frame costs in a message queue beyond
// its message and metadata bytes: the command, its header and the queue's
// own slot, roughly. It keeps a flood of empty messages bounded by bytes too.
const frameOverhead = 128

// msgQueue holds one connection's MESSAGE frames between the dispatchers
// and the writer, bounded by count and by bytes.
//
// A push that does not fit is refused, never waited on: the dispatcher
// then skips that consumer for the round (subscription.round), so a
// connection that cannot take more holds up no subscription. An empty
// queue takes one frame whatever its size, so a message of the maximum
// size always gets through in the end.
//
// A refusal (or a room check that answered no) is remembered; the writer's
// pop that brings the queue back to half of both bounds reports it, and the
// writer wakes the dispatchers of the connection's consumers. So a skipped
// consumer is served again as soon as its connection drains, and no
// dispatcher polls.
//
// mu is a leaf lock: nothing else is taken while it is held.
type msgQueue struct {
	maxCount, maxBytes int
	ready              chan struct{} // cap 1: a frame was pushed

	mu struct {
		sync.Mutex
		frames  []outbound // FIFO from head
		head    int
		bytes   int
		refused bool // a push or room check was refused since the last wake
	}
}

func newMsgQueue(maxCount, maxBytes int) *msgQueue {
	return &msgQueue{maxCount: maxCount, maxBytes: maxBytes, ready: make(chan struct{}, 1)}
}

func frameBytes(o outbound) int { return len(o.msg) + len(o.bem) + frameOverhead }

// fitsLocked reports whether a frame of size bytes may be pushed now.
func (q *msgQueue) fitsLocked(size int) bool {
	n := len(q.mu.frames) - q.mu.head
	return n == 0 || (n < q.maxCount && q.mu.bytes+size <= q.maxBytes)
}

// room reports whether the queue takes more frames now. A no is
// remembered, so that the writer wakes the dispatchers when room comes.
func (q *msgQueue) room() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fitsLocked(1) {
		return true
	}
	q.mu.refused = true
	return false
}

// push queues o unless it does not fit, reporting whether it did.
func (q *msgQueue) push(o outbound) bool {
	size := frameBytes(o)
	q.mu.Lock()
	if !q.fitsLocked(size) {
		q.mu.refused = true
		q.mu.Unlock()
		return false
	}
	q.mu.frames = append(q.mu.frames, o)
	q.mu.bytes += size
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// pop takes the oldest frame. freed reports that a refusal is owed its
// wake-up: the queue is back to half of both bounds.
func (q *msgQueue) pop() (o outbound, ok, freed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.head == len(q.mu.frames) {
		return outbound{}, false, false
	}
	o = q.mu.frames[q.mu.head]
	q.mu.frames[q.mu.head] = outbound{} // let the message be collected
	q.mu.head++
	q.mu.bytes -= frameBytes(o)
	n := len(q.mu.frames) - q.mu.head
	switch {
	case n == 0:
		q.mu.frames, q.mu.head = q.mu.frames[:0], 0
	case q.mu.head >= q.maxCount:
		// A queue that never empties must not grow its slice without
		// bound: move the live frames to the front.
		copy(q.mu.frames, q.mu.frames[q.mu.head:])
		clear(q.mu.frames[n:])
		q.mu.frames, q.mu.head = q.mu.frames[:n], 0
	}
	if q.mu.refused && n <= q.maxCount/2 && q.mu.bytes <= q.maxBytes/2 {
		q.mu.refused = false
		freed = true
	}
	return o, true, freed
}
