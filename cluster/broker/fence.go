package broker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Fences (global/fence.go): a region cut off for some topics of a
// namespace, by a drill. For a topic a fence covers:
//
//   - in the fenced region, the topic is unloaded (its producers and
//     consumers get CLOSE_PRODUCER and CLOSE_CONSUMER, replication
//     producers into it included), and lookups, loads and therefore
//     PRODUCER and SUBSCRIBE are refused with ServiceNotReady. That is the
//     error on which pulsar-client-go closes the connection and looks the
//     topic up again, through the next host of its service URL: a client
//     whose URL lists several regions reconnects elsewhere, as it would
//     after the region's loss. Replication into the region stops with
//     those refusals.
//   - in every other region, the replication producer from the fenced
//     region (meridian.repl.<region>) is closed and refused, so
//     replication out of it stops too.
//
// Replication resumes by itself once the fence is gone: the replicator
// retries a refused remote within its RetryMax. Every other topic, of the
// namespace or not, is untouched.
//
// The data path never waits on the global store (DESIGN §3): the fences
// are read from the store and then watched by one goroutine (run), and the
// checks read its last copy.

// fenceResync is how often the loaded topics are checked against the
// fences even without a change: a topic loaded (or a replication producer
// attached) in the moment between a fence's arrival and its pass is closed
// by the next one.
const fenceResync = time.Second

// fences is this broker's copy of the global store's fences. run owns the
// refreshing; mu guards byKey for the readers.
type fences struct {
	s  *Service
	mu struct {
		sync.RWMutex
		byKey map[string]global.Fence // by etcd key
	}
}

// covering returns the fence that cuts region off for t, if any.
func (f *fences) covering(region string, t topology.TopicName) (global.Fence, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, fc := range f.mu.byKey {
		if fc.Covers(region, t) {
			return fc, true
		}
	}
	return global.Fence{}, false
}

// refuseFenced is the error for a client of t in this broker's region while a
// fence cuts it off, nil otherwise.
func (s *Service) refuseFenced(t topology.TopicName) error {
	if s.fences == nil {
		return nil
	}
	if fc, ok := s.fences.covering(s.cfg.Region, t); ok {
		return fmt.Errorf("%w: topic %s is fenced in region %s by %s (fence %s); try another region",
			wire.ErrServiceNotReady, t, s.cfg.Region, fc.Holder, fc.Name)
	}
	return nil
}

// refuseFencedSource is the error for a producer named name on t when it
// replicates from a region a fence cuts off for t, nil otherwise.
func (s *Service) refuseFencedSource(t topology.TopicName, name string) error {
	from, ok := strings.CutPrefix(name, ReplicationProducerPrefix)
	if !ok || s.fences == nil {
		return nil
	}
	if fc, ok := s.fences.covering(from, t); ok {
		return fmt.Errorf("%w: replication of %s from region %s is stopped by fence %s", wire.ErrServiceNotReady, t, from, fc.Name)
	}
	return nil
}

// run reads the fences and follows their changes until the Service
// closes, applying them to the loaded topics on each change and every
// fenceResync. A watch that fails is replaced by a fresh read.
func (f *fences) run() {
	defer f.s.wg.Done()
	tick := f.s.clock.NewTicker(fenceResync)
	defer tick.Stop()
	for f.s.ctx.Err() == nil {
		rev, err := f.read()
		if err != nil {
			f.s.log.Warn("reading the fences failed; keeping the last known", "err", err)
			select {
			case <-tick.Chan():
				continue
			case <-f.s.ctx.Done():
				return
			}
		}
		f.follow(rev, tick)
	}
}

// follow applies changes from the watch from rev+1 on, until the watch
// ends or the Service closes.
func (f *fences) follow(rev int64, tick clockwork.Ticker) {
	ctx, cancel := context.WithCancel(f.s.ctx)
	defer cancel()
	changes := f.s.gstore.WatchFences(ctx, rev+1)
	for {
		select {
		case resp, open := <-changes:
			if !open || resp.Err != nil {
				return
			}
			f.applyEvents(resp.Events)
		case <-tick.Chan():
			f.apply()
		case <-ctx.Done():
			return
		}
	}
}

// read replaces the list with the store's and applies it.
func (f *fences) read() (int64, error) {
	list, rev, err := f.s.gstore.Fences(f.s.ctx, "", "")
	if err != nil {
		return 0, err
	}
	byKey := make(map[string]global.Fence, len(list))
	for _, fc := range list {
		byKey[f.s.gstore.FenceKey(fc)] = fc
	}
	f.mu.Lock()
	f.mu.byKey = byKey
	f.mu.Unlock()
	f.apply()
	return rev, nil
}

// applyEvents updates the list from one watch batch and applies it.
func (f *fences) applyEvents(events []meta.Event) {
	f.mu.Lock()
	for _, ev := range events {
		key := ev.KV.Key
		delete(f.mu.byKey, key)
		if ev.Type != meta.EventPut {
			continue
		}
		fc, err := f.s.gstore.DecodeFence(ev.KV)
		if err != nil {
			f.s.log.Error("fence not readable; ignored", "key", key, "err", err)
			continue
		}
		f.mu.byKey[key] = fc
	}
	f.mu.Unlock()
	f.apply()
}

// apply unloads the loaded topics fenced in this region and closes the
// replication producers from fenced regions on the others.
func (f *fences) apply() {
	s := f.s
	for _, t := range s.loadedTopics() {
		if s.refuseFenced(t.name) != nil {
			s.log.Info("unloading a topic fenced in this region", "topic", t.Name())
			s.Unload(t.name)
			continue
		}
		t.mu.Lock()
		var cut []*producer
		for p := range t.mu.producers {
			if p.repl && s.refuseFencedSource(t.name, p.name) != nil {
				cut = append(cut, p)
			}
		}
		t.mu.Unlock()
		for _, p := range cut {
			s.log.Info("closing the replication producer from a fenced region", "topic", t.Name(), "producer", p.name)
			p.disconnect()
		}
	}
}
