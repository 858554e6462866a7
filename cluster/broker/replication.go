package broker

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// ReplicationCursorPrefix names the replicator's cursors in a topic's
// managed ledger, meridian.repl.<remote>: the same prefix as the
// replicator's CursorPrefix, which this package may not import (DESIGN §2;
// cluster/node's tests check that they agree).
const ReplicationCursorPrefix = "meridian.repl."

// ReplicationStart is where a region added to an existing topic's
// replication clusters starts (ServiceConfig.ReplicationStartAt).
type ReplicationStart string

// The values of Pulsar's replicationStartAt.
const (
	ReplicationStartLatest   ReplicationStart = "latest"
	ReplicationStartEarliest ReplicationStart = "earliest"
)

// replicationResync is how often replicationLoop goes over the loaded
// topics even without a policy change, so that a sync that failed (etcd
// briefly unreachable) is tried again.
const replicationResync = 5 * time.Second

// syncReplicationCursors makes topic t's replication cursors match its
// effective replication clusters, as Pulsar's broker does when it loads a
// topic or its policies change: a cursor for each remote region is created
// if missing (at start(), and never moved if it exists), and the cursor of
// a region no longer listed is deleted, which frees the retention it held.
// When the local region is not listed, no region is replicated to.
//
// The owner creates the cursors, not the replicator, because only the
// owner knows where one must start: at the first entry of a topic its load
// creates, before anything is stored (so retention can never trim what a
// late task has not sent); at the end of an existing topic (or its start,
// with ReplicationStartEarliest) for a region added later. The replicator
// then only opens them (mledger.WithoutCreate).
//
// synced are the remotes of the last successful sync; when the clusters
// have not changed since, it does nothing. It returns the remotes synced.
func (s *Service) syncReplicationCursors(ctx context.Context, t topology.TopicName, eff global.Effective,
	synced []string, start func() mledger.Position) ([]string, error) {
	remotes := replicationRemotes(s.cfg.Region, eff.ReplicationClusters)
	if synced != nil && slices.Equal(remotes, synced) {
		return synced, nil
	}
	name := t.String()
	have, err := mledger.ExternalCursorNames(ctx, s.store, s.cfg.Region, name, ReplicationCursorPrefix)
	if err != nil {
		return nil, err
	}
	for _, r := range remotes {
		cursor := ReplicationCursorPrefix + r
		if slices.Contains(have, cursor) {
			continue
		}
		at := start()
		created, err := mledger.CreateExternalCursor(ctx, s.store, s.cfg.Region, name, cursor, at)
		if err != nil {
			return nil, err
		}
		if created {
			s.log.Info("replication cursor created", "topic", name, "remote", r, "at", at.String())
		}
	}
	for _, cursor := range have {
		r := strings.TrimPrefix(cursor, ReplicationCursorPrefix)
		if slices.Contains(remotes, r) {
			continue
		}
		if err := mledger.DeleteExternalCursor(ctx, s.store, s.cfg.Region, name, cursor); err != nil {
			return nil, err
		}
		s.log.Info("replication cursor of a removed region deleted", "topic", name, "remote", r)
	}
	return remotes, nil
}

// replicationRemotes are the regions other than region in clusters,
// sorted and never nil; none when clusters leave region out.
func replicationRemotes(region string, clusters []string) []string {
	remotes := []string{}
	if !slices.Contains(clusters, region) {
		return remotes
	}
	for _, c := range clusters {
		if c != region {
			remotes = append(remotes, c)
		}
	}
	slices.Sort(remotes)
	return remotes
}

// replicationStart is where a cursor for a region added to this existing
// topic starts: its last entry (only what comes next is replicated), or
// before its first with ReplicationStartEarliest.
func (t *Topic) replicationStart() mledger.Position {
	if t.svc.cfg.ReplicationStartAt == ReplicationStartEarliest {
		return mledger.Position{}
	}
	return t.ml.LastConfirmed()
}

// replicationLoop applies policy changes to the loaded topics whenever
// the global configuration changes, and every replicationResync: it syncs
// their replication cursors (a namespace's or a topic's clusters, a
// tenant's allowed clusters) and sets their retention. It is the only
// writer of each loaded Topic's repl.
func (s *Service) replicationLoop() {
	defer s.wg.Done()
	s.policyPasses(replicationResync, s.syncLoadedTopics)
}

// syncLoadedTopics is one pass of replicationLoop.
func (s *Service) syncLoadedTopics() {
	for _, t := range s.loadedTopics() {
		eff, err := s.resolve(t.name)
		if err != nil {
			continue // the namespace is going away; the topic with it
		}
		t.ml.SetRetention(retentionOf(eff))
		t.applyPolicies(eff)
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.TopicLoadTimeout)
		repl, err := s.syncReplicationCursors(ctx, t.name, eff, t.repl, t.replicationStart)
		cancel()
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Warn("syncing replication cursors failed; retrying", "topic", t.Name(), "err", err)
			}
			// What the failed sync left is unknown: the next pass
			// syncs in full, even if the clusters are back to what
			// the last success saw.
			t.repl = nil
			continue
		}
		t.repl = repl
	}
}

// policyPasses runs pass whenever the global configuration changes (a
// burst of changes coalesces into one pass), and every resync even
// without a change, until the Service closes. Passes run one at a time,
// on the caller's goroutine.
func (s *Service) policyPasses(resync time.Duration, pass func()) {
	sub := s.policies.Subscribe()
	defer sub.Close()
	changed := make(chan struct{}, 1)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			if _, err := sub.Next(s.ctx); err != nil {
				return
			}
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}()
	defer func() { <-watchDone }()
	tick := s.clock.NewTicker(resync)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-changed:
		case <-tick.Chan():
		}
		pass()
	}
}
