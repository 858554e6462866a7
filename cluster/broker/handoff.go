package broker

import (
	"context"
	"log/slog"
	"maps"
	"sync"

	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/topology"
)

// The broker's side of the load manager. The load manager (loadmgr) owns
// bundles and decides when one moves; it reaches the topics loaded here
// only through loadmgr.Topics, which managedTopics implements: a sample of
// their load, the hand-off of one bundle's topics, and the unload of all
// of them when the session lease ends.
//
// A hand-off (loadmgr/handoff.go gives the four steps) is, on this side:
// fence each topic of the bundle (no SEND taken from then on, the taken
// ones persisted and receipted, dispatch stopped), seal it (deduplication
// state and cursors persisted, the managed ledger closed), forget it, let
// the load manager move the bundle's key, and only then tell the clients
// where to go (CLOSE_PRODUCER and CLOSE_CONSUMER with the new owner's
// URLs), waiting until those words are written.

// managedTopics is the Service as its load manager sees it.
type managedTopics struct{ s *Service }

// Sample implements loadmgr.Topics.
func (mt managedTopics) Sample() loadmgr.Sample {
	var sample loadmgr.Sample
	conns := map[*conn]struct{}{}
	for _, t := range mt.s.LoadedTopics() {
		ts := loadmgr.TopicSample{Name: t.name}
		ts.Counters.InMsgs, ts.Counters.InBytes = t.in.msgs.Load(), t.in.bytes.Load()
		t.mu.Lock()
		for p := range t.mu.producers {
			ts.Producers++
			conns[p.c] = struct{}{}
		}
		t.mu.Unlock()
		for _, s := range t.subscriptions() {
			ts.Counters.OutMsgs += s.out.msgs.Load()
			ts.Counters.OutBytes += s.out.bytes.Load()
			s.mu.Lock()
			for _, c := range s.mu.consumers {
				ts.Consumers++
				conns[c.c] = struct{}{}
			}
			s.mu.Unlock()
		}
		sample.Topics = append(sample.Topics, ts)
	}
	sample.Connections = len(conns)
	return sample
}

// HandOff implements loadmgr.Topics: the broker's steps of a hand-off.
func (mt managedTopics) HandOff(ctx context.Context, tenant, ns string, b topology.Bundle, move func(context.Context) *loadmgr.Owner) int {
	s := mt.s
	log := s.log.With("namespace", tenant+"/"+ns, "bundle", b.String())
	topics := s.bundleTopics(ctx, tenant, ns, b)
	s.eachTopic(ctx, topics, (*Topic).fence, log, "fencing a topic for its hand-off")
	s.eachTopic(ctx, topics, (*Topic).seal, log, "sealing a topic for its hand-off")
	// Forgotten before the key changes, so that once an unload has
	// answered (the key no longer names us) no topic of the bundle is
	// listed here; a load of one meanwhile waits on the key's request.
	s.forgetTopics(topics)
	s.releaseTopics(ctx, topics, move(ctx))
	return len(topics)
}

// UnloadAll implements loadmgr.Topics.
func (mt managedTopics) UnloadAll(ctx context.Context) { mt.s.unloadAll(ctx) }

// eachTopic runs step on every topic at once, each within CloseTimeout,
// logging what fails: a topic that did not fence or seal in time is
// handed over all the same (the new owner fences its storage on open).
func (s *Service) eachTopic(ctx context.Context, loads []*topicLoad, step func(*Topic, context.Context) error, log *slog.Logger, what string) {
	var wg sync.WaitGroup
	for _, l := range loads {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, s.cfg.CloseTimeout)
			defer cancel()
			if err := step(l.topic, sctx); err != nil {
				log.Warn(what, "topic", l.topic.Name(), "err", err)
			}
		})
	}
	wg.Wait()
}

// bundleTopics returns the topics of tenant/ns's bundle b loaded here,
// waiting (within ctx) for the loads of its topics under way.
func (s *Service) bundleTopics(ctx context.Context, tenant, ns string, b topology.Bundle) []*topicLoad {
	s.mu.Lock()
	all := maps.Clone(s.mu.topics) // Service.mu is a leaf: resolve outside it
	s.mu.Unlock()
	var loads []*topicLoad
	for name, l := range all {
		t, err := topology.ParseTopicName(name)
		if err != nil || t.Tenant != tenant || t.Namespace != ns {
			continue
		}
		if eff, err := s.resolve(t); err == nil {
			if tb, err := loadmgr.BundleOf(t, eff); err == nil && tb == b {
				loads = append(loads, l)
			}
		}
	}
	out := loads[:0]
	for _, l := range loads {
		select {
		case <-l.done:
		case <-ctx.Done():
			continue // a load still under way fails: the key no longer names it
		}
		if l.topic != nil {
			out = append(out, l)
		}
	}
	return out
}

// forgetTopics removes the handed-over topics from the loaded ones.
func (s *Service) forgetTopics(loads []*topicLoad) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range loads {
		if name := l.topic.Name(); s.mu.topics[name] == l {
			delete(s.mu.topics, name)
		}
	}
}

// releaseTopics closes the handed-over topics (forgotten already), telling
// their clients to go to dest (nil: look the topic up again), and waits
// (within CloseTimeout) until those words are written to every client's
// connection: a drain closes the connections next, and a client that saw
// its connection drop before its CLOSE frames would look the topic up
// instead of going straight to dest.
func (s *Service) releaseTopics(ctx context.Context, loads []*topicLoad, dest *loadmgr.Owner) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CloseTimeout)
	defer cancel()
	conns := make(map[*conn]struct{})
	for _, l := range loads {
		for _, c := range l.topic.clientConns() {
			conns[c] = struct{}{}
		}
	}
	var wg sync.WaitGroup
	for _, l := range loads {
		wg.Go(func() { l.topic.closeTo(cctx, dest) })
	}
	wg.Wait()
	for c := range conns {
		wg.Go(func() { c.awaitFlushed(cctx) })
	}
	wg.Wait()
}
