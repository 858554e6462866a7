package replicator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"golang.org/x/sync/errgroup"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/replicator/remote"
	"github.com/meridian-mq/meridian/telemetry"
)

// task replicates one source topic to one remote region while its worker
// holds the task's key. One goroutine (run) owns it and is the only writer
// of the topic's meridian.repl.<remote> cursor; every write also requires
// the task key to be at the revision the worker claimed it at, so a worker
// that froze and resumed after another took the task over writes nothing
// (DESIGN §6).
type task struct {
	id     taskID
	w      *Worker
	rev    int64 // the task key's revision when claimed: the guard of every cursor write
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
	stats  *taskStats    // what the worker publishes of the task
}

// run replicates until ctx ends or another worker takes the task, retrying
// every failure (the remote unreachable or refusing, a read error) with
// capped exponential backoff with jitter. Nothing is lost on a failure: the
// cursor has moved only past entries the remote acknowledged, and the next
// attempt starts from it.
func (t *task) run(ctx context.Context) {
	defer close(t.done)
	defer t.w.states.remove(t.stats)
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(t.w.cfg.RetryInitial), backoff.WithMaxInterval(t.w.cfg.RetryMax),
		backoff.WithMaxElapsedTime(0), backoff.WithClockProvider(t.w.cfg.Clock))
	for {
		progressed, err := t.replicate(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, mledger.ErrOwnershipLost):
			t.log.Warn("replication task taken over by another worker; stopping it here", "err", err)
			t.w.lostTask(t)
			return
		}
		if progressed {
			b.Reset()
		}
		t.stats.failed(err, t.w.cfg.Clock.Now())
		wait := b.NextBackOff()
		t.log.Warn("replication task failed; retrying", "err", err, "retry_in", wait.Round(time.Millisecond))
		select {
		case <-t.w.cfg.Clock.After(wait):
		case <-ctx.Done():
			return
		}
	}
}

// pending is an entry read and either sent to the remote (receipt set) or
// not to be sent (it came by replication, or its replicate_to leaves this
// remote out), in source order.
type pending struct {
	pos         mledger.Position
	receipt     *remote.Receipt // nil: nothing to wait for
	msgs, bytes int             // of the entry sent, for the stats
	trace       *replicateTrace // nil: not traced
	read        time.Time       // when its batch was read, for the read-to-receipt latency
}

// replicate is one attempt: open the cursor, the tailer and the remote
// producer, then send entries in order while a second goroutine waits for
// their receipts in the same order and moves the cursor past them. It
// returns when either fails, or ctx ends; progressed says whether the
// cursor moved.
func (t *task) replicate(ctx context.Context) (progressed bool, err error) {
	w := t.w
	// The topic's owner creates the cursor, where replication must start.
	cursor, err := t.openCursor(ctx)
	if err != nil {
		return false, err
	}
	t.stats.markDeleted(cursor.MarkDeletePosition())
	tail, err := mledger.OpenTailer(ctx, w.cfg.Tailer, w.ledgers, w.store, t.id.Topic, cursor.MarkDeletePosition())
	if err != nil {
		return false, fmt.Errorf("read %s from the bookies: %w", t.id.Topic, err)
	}
	defer tail.Close()
	cluster, ok := w.policies.Cluster(t.id.Remote)
	if !ok {
		return false, fmt.Errorf("%w: %s", ErrNoCluster, t.id.Remote)
	}
	pcfg := w.cfg.Remote
	pcfg.SourceRegion, pcfg.Topic, pcfg.Cluster, pcfg.Incarnation = w.cfg.Region, t.id.Topic, cluster, tail.Incarnation()
	pcfg.Logger, pcfg.Clock = t.log, w.cfg.Clock
	if w.cfg.Schemas != nil {
		// Read at each attempt: a schema added since the last one fails
		// that attempt's Send (remote.ErrSchema), and the next registers it.
		if pcfg.Schemas, err = w.cfg.Schemas.Schemas(ctx, t.id.Topic); err != nil {
			return false, fmt.Errorf("read the schemas of %s: %w", t.id.Topic, err)
		}
		if pcfg.Schemas == nil {
			pcfg.Schemas = []remote.SourceSchema{}
		}
	}
	prod, err := remote.Open(ctx, pcfg)
	if err != nil {
		return false, fmt.Errorf("connect to %s: %w", t.id.Remote, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Remote.OperationTimeout)
		defer cancel()
		prod.Close(cctx)
	}()
	t.stats.connected(prod.Broker(), w.cfg.Clock.Now())
	defer t.stats.disconnected()
	t.log.Info("replicating", "from", cursor.MarkDeletePosition().String())

	queue := make(chan pending, w.cfg.Remote.MaxInFlightEntries)
	g, gctx := errgroup.WithContext(ctx)
	// A producer that stops (its connection lost) ends the attempt at
	// once, even with nothing in flight to fail: the stats then say
	// disconnected, and the next attempt reconnects after its backoff
	// rather than at the next entry. The sender stops reading; what was in
	// flight fails in acknowledge, whose error says which entry.
	readCtx, stopReading := context.WithCancel(gctx)
	defer stopReading()
	g.Go(func() error {
		select {
		case <-prod.Done():
			stopReading()
		case <-readCtx.Done():
		}
		return nil
	})
	g.Go(func() error {
		defer close(queue)
		err := t.send(gctx, readCtx, tail, prod, queue)
		if gctx.Err() == nil && readCtx.Err() != nil {
			return nil // stopped for the producer: see prod.Err below
		}
		return err
	})
	g.Go(func() error {
		// On the task's ctx, not the group's: when the sender stops (a
		// read error, say), the receipts already queued are still waited
		// for and the cursor moves past them; the queue's close ends it.
		moved, err := t.acknowledge(ctx, cursor, queue)
		progressed = moved
		return err
	})
	if err := g.Wait(); err != nil {
		return progressed, err
	}
	return progressed, prod.Err() // nil unless the producer stopped with nothing in flight
}

// send reads entries in order and hands each to the remote producer (or
// marks it to skip), queueing it for acknowledge. It keeps to the topic's
// replicator dispatch rate (dispatchLimiter), and skips the messages whose
// message TTL has passed (ttlPolicy), as Pulsar expires them on a
// replicator's cursor. It reads, waits and sends on readCtx, and queues on
// ctx, which readCtx is within: an entry handed to the producer is always
// queued while acknowledge runs, so that its failure names it.
func (t *task) send(ctx, readCtx context.Context, tail *mledger.Tailer, prod *remote.Producer, queue chan<- pending) error {
	limit := t.dispatchLimiter()
	ttl := t.messageTTL()
	for {
		entries, err := tail.Next(readCtx, t.w.cfg.ReadBatch)
		if err != nil {
			return err
		}
		read := time.Now()
		for _, e := range entries {
			p := pending{pos: e.Position, read: read}
			_, msg, err := e.Split()
			if err != nil {
				return fmt.Errorf("entry %v of %s: %w", e.Position, t.id.Topic, err)
			}
			md, err := wire.DecodeMessageMetadata(msg)
			if err != nil {
				return fmt.Errorf("entry %v of %s: %w", e.Position, t.id.Topic, err)
			}
			msgs := int(max(md.GetNumMessagesInBatch(), 1))
			if limit.relative() { // only then is the publish time needed here
				if published, err := mledger.EntryTimestamp(e.Data); err == nil {
					limit.observe(published, msgs, len(e.Data))
				}
			}
			switch {
			case !forwardTo(md, t.id.Remote): // not for this remote: passed over
			case ttl.expired(e, t.w.cfg.Clock.Now()):
				t.stats.expired(msgs)
			default:
				if err := limit.wait(readCtx, messagesIn(md.GetNumMessagesInBatch()), len(e.Data)); err != nil {
					return err
				}
				sendCtx, rt := t.startReplicateTrace(readCtx, e.Position, md)
				if p.receipt, err = prod.Send(sendCtx, e.Data); err != nil {
					rt.finish(err)
					return err
				}
				p.trace = rt
				p.msgs, p.bytes = msgs, len(e.Data)
			}
			select {
			case queue <- p:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// acknowledge waits for the receipts in order and moves the cursor past
// each entry the remote stored (or that was not to be sent). It writes the
// cursor at most once per CursorPersistInterval, so an etcd write covers
// every entry acknowledged meanwhile, and once more before it returns: after
// a crash at most that interval's entries are sent again, and the remote
// drops them as duplicates.
func (t *task) acknowledge(ctx context.Context, cursor *mledger.ExternalCursor, queue <-chan pending) (progressed bool, err error) {
	var last mledger.Position
	dirty := false
	persist := func(ctx context.Context) error {
		if !dirty {
			return nil
		}
		if err := cursor.MarkDelete(ctx, last); err != nil {
			return err
		}
		t.stats.markDeleted(last)
		dirty, progressed = false, true
		return nil
	}
	defer func() {
		// What was acknowledged is kept even when the attempt fails.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.w.cfg.Remote.OperationTimeout)
		defer cancel()
		if perr := persist(cctx); perr != nil && err == nil {
			err = perr
		}
	}()
	received := t.w.metrics.receiptObserver(t.id.Remote)
	timer := t.w.cfg.Clock.NewTimer(0)
	<-timer.Chan()
	armed := false
	for {
		select {
		case p, ok := <-queue:
			if !ok {
				return progressed, ctx.Err()
			}
			if p.receipt != nil && awaitRemoteReceipt {
				_, err := p.receipt.Wait(ctx)
				p.trace.finish(err)
				if err != nil {
					return progressed, err
				}
				t.stats.acknowledged(p.msgs, p.bytes)
				if received != nil {
					received.Observe(time.Since(p.read).Seconds())
				}
			}
			last, dirty = p.pos, true
			if !armed {
				timer.Reset(t.w.cfg.CursorPersistInterval)
				armed = true
			}
		case <-timer.Chan():
			armed = false
			if err := persist(ctx); err != nil {
				return progressed, err
			}
		case <-ctx.Done():
			return progressed, ctx.Err()
		}
	}
}

// taskLogger is the task's logger: its topic and remote under the stable
// task key.
func taskLogger(log *slog.Logger, id taskID) *slog.Logger {
	return log.With(telemetry.KeyTask, id.String(), telemetry.KeyTopic, id.Topic)
}
