package broker

import "sync"

// maxReceipts bounds the SENDs of one producer awaiting their receipt; a
// full queue stops the connection's reader (backpressure), as a full
// managed-ledger queue does. It is above pulsar-client-go's default
// MaxPendingMessages (1000 batches); the connection's own bound
// (Config.MaxPendingPublishes) is usually reached first.
const maxReceipts = 4096

// receiptQueue is a producer's SENDs awaiting their receipt, in SEND order:
// the goroutine that publishes them pushes (the connection's reader, or
// the producer's pacer: publishrate.go), its receipt goroutine pops.
//
// Its memory is what is in it: the slice grows with the SENDs in flight
// and is let go once they are answered. A channel of maxReceipts would
// hold maxReceipts receipts (about 480 KB) for every producer from its
// creation, in flight or not: 2,000 producers on one connection took
// about 1 GB.
type receiptQueue struct {
	// ready holds a token while the queue has receipts, or is closed, for
	// the popper; room holds one once a pop made room, for a pusher
	// waiting at maxReceipts. Neither ever blocks its sender.
	ready, room chan struct{}

	mu struct {
		sync.Mutex
		items  []receipt
		closed bool
	}
}

func newReceiptQueue() *receiptQueue {
	return &receiptQueue{ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// push appends r, waiting while the queue holds maxReceipts; it reports
// false, dropping r, if stop or done closes first.
func (q *receiptQueue) push(r receipt, stop, done <-chan struct{}) bool {
	for {
		q.mu.Lock()
		if len(q.mu.items) < maxReceipts {
			q.mu.items = append(q.mu.items, r)
			q.mu.Unlock()
			wake(q.ready)
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-stop:
			return false
		case <-done:
			return false
		}
	}
}

// close tells the popper that nothing more comes: it pops what is queued,
// then ends.
func (q *receiptQueue) close() {
	q.mu.Lock()
	q.mu.closed = true
	q.mu.Unlock()
	wake(q.ready)
}

// pop takes the oldest receipt, waiting for one; it reports false once
// the queue is closed and empty, or when stop or done closes.
//
// A closed stop or done ends it before any receipt still queued: a halted
// producer answers nothing more.
func (q *receiptQueue) pop(stop, done <-chan struct{}) (receipt, bool) {
	for {
		select {
		case <-stop:
			return receipt{}, false
		case <-done:
			return receipt{}, false
		default:
		}
		q.mu.Lock()
		if len(q.mu.items) > 0 {
			r := q.mu.items[0]
			q.mu.items[0] = receipt{} // let its future and trace go
			q.mu.items = q.mu.items[1:]
			if len(q.mu.items) == 0 {
				q.mu.items = nil // let the array go: memory follows what is in flight
			}
			q.mu.Unlock()
			wake(q.room)
			return r, true
		}
		closed := q.mu.closed
		q.mu.Unlock()
		if closed {
			return receipt{}, false
		}
		select {
		case <-q.ready:
		case <-stop:
			return receipt{}, false
		case <-done:
			return receipt{}, false
		}
	}
}
