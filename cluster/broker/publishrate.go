package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// Publish rate: Pulsar's publishRate (a topic's) and publishMaxMessageRate
// (a namespace's, per region), at most so many messages and bytes per
// second into one topic, all its producers together.
//
// Pulsar throttles by pausing reads from the producer's whole connection.
// pulsar-client-go puts every producer and consumer of a client on one
// connection per broker, so that also stalls the client's other producers
// and its consumers' acks and flow. Meridian throttles the producer alone:
//
//   - Once its topic has a rate, a producer's SENDs go through its pacer, a
//     queue with one goroutine. The reader hands it the SEND and goes on
//     reading the connection; the goroutine takes the SENDs in order,
//     waits (on a timer, never spinning) until the topic's limiter admits
//     each one, and publishes it as the reader would have. Receipts keep
//     SEND order, since one goroutine publishes every SEND of the producer
//     from then on, for as long as the producer lives, rate or no rate.
//   - No SEND fails for the rate. The client's own bound on its pending
//     messages (pulsar-client-go's MaxPendingMessages, 1000) stops it while
//     its SENDs wait, and its SendAsync blocks, as against Pulsar.
//   - The queue is bounded by the connection's MaxPendingPublishes and
//     MaxPendingPublishBytes. A producer that reaches either (more SENDs in
//     flight than any pulsar-client-go producer has) pauses the connection's
//     reads until its pacer makes room: the memory bound wins over fairness,
//     for a client that does not bound itself.
//   - A CLOSE_PRODUCER of a paced producer queues behind its SENDs, so that
//     they are stored and answered before the close's SUCCESS, as on Pulsar,
//     where the close is read after them.
//   - The connection's pending-publish count takes a SEND when the pacer
//     publishes it, not while it waits: waiting SENDs never pause the
//     connection for the client's other producers.
//
// The limiter lets a tenth of a second's worth through at once (its burst),
// so that a measurement over a few seconds sees the rate, not the burst.

// publishLimiter is one topic's publish rate, shared by its producers. The
// zero value limits nothing.
type publishLimiter struct {
	mu   sync.Mutex
	rate publishRate
	// msgs and bytes are nil for a dimension that is not limited.
	msgs, bytes *rate.Limiter
}

// publishRate is a publish rate per second: messages and bytes, each 0
// for no limit.
type publishRate struct{ msgs, bytes int64 }

// set makes r the rate; a rate equal to the one in force keeps its
// limiters, and what they have admitted.
func (l *publishLimiter) set(r publishRate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r == l.rate {
		return
	}
	l.rate = r
	l.msgs, l.bytes = perSecond(r.msgs), perSecond(r.bytes)
}

// limited reports whether a rate is in force.
func (l *publishLimiter) limited() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msgs != nil || l.bytes != nil
}

func perSecond(n int64) *rate.Limiter {
	if n <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(n), max(1, int(n/10)))
}

// reserve takes messages and bytes from the limiters and returns how long
// the SEND waits for them.
func (l *publishLimiter) reserve(now time.Time, messages, bytes int) time.Duration {
	l.mu.Lock()
	msgs, byteLim := l.msgs, l.bytes
	l.mu.Unlock()
	return max(reserveN(msgs, now, messages), reserveN(byteLim, now, bytes))
}

// reserveN reserves n tokens of lim, in pieces of at most its burst (a
// batch may hold more messages than a tenth of a second's worth), and
// returns the delay until the last piece is available.
func reserveN(lim *rate.Limiter, now time.Time, n int) time.Duration {
	if lim == nil {
		return 0
	}
	var d time.Duration
	for n > 0 {
		k := min(n, lim.Burst())
		d = lim.ReserveN(now, k).DelayFrom(now)
		n -= k
	}
	return d
}

// topicLimits are the policies a loaded topic enforces on each SEND,
// applied by applyPolicies whenever the global configuration changes.
type topicLimits struct {
	publishRate publishLimiter
	// maxMessageSize is the topic's maxMessageSize; 0 is none.
	maxMessageSize atomic.Int64
	// maxDeliveryDelay is the longest delivery delay, in ms, a message may
	// ask for (its delayed delivery policy's; 0 is none).
	maxDeliveryDelay atomic.Int64
}

// pacedItem is a SEND waiting in a pacer, or the producer's close, which
// waits behind its SENDs.
type pacedItem struct {
	send  *pb.CommandSend
	frame wire.Frame
	// messages is the SEND's verified message count (1 when it does not
	// verify: publish refuses it without storing it).
	messages int
	// closeReq is set for a CLOSE_PRODUCER.
	closeReq *pb.CommandCloseProducer
}

// pacer holds a paced producer's SENDs in arrival order until the topic's
// publish rate admits each. The connection's reader pushes; the pacer's
// goroutine, owned by the connection's WaitGroup, pops and publishes, and
// is the only goroutine that calls the producer's publish once the pacer
// exists. It ends when the producer halts, closes or the connection ends;
// the SENDs still queued then are dropped unanswered, as a topic's close
// drops them, and the client sends them again.
type pacer struct {
	p *producer
	// more wakes the goroutine; room wakes a reader paused on a full
	// queue. Neither ever blocks its sender (wake).
	more, room chan struct{}
	done       chan struct{} // closed when the goroutine has ended

	mu struct {
		sync.Mutex
		items []pacedItem
		bytes int64
		ended bool
	}
}

// pacing returns p's pacer, starting it when p's topic has a publish rate;
// nil while p is not paced. Only the connection's reader calls it.
func (p *producer) pacing() *pacer {
	if p.pacer == nil && p.topic.limits.publishRate.limited() {
		p.pacer = &pacer{p: p, more: make(chan struct{}, 1), room: make(chan struct{}, 1), done: make(chan struct{})}
		p.c.wg.Add(1)
		go p.pacer.run()
	}
	return p.pacer
}

// push queues a SEND or a close, pausing the connection's reads while the
// queue is at its bounds (see the essay above). It reports false when the
// connection closes first.
func (pc *pacer) push(item pacedItem) bool {
	c := pc.p.c
	maxSends, maxBytes := c.srv.cfg.MaxPendingPublishes, c.srv.cfg.MaxPendingPublishBytes
	hasRoom := func() bool {
		pc.mu.Lock()
		defer pc.mu.Unlock()
		return pc.mu.ended || ((maxSends == 0 || len(pc.mu.items) < maxSends) && (maxBytes == 0 || pc.mu.bytes < maxBytes))
	}
	if !hasRoom() {
		c.srv.limits.readPauses.Add(1)
		c.log.Debug("pausing reads: a paced producer's queue is at its bound", "producer", pc.p.name)
		if !c.pauseReading(pc.room, hasRoom) {
			return false
		}
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.mu.ended {
		return true // the producer is gone; its client resends elsewhere
	}
	pc.mu.items = append(pc.mu.items, item)
	pc.mu.bytes += int64(len(item.frame.Message))
	wake(pc.more)
	return true
}

// next takes the oldest item, waiting for one; false once the producer
// halts or the connection ends.
func (pc *pacer) next() (pacedItem, bool) {
	for {
		pc.mu.Lock()
		if len(pc.mu.items) > 0 {
			item := pc.mu.items[0]
			pc.mu.items[0] = pacedItem{}
			pc.mu.items = pc.mu.items[1:]
			if len(pc.mu.items) == 0 {
				pc.mu.items = nil // memory follows what waits
			}
			pc.mu.bytes -= int64(len(item.frame.Message))
			pc.mu.Unlock()
			wake(pc.room)
			return item, true
		}
		pc.mu.Unlock()
		select {
		case <-pc.more:
		case <-pc.p.stop:
			return pacedItem{}, false
		case <-pc.p.c.ctx.Done():
			return pacedItem{}, false
		}
	}
}

func (pc *pacer) run() {
	p := pc.p
	defer p.c.wg.Done()
	defer close(pc.done)
	defer func() {
		pc.mu.Lock()
		pc.mu.ended, pc.mu.items, pc.mu.bytes = true, nil, 0
		pc.mu.Unlock()
		wake(pc.room)
	}()
	clock := p.topic.svc.clock
	for {
		item, ok := pc.next()
		if !ok {
			return
		}
		if item.closeReq != nil {
			p.c.closeProducer(p, item.closeReq)
			return
		}
		if d := p.topic.limits.publishRate.reserve(clock.Now(), item.messages, len(item.frame.Message)); d > 0 {
			t := clock.NewTimer(d)
			select {
			case <-t.Chan():
			case <-p.stop:
				t.Stop()
				return
			case <-p.c.ctx.Done():
				t.Stop()
				return
			}
		}
		p.c.notePublish(p, len(item.frame.Message))
		p.publish(item.send, &item.frame)
	}
}

// stopPacing waits for p's pacer, if any, to end: the connection has
// ended (its context is done), so it ends at once.
func (p *producer) stopPacing(ctx context.Context) {
	if p.pacer == nil {
		return
	}
	select {
	case <-p.pacer.done:
	case <-ctx.Done():
	}
}
