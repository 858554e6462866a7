package replicator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/mledger"
)

// taskStats is what one task reports of itself: written by the task's
// goroutines, read by the worker's state board when it publishes.
type taskStats struct {
	mu struct {
		sync.Mutex
		st mledger.ReplicationTaskState
		// The counters at the previous snapshot, for the rates.
		prevAt                       time.Time
		prevMsgs, prevBytes, prevExp int64
	}
}

func newTaskStats(id taskID) *taskStats {
	s := &taskStats{}
	s.mu.st = mledger.ReplicationTaskState{Topic: id.Topic, Remote: id.Remote}
	return s
}

// connected records that the producer to the remote is open, to broker.
func (s *taskStats) connected(broker string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.st.Connected, s.mu.st.OutboundConnection, s.mu.st.OutboundConnectedSince = true, broker, at
}

// disconnected records that the producer is closed.
func (s *taskStats) disconnected() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.st.Connected, s.mu.st.OutboundConnection, s.mu.st.OutboundConnectedSince = false, "", time.Time{}
}

// failed records an attempt's failure as the task's lastError.
func (s *taskStats) failed(err error, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.st.LastError, s.mu.st.LastErrorAt = err.Error(), at
}

// acknowledged counts an entry of msgs messages and n bytes that the
// remote stored.
func (s *taskStats) acknowledged(msgs, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.st.MsgOutCounter += int64(msgs)
	s.mu.st.BytesOutCounter += int64(n)
}

// expired counts msgs messages skipped because their TTL had passed.
func (s *taskStats) expired(msgs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.st.MsgExpiredCounter += int64(msgs)
}

// markDeleted records the cursor's position once written.
func (s *taskStats) markDeleted(p mledger.Position) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.st.MarkDelete = p
}

// snapshot returns the state at now, with the rates since the previous
// snapshot.
func (s *taskStats) snapshot(now time.Time) mledger.ReplicationTaskState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.st
	if dt := now.Sub(s.mu.prevAt).Seconds(); !s.mu.prevAt.IsZero() && dt > 0 {
		st.MsgRateOut = float64(st.MsgOutCounter-s.mu.prevMsgs) / dt
		st.MsgThroughputOut = float64(st.BytesOutCounter-s.mu.prevBytes) / dt
		st.MsgRateExpired = float64(st.MsgExpiredCounter-s.mu.prevExp) / dt
	}
	s.mu.prevAt, s.mu.prevMsgs, s.mu.prevBytes, s.mu.prevExp = now, st.MsgOutCounter, st.BytesOutCounter, st.MsgExpiredCounter
	return st
}

// stateBoard publishes the state of a worker's tasks into the worker's one
// record (mledger.ReplicationStateKey), at most once per interval and only
// when it changed, under the worker's current lease: a worker that dies
// takes its record with it. Its goroutine (run) is owned by the worker,
// which stops it and waits.
type stateBoard struct {
	region, worker string
	store          meta.Store
	interval       time.Duration
	clock          clockwork.Clock
	log            *slog.Logger

	mu struct {
		sync.Mutex
		lease meta.LeaseID // the worker's current lease; NoLease before it has one
		tasks map[*taskStats]struct{}
	}

	// Owned by run.
	written      []byte // the tasks last written, to skip writes of no change
	rev          int64  // the record's ModRevision; 0 when it must be created
	writtenLease meta.LeaseID
}

func newStateBoard(region, worker string, store meta.Store, interval time.Duration, clock clockwork.Clock, log *slog.Logger) *stateBoard {
	b := &stateBoard{region: region, worker: worker, store: store, interval: interval, clock: clock, log: log}
	b.mu.tasks = map[*taskStats]struct{}{}
	return b
}

// setLease makes the board write under lease from its next publish on.
func (b *stateBoard) setLease(lease meta.LeaseID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.lease = lease
}

func (b *stateBoard) add(s *taskStats) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.tasks[s] = struct{}{}
}

func (b *stateBoard) remove(s *taskStats) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.mu.tasks, s)
}

// run publishes every interval until ctx ends.
func (b *stateBoard) run(ctx context.Context) {
	tick := b.clock.NewTicker(b.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
			if err := b.publish(ctx); err != nil && ctx.Err() == nil {
				b.log.Warn("replicator: publishing the tasks' state failed", "err", err)
			}
		}
	}
}

// publish writes the record if the tasks' state changed since the last
// write, or the lease did. The record is created under the lease, then
// updated by CAS on its revision (keeping the lease); a conflict (the
// record vanished with a lost lease) makes the next publish create it
// anew.
func (b *stateBoard) publish(ctx context.Context) error {
	now := b.clock.Now()
	b.mu.Lock()
	lease := b.mu.lease
	tasks := make([]mledger.ReplicationTaskState, 0, len(b.mu.tasks))
	for s := range b.mu.tasks {
		tasks = append(tasks, s.snapshot(now))
	}
	b.mu.Unlock()
	if lease == meta.NoLease {
		return nil
	}
	slices.SortFunc(tasks, func(x, y mledger.ReplicationTaskState) int {
		return strings.Compare(x.Topic+"\x00"+x.Remote, y.Topic+"\x00"+y.Remote)
	})
	enc, err := json.Marshal(tasks)
	if err != nil {
		return err
	}
	if lease != b.writtenLease {
		b.rev = 0
	}
	if b.rev != 0 && bytes.Equal(enc, b.written) {
		return nil
	}
	rec, err := mledger.EncodeReplicationState(mledger.ReplicationWorkerState{Worker: b.worker, At: now, Tasks: tasks})
	if err != nil {
		return err
	}
	key := mledger.ReplicationStateKey(b.region, b.worker)
	if b.rev == 0 {
		b.rev, err = b.store.Create(ctx, key, rec, lease)
		if errors.Is(err, meta.ErrExists) {
			// Ours from before (this lease's): update it in place.
			var kv meta.KV
			kv, err = b.store.Get(ctx, key)
			switch {
			case err != nil:
			case kv.Lease != lease:
				err = fmt.Errorf("record %s is under lease %x, not the worker's %x", key, kv.Lease, lease)
			default:
				b.rev, err = b.store.Update(ctx, key, rec, kv.ModRevision)
			}
		}
	} else {
		b.rev, err = b.store.Update(ctx, key, rec, b.rev)
	}
	if err != nil {
		b.rev = 0
		return err
	}
	b.written, b.writtenLease = enc, lease
	return nil
}
