package replicator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Worker runs a region's replication tasks that it holds. Its goroutine
// (loop) owns the set of tasks: it alone claims task keys, starts and
// stops tasks; each task's own goroutine owns that task's cursor.
//
// Claiming: every worker registers under a lease and, every ScanInterval
// (or sooner, on a policy change), lists the region's topics, the live
// workers and the held task keys. A task without a holder is claimed by
// create-if-absent under the worker's lease: at once by its preferred
// worker (rendezvous hashing of its topic over the live workers, so topics
// spread evenly and a topic's tasks share one tail), by any worker once it
// has gone without a holder for ClaimGrace. When a
// worker dies its lease ends, its keys vanish, and the others take its tasks
// within LeaseTTL plus a scan.
type Worker struct {
	cfg      Config
	store    meta.Store
	ledgers  *ledger.Client
	policies *global.Cache
	log      *slog.Logger
	metrics  *workerMetrics // nil when disabled

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when loop returns

	states     *stateBoard   // the tasks' state, published by its own goroutine
	statesDone chan struct{} // closed when that goroutine returns

	// Owned by loop.
	tasks    map[taskID]*task
	orphaned map[taskID]time.Time // since when a needed task has had no holder

	mu   sync.Mutex // guards lost
	lost []*task    // tasks that found another holder; loop forgets them

	// registered is true while the worker is listed under a live lease in
	// its region's store (Ready).
	registered atomic.Bool
}

// Start registers a worker and starts its loop. ledgers reads the region's
// bookies; policies is the watched global configuration. The caller owns
// them; Close stops the worker before they may be closed.
func Start(ctx context.Context, cfg Config, store meta.Store, ledgers *ledger.Client, policies *global.Cache, log *slog.Logger) (*Worker, error) {
	if cfg.WorkerID == "" {
		var b [6]byte
		rand.Read(b[:])
		cfg.WorkerID = "replicator-" + hex.EncodeToString(b[:])
	}
	cfg.Tailer.Region = cfg.Region
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	metrics, err := newWorkerMetrics(cfg)
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, store: store, ledgers: ledgers, policies: policies, metrics: metrics,
		log: log.With("worker", cfg.WorkerID), done: make(chan struct{}),
		tasks: map[taskID]*task{}, orphaned: map[taskID]time.Time{}, statesDone: make(chan struct{})}
	w.states = newStateBoard(cfg.Region, cfg.WorkerID, store, cfg.StatsInterval, cfg.Clock, w.log)
	// The lease lives as long as the worker, not as long as ctx.
	w.ctx, w.cancel = context.WithCancel(context.Background())
	lease, err := w.register(w.ctx)
	if err != nil {
		w.cancel()
		return nil, err
	}
	go w.loop(lease)
	go func() {
		defer close(w.statesDone)
		w.states.run(w.ctx)
	}()
	w.log.Info("replicator worker started")
	return w, nil
}

// Ready reports whether the worker is registered in its region's store
// under a live lease, which its keep-alives renew: the worker can claim
// tasks, and its peers see it. A worker holding no task (a standby) is
// ready; a remote region's outage never makes it unready, since that
// stalls only the tasks replicating there. It turns false while the lease
// is lost (the region's etcd unreachable for longer than LeaseTTL) until
// the worker registers again, and once it closes.
func (w *Worker) Ready() bool { return w.registered.Load() }

// ID is the worker's id in its region.
func (w *Worker) ID() string { return w.cfg.WorkerID }

func (w *Worker) workerKey() string {
	return meta.RegionKey(w.cfg.Region, "replicator-workers", w.cfg.WorkerID)
}

// register grants the worker's lease, kept alive until ctx ends, and writes
// its registration under it. A registration already under this id is waited
// out while its lease lapses (awaitLapsedRegistration): a worker restarted at
// once after a crash, under a stable --worker-id, finds its previous run's.
func (w *Worker) register(ctx context.Context) (meta.Lease, error) {
	lease, err := w.store.Grant(ctx, w.cfg.LeaseTTL)
	if err != nil {
		return nil, fmt.Errorf("replicator: lease: %w", err)
	}
	_, err = w.store.Create(ctx, w.workerKey(), []byte(w.cfg.WorkerID), lease.ID())
	if errors.Is(err, meta.ErrExists) {
		if err = w.awaitLapsedRegistration(ctx); err == nil {
			_, err = w.store.Create(ctx, w.workerKey(), []byte(w.cfg.WorkerID), lease.ID())
		}
	}
	if err != nil {
		w.store.Revoke(context.WithoutCancel(ctx), lease.ID())
		if errors.Is(err, meta.ErrExists) {
			return nil, fmt.Errorf("%w: %s", ErrWorkerExists, w.cfg.WorkerID)
		}
		return nil, fmt.Errorf("replicator: register worker: %w", err)
	}
	w.states.setLease(lease.ID())
	w.registered.Store(true)
	return lease, nil
}

// lapseGrace is how long past the server's remaining time to live a
// registration is waited for: etcd deletes a lapsed lease's keys on its
// leader's next expiry check, not at the instant it lapses.
const lapseGrace = time.Second

// awaitLapsedRegistration waits for the registration under this worker's
// id to go, for at most what the server says its lease has left (plus
// lapseGrace). A dead run's lease is renewed by nobody and lapses within
// that time; a live worker's is renewed, so its key outlasts the wait and
// the answer is ErrExists. This is how a bookie restarted under ZooKeeper
// waits for its previous session's znode to expire, rather than exiting and
// leaving a supervisor to restart it until the lease is gone.
func (w *Worker) awaitLapsedRegistration(ctx context.Context) error {
	key := w.workerKey()
	kv, err := w.store.Get(ctx, key)
	switch {
	case errors.Is(err, meta.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	remaining, _, err := w.store.TimeToLive(ctx, kv.Lease)
	switch {
	case errors.Is(err, meta.ErrLeaseNotFound):
		return nil
	case err != nil:
		return err
	}
	w.log.Warn("a worker with this id is registered; waiting for its lease to lapse, as a restart after a crash finds it",
		"lease", fmt.Sprintf("%x", kv.Lease), "remaining", remaining)
	wctx, cancel := context.WithTimeout(ctx, remaining+lapseGrace)
	defer cancel()
	for resp := range w.store.Watch(wctx, key, kv.ModRevision+1) {
		if resp.Err != nil {
			if wctx.Err() != nil {
				break // the wait is over, not the store
			}
			return resp.Err
		}
		for _, ev := range resp.Events {
			if ev.KV.Key == key && ev.Type == meta.EventDelete {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return meta.ErrExists // renewed past its time: a live worker holds it
}

// loop reconciles the held tasks with the needed ones until Close. When the
// lease is lost (etcd unreachable for longer than its TTL), every task
// stops, since its keys are gone and another worker may hold them, and the
// worker registers again under a new lease.
func (w *Worker) loop(lease meta.Lease) {
	defer close(w.done)
	sub := w.policies.Subscribe()
	defer sub.Close()
	changed := make(chan struct{}, 1)
	var subs sync.WaitGroup
	subs.Go(func() {
		for {
			if _, err := sub.Next(w.ctx); err != nil {
				return
			}
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	defer subs.Wait()
	defer w.cancel()
	tick := w.cfg.Clock.NewTicker(w.cfg.ScanInterval)
	defer tick.Stop()
	for {
		w.reconcile(lease)
		select {
		case <-w.ctx.Done():
			w.registered.Store(false)
			w.stopAll()
			cctx, cancel := context.WithTimeout(context.Background(), w.cfg.LeaseTTL)
			w.store.Revoke(cctx, lease.ID()) // frees the tasks for the others at once
			cancel()
			return
		case <-lease.Done():
			w.registered.Store(false)
			w.log.Warn("replicator worker lease lost; stopping its tasks and registering again")
			w.stopAll()
			for {
				var err error
				if lease, err = w.register(w.ctx); err == nil {
					break
				}
				select {
				case <-w.ctx.Done():
					return
				case <-w.cfg.Clock.After(w.cfg.ScanInterval):
				}
			}
		case <-tick.Chan():
		case <-changed:
		}
	}
}

// reconcile is one scan: stop the tasks no longer needed or no longer
// ours, and claim the needed ones without a holder.
func (w *Worker) reconcile(lease meta.Lease) {
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.LeaseTTL)
	defer cancel()
	w.forgetLost()
	topics, err := w.topics(ctx)
	if err != nil {
		w.log.Warn("replicator: listing the region's topics failed", "err", err)
		return
	}
	workers, err := w.names(ctx, meta.Prefix(meta.RegionKey(w.cfg.Region, "replicator-workers")))
	if err != nil {
		w.log.Warn("replicator: listing the workers failed", "err", err)
		return
	}
	held, _, err := w.store.List(ctx, meta.Prefix(meta.RegionKey(w.cfg.Region, "replicators")))
	if err != nil {
		w.log.Warn("replicator: listing the task keys failed", "err", err)
		return
	}
	held = w.dropStaleClaims(ctx, lease, held)
	holders := make(map[string]meta.KV, len(held))
	for _, kv := range held {
		holders[kv.Key] = kv
	}
	needed := plan(w.cfg.Region, topics, func(topic string) ([]string, bool) {
		eff, ok := w.effective(topic)
		return eff.ReplicationClusters, ok
	})
	isNeeded := make(map[taskID]bool, len(needed))
	for _, id := range needed {
		isNeeded[id] = true
	}
	for id, t := range w.tasks {
		kv, ok := holders[id.key(w.cfg.Region)]
		switch {
		case !isNeeded[id]:
			w.log.Info("replication task no longer needed; stopping it", "task", id.String())
			w.stop(t)
			w.release(ctx, t)
		case !ok || kv.Lease != lease.ID():
			w.log.Warn("replication task key lost; stopping the task", "task", id.String())
			w.stop(t)
		}
	}
	now := w.cfg.Clock.Now()
	for _, id := range needed {
		if _, running := w.tasks[id]; running {
			delete(w.orphaned, id)
			continue
		}
		if _, ok := holders[id.key(w.cfg.Region)]; ok {
			delete(w.orphaned, id)
			continue
		}
		since, seen := w.orphaned[id]
		if !seen {
			w.orphaned[id], since = now, now
		}
		if preferredWorker(id, workers) != w.cfg.WorkerID && now.Sub(since) < w.cfg.ClaimGrace {
			continue
		}
		rev, err := w.store.Create(ctx, id.key(w.cfg.Region), []byte(w.cfg.WorkerID), lease.ID())
		if err != nil {
			if !errors.Is(err, meta.ErrExists) {
				w.log.Warn("replicator: claiming a task failed", "task", id.String(), "err", err)
			}
			continue
		}
		delete(w.orphaned, id)
		w.startTask(id, rev)
	}
	for id := range w.orphaned {
		if !isNeeded[id] {
			delete(w.orphaned, id)
		}
	}
}

// effective is topic's effective policy from the watched global
// configuration; false when it cannot be resolved (a bad name, or its
// namespace is gone: then the topic needs no replication).
func (w *Worker) effective(topic string) (global.Effective, bool) {
	tn, err := topology.ParseTopicName(topic)
	if err != nil {
		return global.Effective{}, false
	}
	eff, err := w.policies.Resolve(tn, global.DefaultBrokerDefaults())
	return eff, err == nil
}

// topics are the region's topics: those with a managed-ledger record.
func (w *Worker) topics(ctx context.Context) ([]string, error) {
	return w.names(ctx, meta.Prefix(meta.RegionKey(w.cfg.Region, "mledgers")))
}

// names lists prefix and returns the last segment of each key, unescaped.
func (w *Worker) names(ctx context.Context, prefix string) ([]string, error) {
	kvs, _, err := w.store.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		if n, err := meta.Name(kv.Key); err == nil {
			names = append(names, n)
		}
	}
	return names, nil
}

func (w *Worker) startTask(id taskID, rev int64) {
	ctx, cancel := context.WithCancel(w.ctx)
	t := &task{id: id, w: w, rev: rev, log: taskLogger(w.log, id), cancel: cancel, done: make(chan struct{}),
		stats: newTaskStats(id)}
	w.states.add(t.stats)
	w.tasks[id] = t
	t.log.Info("replication task claimed")
	go t.run(ctx)
}

// stop ends t and waits for it: its last cursor write is done when stop
// returns.
func (w *Worker) stop(t *task) {
	t.cancel()
	<-t.done
	delete(w.tasks, t.id)
}

func (w *Worker) stopAll() {
	for _, t := range w.tasks {
		w.stop(t)
	}
}

// release gives up a task that is no longer needed (its remote left the
// topic's replication clusters): its cursor is deleted, so that it no
// longer holds the topic's retention, then its key.
func (w *Worker) release(ctx context.Context, t *task) {
	err := mledger.DeleteExternalCursor(ctx, w.store, w.cfg.Region, t.id.Topic, CursorPrefix+t.id.Remote)
	if err != nil && !errors.Is(err, meta.ErrNotFound) {
		w.log.Warn("replicator: deleting the cursor of a removed region failed", "task", t.id.String(), "err", err)
	}
	if err := w.store.Delete(ctx, t.id.key(w.cfg.Region), t.rev); err != nil && !errors.Is(err, meta.ErrNotFound) {
		w.log.Warn("replicator: deleting a task key failed", "task", t.id.String(), "err", err)
	}
}

// dropStaleClaims deletes the task keys held under this worker's lease
// for tasks it does not run, and returns the others. Such a key is left
// when a task stopped on ErrOwnershipLost without another worker taking it:
// its cursor was deleted under it (its region removed, by the topic's
// owner). Left in place it would keep every worker, this one included,
// from claiming the task again if the region comes back.
func (w *Worker) dropStaleClaims(ctx context.Context, lease meta.Lease, held []meta.KV) []meta.KV {
	running := make(map[string]bool, len(w.tasks))
	for id := range w.tasks {
		running[id.key(w.cfg.Region)] = true
	}
	kept := held[:0:0]
	for _, kv := range held {
		if kv.Lease == lease.ID() && !running[kv.Key] {
			if err := w.store.Delete(ctx, kv.Key, kv.ModRevision); err != nil && !errors.Is(err, meta.ErrNotFound) {
				w.log.Warn("replicator: deleting a stale task key failed", "key", kv.Key, "err", err)
			}
			continue
		}
		kept = append(kept, kv)
	}
	return kept
}

// lostTask is how a task tells its worker that another worker holds it
// now; the loop forgets it at its next scan.
func (w *Worker) lostTask(t *task) {
	w.mu.Lock()
	w.lost = append(w.lost, t)
	w.mu.Unlock()
}

func (w *Worker) forgetLost() {
	w.mu.Lock()
	lost := w.lost
	w.lost = nil
	w.mu.Unlock()
	for _, t := range lost {
		if w.tasks[t.id] == t {
			delete(w.tasks, t.id)
		}
	}
}

// Tasks are the tasks this worker runs, as "topic -> remote", sorted.
// It is for tests and status pages; it reads the loop's state only
// through the store's view, so it lists the keys this worker holds.
func (w *Worker) Tasks(ctx context.Context) ([]string, error) {
	kvs, _, err := w.store.List(ctx, meta.Prefix(meta.RegionKey(w.cfg.Region, "replicators")))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, kv := range kvs {
		if string(kv.Value) == w.cfg.WorkerID {
			out = append(out, kv.Key)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Close stops every task (each writes its cursor one last time), revokes
// the worker's lease so that the others take its tasks at once, and waits.
func (w *Worker) Close() error {
	w.cancel()
	<-w.done
	<-w.statesDone
	return nil
}
