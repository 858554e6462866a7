package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// producer is one client producer on one connection.
//
// Ownership: publish runs on the connection's reader goroutine, which
// therefore hands SENDs to the managed ledger in arrival order; the
// producer's receipt goroutine waits for each append in that same order and
// answers SEND_RECEIPT or SEND_ERROR, so receipts go out in send order
// (DESIGN §5). A duplicate takes its place in the same queue. The ledger
// writer answers a confirmed append itself when every receipt before it
// is out (early), so that its receipt is queued before any dispatch of
// the entry; the goroutine then only settles it.
type producer struct {
	c     *conn
	topic *Topic
	id    uint64
	name  string
	// dedup applies the deduplication rule to this producer's SENDs.
	dedup bool
	repl  bool
	// epoch is the topic epoch this producer holds (access modes); set by
	// the topic under its lock before the producer serves.
	epoch uint64
	// schemaVersion is the version of the schema the producer registered,
	// answered in PRODUCER_SUCCESS.
	schemaVersion []byte
	// requestID is the PRODUCER request, answered again when a
	// WaitForExclusive producer becomes ready.
	requestID uint64
	mode      pb.ProducerAccessMode
	since     time.Time
	metadata  map[string]string
	in        counters // stored messages and bytes

	// ready is set once the producer holds the topic (at once, or when a
	// WaitForExclusive producer's turn comes); a SEND before is a client
	// error.
	ready    atomic.Bool
	receipts *receiptQueue
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	// migrating admits the producer's SENDs until it is moved to another
	// region (migrate.go), which shuts it.
	migrating sendGate

	// owed is this producer's share of its connection's pending
	// publishes; receiptsDone is set when the receipt goroutine exits (see
	// conn.notePublish).
	owed         publishCount
	receiptsDone atomic.Bool
	// receipted is signalled (never blocking) each time what the producer
	// owes goes down, for a hand-off waiting on its last receipts
	// (awaitReceipts).
	receipted chan struct{}

	// pacer, once the producer is paced (publishrate.go), holds its SENDs
	// until the topic's publish rate admits them; nil until then. The
	// reader goroutine's.
	pacer *pacer
	// nextTurn is the turn of the next SEND (the publishing goroutine's:
	// the reader's, or the pacer's once there is one).
	nextTurn uint64
	// appendErr is the first error of an append of this producer's; every
	// SEND after it fails with it (the publishing goroutine's, see
	// publish).
	appendErr error
	// turnMu orders the answers between the receipt goroutine and the
	// ledger writer (early): turn counts the SENDs answered, in SEND
	// order, and halted ends the writer's answers with the goroutine's.
	turnMu sync.Mutex
	turn   uint64
	halted bool
}

// receipt is one SEND awaiting its answer: an append to wait for, or a
// duplicate (fut nil) that is answered in turn.
type receipt struct {
	turn         uint64 // its place in SEND order
	seq, highest int64  // echoed in the receipt
	fut          *mledger.AppendFuture
	err          error // the SEND was refused before it was appended
	// The deduplication identity (see publish); track is false for an
	// entry that does not count (a chunk before the last).
	name                   string
	dedupSeq, dedupHighest int64
	track                  bool
	messages, bytes        int           // for the counters
	trace                  *publishTrace // nil: not traced
	// receipted: the receipt was sent before the append was confirmed
	// (only in the broken_ackearly variant; see variants.go).
	receipted bool
}

func newProducer(c *conn, t *Topic, id uint64, name string, dedup bool, requestID uint64) *producer {
	repl := strings.HasPrefix(name, ReplicationProducerPrefix)
	return &producer{c: c, topic: t, id: id, name: name, dedup: dedup || (repl && dedupReplicated), repl: repl, requestID: requestID,
		receipts: newReceiptQueue(), stop: make(chan struct{}), done: make(chan struct{}),
		receipted: make(chan struct{}, 1)}
}

// start runs the receipt goroutine, owned by the connection.
func (p *producer) start() {
	p.c.wg.Add(1)
	go func() {
		defer p.c.wg.Done()
		// receiptsDone before settleOwed: see conn.notePublish.
		defer p.settleOwed()
		defer p.receiptsDone.Store(true)
		defer close(p.done)
		p.answer()
	}()
}

// publish hands one SEND to the managed ledger (or recognises a
// duplicate) and queues its receipt.
//
// The deduplication identity is the producer's name and the SEND's
// sequence ids, except:
//   - a chunk other than the last is not checked or recorded: every chunk
//     of a message carries its sequence id, and the second would be taken
//     for a duplicate of the first;
//   - a replicated entry (replication producer) is identified by its
//     origin region, source topic incarnation and source offsets, from the
//     property the replicator stores with it (dedupIdentity), which a
//     reload reads back from the stored entry; the SEND's ids (the same
//     source offsets) are echoed in the receipt. An entry without that
//     property is refused (NotAllowed), never stored without its identity.
//
// A SEND that arrives once the topic is fenced for a hand-off, or the
// producer is being moved to another region, is dropped unanswered: it was
// not stored, and the client resends it, with every other SEND it has
// pending, to the new owner after CLOSE_PRODUCER.
func (p *producer) publish(send *pb.CommandSend, f *wire.Frame) {
	if !p.topic.sends.enter() {
		p.settle(1, int64(len(f.Message)))
		return
	}
	defer p.topic.sends.leave()
	if !p.migrating.enter() {
		p.settle(1, int64(len(f.Message)))
		return
	}
	defer p.migrating.leave()
	seq := int64(send.GetSequenceId())
	// Every path from here queues exactly one receipt, so turns have no gaps.
	r := receipt{turn: p.nextTurn, seq: seq, highest: max(seq, int64(send.GetHighestSequenceId())), track: true, bytes: len(f.Message)}
	p.nextTurn++
	r.name, r.dedupSeq, r.dedupHighest = p.name, r.seq, r.highest
	// The verified count of the metadata, not the SEND's num_messages: a
	// count its payload cannot hold would drain the permits of every
	// consumer it reaches (wire.BatchMessages), and a SEND's claim would
	// move the entry index by what it likes.
	n, err := wire.BatchCount(f.Metadata, f.Payload)
	if err != nil {
		r.err = fmt.Errorf("%w: %v", wire.ErrNotAllowed, err)
		p.queue(r)
		return
	}
	r.messages = n
	if limit := p.topic.limits.maxMessageSize.Load(); limit > 0 && !send.GetIsChunk() && int64(len(f.Message)) > limit {
		// Pulsar's check and words (AbstractTopic.isExceedMaximumMessageSize):
		// the message with its metadata, a chunk never, as NotAllowed,
		// which fails the send and keeps the connection.
		r.err = fmt.Errorf("%w: Exceed maximum message size", wire.ErrNotAllowed)
		p.queue(r)
		return
	}
	// The metadata is decoded only for what needs it: a chunk, a
	// replicated message, or a topic that bounds the delivery delay.
	maxDelay := p.topic.limits.maxDeliveryDelay.Load()
	if send.GetIsChunk() || p.repl || maxDelay > 0 {
		md, err := f.DecodeMetadata()
		if err != nil {
			r.err = fmt.Errorf("%w: %v", wire.ErrChecksumMismatch, err)
			p.queue(r)
			return
		}
		switch {
		case p.repl:
			r.name, r.dedupSeq, r.dedupHighest, r.track, err = dedupIdentity(md)
			if err != nil {
				r.err = fmt.Errorf("%w: %v", wire.ErrNotAllowed, err)
				p.queue(r)
				return
			}
		case maxDelay > 0 && md.HasDeliverAtTime() && md.GetDeliverAtTime()-int64(md.GetPublishTime()) > maxDelay:
			// Pulsar's check and words (isExceedMaximumDeliveryDelay): the
			// delay asked, from the message's publish time. A replicated
			// message was checked in its origin region.
			r.err = fmt.Errorf("%w: Exceeds max allowed delivery delay of %d milliseconds", wire.ErrNotAllowed, maxDelay)
			p.queue(r)
			return
		case send.GetIsChunk():
			r.track = isLastChunk(md)
		}
	}
	if p.appendErr != nil {
		// An earlier SEND of this producer failed to append: none after it
		// is stored, or the producer's messages would be stored out of
		// order, and a resend of the failed one then taken for a duplicate
		// of what followed it. The client resends them all on a new
		// connection.
		r.err = p.appendErr
		p.queue(r)
		return
	}
	msg := f.Message
	if r.track {
		if p.dedup && !p.repl {
			// Only a producer that deduplicates pays for reading its
			// batches (uncompressing a compressed one); another's is
			// recorded by its first id, as before, until a reload replays it.
			r.dedupHighest = batchHighest(f.Metadata, f.Payload, r.dedupSeq, r.dedupHighest)
		}
		status, upTo := p.topic.dd.push(r.name, r.dedupSeq, r.dedupHighest, p.dedup)
		if status == sendOverlap {
			// Stored without its messages at or below upTo, which are
			// stored already; its receipt answers the whole batch. (The
			// client numbers the batch's messages by their place in what
			// it sent, so the ids it hands out for the kept ones point
			// past them by the count dropped: the entry is right, the
			// batch index is not.)
			switch trimmed, kept, err := wire.DropBatchPrefix(f.Metadata, f.Payload, upTo); {
			case err != nil:
				// Its messages cannot be read (an encrypted batch that
				// declares a highest_sequence_id): stored whole, its
				// stored messages a second time, rather than lost.
			case kept == 0:
				// Its declared highest id is above every id of its
				// messages: nothing new. What push raised goes back.
				p.topic.dd.failed(r.name)
				status = sendDuplicate
			default:
				msg, n, r.messages = trimmed, kept, kept
			}
		}
		switch status {
		case sendDuplicate:
			p.queue(r) // receipt only
			return
		case sendInDoubt:
			r.err = fmt.Errorf("%w: an earlier copy of sequence id %d is still being stored; send it again", wire.ErrServiceNotReady, r.dedupSeq)
			p.queue(r)
			return
		}
	}
	r.trace = p.topic.startPublishTrace(f)
	var then func(mledger.Position, error)
	if receiptAfterAppend {
		answer := r // a copy: the writer reads it while r gets its future
		then = func(pos mledger.Position, err error) { p.early(answer, pos, err) }
	}
	r.fut, r.err = p.topic.append(p.c.ctx, msg, n, r.track, r.name, r.dedupHighest, then)
	if r.err != nil {
		p.appendErr = r.err
	}
	if r.err == nil && !receiptAfterAppend {
		// Only in the broken_ackearly variant (variants.go): the receipt
		// goes out now, at position 0:0, before the bookies confirm; the
		// recorder still records the append when it completes.
		p.c.send(p.sendReceipt(r, pb.MessageIdData_builder{LedgerId: ptr(uint64(0)), EntryId: ptr(uint64(0))}.Build()))
		r.receipted = true
	}
	p.queue(r)
}

// early answers a confirmed append on the ledger writer's goroutine, in
// the step that makes the entry visible (mledger's AppendAsync then), when
// every receipt before it is out: the receipt is then queued before any
// dispatcher can read the entry, and a consumer on this connection gets
// the message after the producer's receipt, as on Pulsar. Anything else
// (a failure, an earlier SEND unanswered, a full write queue, a halted
// producer) is left to the receipt goroutine. It runs under the managed
// ledger's lock, so it only queues: a full queue closes the connection
// from the goroutine instead.
func (p *producer) early(r receipt, pos mledger.Position, err error) {
	if err != nil {
		return
	}
	p.turnMu.Lock()
	defer p.turnMu.Unlock()
	if p.halted || p.turn != r.turn {
		return
	}
	if p.c.queue(p.sendReceipt(r, storedAt(pos))) != "" {
		return
	}
	p.count(r)
	p.turn++
}

// count adds a stored SEND to the producer's and the topic's counters.
func (p *producer) count(r receipt) {
	p.in.add(r.messages, r.bytes)
	p.topic.in.add(r.messages, r.bytes)
	p.topic.lastPublish.Store(p.topic.svc.clock.Now().UnixMilli())
}

// storedAt is the message id of an entry stored at pos.
func storedAt(pos mledger.Position) *pb.MessageIdData {
	return pb.MessageIdData_builder{LedgerId: ptr(uint64(pos.Ledger)), EntryId: ptr(uint64(pos.Entry))}.Build()
}

func (p *producer) queue(r receipt) { p.receipts.push(r, p.stop, p.c.ctx.Done()) }

// answer sends the receipts in order until the producer stops.
func (p *producer) answer() {
	for {
		r, ok := p.receipts.pop(p.stop, p.c.ctx.Done())
		if !ok {
			return
		}
		var pos mledger.Position
		err := r.err
		if err == nil && r.fut != nil {
			select {
			case <-r.fut.Done():
			case <-p.c.ctx.Done():
				return
			}
			pos, err = r.fut.Result() // deduplication records it (dedup.record)
		}
		r.trace.finish(pos, err)
		if errors.Is(err, mledger.ErrTerminated) {
			// No SEND_ERROR: pulsar-client-go forgets the producer on one
			// and then ignores the CLOSE_PRODUCER. Disconnected, it
			// reconnects, learns the topic is terminated, and fails what
			// is pending with ErrTopicTerminated.
			p.disconnect()
			return
		}
		if full := p.answerInTurn(r, pos, err); full != "" {
			p.c.closeNotReading(full)
		}
		p.settle(1, int64(r.bytes))
	}
}

// answerInTurn sends r's SEND_ERROR or SEND_RECEIPT unless the ledger
// writer has (early), and says which bound of the write queue is full if
// it could not be queued.
func (p *producer) answerInTurn(r receipt, pos mledger.Position, err error) (full string) {
	p.turnMu.Lock()
	defer p.turnMu.Unlock()
	if p.turn > r.turn {
		return "" // answered early
	}
	p.turn++
	switch {
	case err != nil:
		return p.c.queue(sendError(p.id, r.seq, err))
	case r.fut == nil: // duplicate: Pulsar answers (-1, -1)
		return p.c.queue(p.sendReceipt(r, storedAt(mledger.Position{Ledger: -1, Entry: -1})))
	}
	p.count(r)
	if r.receipted {
		return ""
	}
	return p.c.queue(p.sendReceipt(r, storedAt(pos)))
}

// sendReceipt is the SEND_RECEIPT of r, stored at id.
func (p *producer) sendReceipt(r receipt, id *pb.MessageIdData) *pb.BaseCommand {
	return pb.BaseCommand_builder{Type: pb.BaseCommand_SEND_RECEIPT.Enum(), SendReceipt: pb.CommandSendReceipt_builder{
		ProducerId:        ptr(p.id),
		SequenceId:        ptr(uint64(r.seq)),
		HighestSequenceId: ptr(uint64(r.highest)),
		MessageId:         id,
	}.Build()}.Build()
}

// sendError maps a failed append to SEND_ERROR, which makes the client
// reconnect and resend. (A terminated topic disconnects the producer
// instead: see answer.)
func sendError(producerID uint64, seq int64, err error) *pb.BaseCommand {
	if !errors.As(err, new(*wire.ServerError)) {
		err = fmt.Errorf("%w: %v", wire.ErrPersistence, err)
	}
	code, msg := wire.ToWire(err)
	return pb.BaseCommand_builder{Type: pb.BaseCommand_SEND_ERROR.Enum(), SendError: pb.CommandSendError_builder{
		ProducerId: ptr(producerID), SequenceId: ptr(uint64(seq)), Error: &code, Message: &msg,
	}.Build()}.Build()
}

// success is the PRODUCER_SUCCESS answer to request reqID.
func (p *producer) success(reqID uint64, ready bool) *pb.BaseCommand {
	last := int64(-1)
	if p.dedup {
		last = p.topic.dd.lastSequence(p.name)
	}
	b := pb.CommandProducerSuccess_builder{
		RequestId:      ptr(reqID),
		ProducerName:   ptr(p.name),
		LastSequenceId: ptr(last),
		TopicEpoch:     ptr(p.epoch),
		ProducerReady:  ptr(ready),
	}
	if p.schemaVersion != nil {
		b.SchemaVersion = p.schemaVersion
	}
	return pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER_SUCCESS.Enum(), ProducerSuccess: b.Build()}.Build()
}

// becameReady answers a WaitForExclusive producer whose turn has come.
func (p *producer) becameReady() {
	p.ready.Store(true)
	p.c.send(p.success(p.requestID, true))
}

// halt stops the receipt goroutine and the ledger writer's answers.
func (p *producer) halt() {
	p.stopOnce.Do(func() {
		p.turnMu.Lock()
		p.halted = true
		p.turnMu.Unlock()
		close(p.stop)
	})
}

// disconnect is the broker closing the producer (topic unloaded, or fenced
// by an exclusive producer): CLOSE_PRODUCER tells the client to look the
// topic up again.
func (p *producer) disconnect() { p.disconnectTo(nil) }

// disconnectTo closes the producer with CLOSE_PRODUCER, carrying the new
// owner's URLs when the topic moved to a known broker (dest), so that the
// client connects there at once instead of looking the topic up.
func (p *producer) disconnectTo(dest *loadmgr.Owner) { p.release(dest, dest != nil) }

// release closes the producer with CLOSE_PRODUCER (carrying dest's URLs,
// if any); elsewhere says the client goes to another broker or region,
// so that its late SENDs are dropped (finishRelease).
func (p *producer) release(dest *loadmgr.Owner, elsewhere bool) {
	if !p.c.startRelease(p) {
		return
	}
	p.topic.removeProducer(p)
	p.halt()
	b := pb.CommandCloseProducer_builder{ProducerId: ptr(p.id), RequestId: ptr(uint64(0))}
	if dest != nil {
		b.AssignedBrokerServiceUrl, b.AssignedBrokerServiceUrlTls = p.c.assignedURLs(*dest)
	}
	p.c.finishRelease(p.id, pb.BaseCommand_builder{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(), CloseProducer: b.Build()}.Build(), elsewhere)
}

// closed is the client closing the producer, or its connection ending.
// It runs on the goroutine that queues the producer's receipts (the
// connection's reader, or the producer's pacer), or once that has ended,
// so it can close the queue: the receipts already queued are still
// answered.
func (p *producer) closed() {
	p.topic.removeProducer(p)
	p.receipts.close()
}

// waitDone waits for the receipt goroutine, so that a CLOSE_PRODUCER's
// SUCCESS follows every receipt.
func (p *producer) waitDone(ctx context.Context) {
	select {
	case <-p.done:
	case <-ctx.Done():
	}
}

func (c *conn) handleProducer(req *pb.CommandProducer) {
	reqID := req.GetRequestId()
	t, err := parseTopic(req.GetTopic())
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	if err := c.authorize(auth.ActionProduce, t); err != nil {
		c.sendError(reqID, err)
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.srv.cfg.OperationTimeout)
	defer cancel()
	topic, err := c.srv.topics.Topic(ctx, t, true)
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	eff, err := topic.svc.resolve(t)
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	name := req.GetProducerName()
	if name == "" {
		name = topic.svc.producerName()
	}
	if err := topic.svc.refuseFencedSource(t, name); err != nil {
		c.sendError(reqID, err)
		return
	}
	p := newProducer(c, topic, req.GetProducerId(), name, eff.DeduplicationEnabled, reqID)
	p.mode, p.since, p.metadata = req.GetProducerAccessMode(), c.srv.clock.Now(), keyValues(req.GetMetadata())
	taken, full := c.addProducer(p)
	if full != nil {
		c.sendError(reqID, full)
		return
	}
	if taken {
		// A client whose request timed out asks again with the same id:
		// answer it as the first, as Pulsar does, once that one is ready.
		if q, ok := c.producerFor(p.id); ok && q.ready.Load() && q.topic == topic {
			c.send(q.success(reqID, true))
			return
		}
		c.sendError(reqID, fmt.Errorf("%w: producer %d is already present on the connection", wire.ErrServiceNotReady, p.id))
		return
	}
	if err := topic.admitProducerQuota(eff); err != nil {
		c.forgetProducer(p)
		c.sendError(reqID, err)
		return
	}
	if p.schemaVersion, err = topic.svc.producerSchema(ctx, topic, eff, req.GetSchema()); err != nil {
		c.forgetProducer(p)
		c.sendError(reqID, err)
		return
	}
	if name := req.GetInitialSubscriptionName(); name != "" {
		// The producer asks for a subscription that keeps what it sends
		// (a dead-letter producer's), created at the end if it is new.
		err := topic.admitSubscription(name, eff.MaxSubscriptionsPerTopic)
		if err == nil && !topic.mayCreateOnSubscribe(name, eff) {
			err = fmt.Errorf("%w: Could not create the initial subscription due to the auto subscription creation is not allowed", wire.ErrNotAllowed)
		}
		if err == nil {
			_, err = topic.subscription(ctx, name, pb.CommandSubscribe_Exclusive, true, mledger.Latest, nil)
		}
		if err != nil {
			c.forgetProducer(p)
			c.sendError(reqID, err)
			return
		}
	}
	var epoch *uint64
	if req.HasTopicEpoch() {
		epoch = ptr(req.GetTopicEpoch())
	}
	ready, err := topic.addProducer(p, req.GetProducerAccessMode(), epoch, eff.MaxProducersPerTopic)
	if err != nil {
		c.forgetProducer(p)
		c.sendError(reqID, err)
		return
	}
	if !c.holdsProducer(p) {
		// The connection closed meanwhile, and its release may have missed
		// this producer: take it off the topic here.
		topic.removeProducer(p)
		return
	}
	p.start()
	if ready {
		p.ready.Store(true)
	}
	// A WaitForExclusive producer is told it waits (the client then waits
	// without a timeout) and answered again when its turn comes.
	c.send(p.success(reqID, ready))
}

func (c *conn) handleSend(f *wire.Frame) error {
	send := f.Command.GetSend()
	p, ok := c.producerFor(send.GetProducerId())
	if !ok && c.sendsDropped(send.GetProducerId()) {
		// The broker is closing the producer and its CLOSE_PRODUCER is
		// not queued yet, or the SEND crossed on the wire a
		// CLOSE_PRODUCER (and TOPIC_MIGRATED) that sent the client to
		// another broker or region. Dropped unanswered, the client sends
		// it again after the CLOSE_PRODUCER, wherever it goes; closing the
		// connection instead would tell it nothing of where the topic
		// went, and tear its consumers away before their subscriptions
		// were handed over (migrate.go). A producer sent elsewhere does
		// not come back on this connection before its late SENDs have
		// arrived: only once the topic moves back here.
		return nil
	}
	if !ok || !p.ready.Load() {
		// The client's state is wrong, or the SEND crossed a
		// CLOSE_PRODUCER that told the client to look the topic up again.
		// Pulsar drops the latter and keeps the connection; closing it
		// keeps a late SEND of pulsar-client-go from reaching the producer
		// it registers again here, ahead of the resends it owes (under
		// deduplication they would be dropped as duplicates): the client
		// writes SENDs and its PRODUCER on two queues, in either order.
		// The frames queued go out first: the receipts a topic's close
		// queued before its CLOSE_PRODUCER, and the CLOSE_PRODUCER itself,
		// must reach the client, or it resends messages that are stored.
		return c.closeAfterFlush(fmt.Errorf("SEND for producer %d, which is not ready on this connection", send.GetProducerId()))
	}
	if !f.HasPayload() {
		return fmt.Errorf("SEND without a message")
	}
	if pc := p.pacing(); pc != nil {
		n, err := wire.BatchCount(f.Metadata, f.Payload)
		if err != nil {
			n = 1 // publish refuses it, unstored
		}
		if !pc.push(pacedItem{send: send, frame: *f, messages: n}) {
			return c.ctx.Err()
		}
		return nil
	}
	// Counted before it is queued, so that its receipt never settles
	// what was not yet counted; the pause, if any, follows the SEND.
	c.notePublish(p, len(f.Message))
	p.publish(send, f)
	if !c.awaitPublishRoom() {
		return c.ctx.Err()
	}
	return nil
}

func (c *conn) handleCloseProducer(req *pb.CommandCloseProducer) {
	p, ok := c.producerFor(req.GetProducerId())
	if ok && p.pacer != nil {
		// Behind the SENDs it waits for (publishrate.go).
		p.pacer.push(pacedItem{closeReq: req})
		return
	}
	c.closeProducer(p, req)
}

// closeProducer closes p (nil: none by that id) for the client, after
// every receipt it owes, and answers the request.
func (c *conn) closeProducer(p *producer, req *pb.CommandCloseProducer) {
	if p != nil && c.forgetProducer(p) {
		p.closed()
		p.waitDone(c.ctx)
	}
	c.sendSuccess(req.GetRequestId())
}

func (c *conn) holdsProducer(p *producer) bool {
	q, ok := c.producerFor(p.id)
	return ok && q == p
}

func (c *conn) producerFor(id uint64) (*producer, bool) { return registered(c, c.mu.producers, id) }

func (c *conn) addProducer(p *producer) (taken bool, full error) {
	taken, full = register(c, c.mu.producers, p.id, p, c.srv.cfg.MaxProducersPerConnection, "producers")
	if !taken && full == nil {
		c.mu.Lock()
		delete(c.mu.dropping, p.id) // back: a SEND for it is its own again
		c.mu.Unlock()
	}
	return taken, full
}

func (c *conn) forgetProducer(p *producer) bool { return unregister(c, c.mu.producers, p.id, p) }

// startRelease begins the broker's close of p: it forgets p, as
// forgetProducer does, and reports whether p was still registered. Its
// SENDs are dropped from here (handleSend) until finishRelease has queued
// its CLOSE_PRODUCER: one read in between, found neither registered nor
// dropped, would close the connection before the CLOSE_PRODUCER, and the
// client, told nothing of where the topic went, would look it up, perhaps
// only through this broker as it drains.
func (c *conn) startRelease(p *producer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !unregisterLocked(c.mu.producers, p.id, p) {
		return false
	}
	c.mu.dropping[p.id] = true
	return true
}

// finishRelease queues the CLOSE_PRODUCER (closeCmd) of producer id, whose
// release startRelease began. A SEND that crosses it on the wire is then
// the client's error, and closes the connection (handleSend), unless the
// CLOSE_PRODUCER sends the client to another broker or region (elsewhere): the
// producer cannot register here again ahead of its late SENDs, which stay
// dropped, and the connection stays for the client's other producers and
// consumers.
func (c *conn) finishRelease(id uint64, closeCmd *pb.BaseCommand, elsewhere bool) {
	c.mu.Lock()
	full := c.queue(closeCmd) // never waits
	if !elsewhere {
		delete(c.mu.dropping, id)
	}
	c.mu.Unlock()
	if full != "" {
		c.closeNotReading(full)
	}
}

// sendsDropped reports whether producer id's SENDs are dropped (see
// dropping).
func (c *conn) sendsDropped(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.dropping[id]
}

// awaitReceipts waits, within ctx, until every SEND the producer took has
// been answered (or the producer has ended).
func (p *producer) awaitReceipts(ctx context.Context) error {
	for p.owed.sends.Load() > 0 {
		select {
		case <-p.receipted:
		case <-p.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("producer %s: %d receipts still owed: %w", p.name, p.owed.sends.Load(), ctx.Err())
		}
	}
	return nil
}
