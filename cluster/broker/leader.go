package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire"
)

// The leader. One broker per region leads, elected through the metadata
// store's election at RegionKey(region, "leader") under the broker's
// ownership session lease, with its Owner as the candidate's value: the
// leader is the candidate with the oldest key (meta's campaign). It runs
// the shedder and keeps the region's cluster record. Leadership ends with
// the lease (the broker died or was cut off from etcd for a TTL), a lost
// watch on the key, or Close, which resigns; a broker that lost it
// campaigns again, under its next lease.
//
// Two leaders at once are possible only for the moment a cut-off leader
// takes to notice its keep-alive has stopped (meta.Leadership.Done); the
// shedder only asks owners to move bundles, through CAS on the bundle's
// key, so a stale leader's request is at worst one extra move; its rewrite
// of the cluster record, at worst one more, which the next pass undoes.

// leaderRetry paces campaigns after a failure (etcd unreachable, the
// lease gone), so that a broker cut off from etcd does not spin.
const leaderRetry = 500 * time.Millisecond

func (s *Service) leaderKey() string { return meta.RegionKey(s.cfg.Region, "leader") }

// leaderLoop campaigns for leadership until the Service closes, and leads
// while it holds it (lead).
func (s *Service) leaderLoop() {
	defer s.wg.Done()
	value, err := meta.EncodeJSON(1, s.own.self)
	if err != nil {
		s.log.Error("encoding the leader candidate", "err", err)
		return
	}
	for s.ctx.Err() == nil {
		lead, err := s.campaign(value)
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Info("campaign for region leader failed; retrying", "err", err)
			}
			select {
			case <-time.After(leaderRetry):
			case <-s.ctx.Done():
			}
			continue
		}
		s.log.Info("elected region leader", "region", s.cfg.Region)
		s.lead(lead)
	}
}

// campaign waits to lead under the current session lease.
func (s *Service) campaign(value []byte) (meta.Leadership, error) {
	l, err := s.own.currentLease(s.ctx)
	if err != nil {
		return nil, err
	}
	return s.store.Campaign(s.ctx, s.leaderKey(), value, l)
}

// lead runs the shedder every SheddingInterval, and keeps the region's
// cluster record (clusterrecord.go), until leadership is lost or the
// Service closes, and then resigns (a no-op when the key is already gone).
func (s *Service) lead(lead meta.Leadership) {
	s.metrics.leading(true)
	defer s.metrics.leading(false)
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), s.cfg.CloseTimeout)
		defer cancel()
		if err := lead.Resign(ctx); err != nil {
			s.log.Info("resigning region leadership", "err", err)
		}
	}()
	sh := newShedder(s.cfg.LoadBalance, time.Now)
	tick := time.NewTicker(s.cfg.LoadBalance.SheddingInterval)
	defer tick.Stop()
	records := time.NewTicker(clusterRecordInterval)
	defer records.Stop()
	s.keepClusterRecord() // at once: the leader before may have died, and still be named
	for {
		select {
		case <-tick.C:
			if s.cfg.LoadBalance.SheddingEnabled {
				s.shedOnce(lead.Done(), sh)
			}
		case <-records.C:
			s.keepClusterRecord()
		case <-lead.Done():
			s.log.Info("lost region leadership", "region", s.cfg.Region)
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// Leader returns the region's elected leader.
func (s *Service) Leader(ctx context.Context) (Owner, error) {
	return readLeader(ctx, s.store, s.leaderKey())
}

// readLeader returns the value of the election's leading candidate: the
// key with the lowest CreateRevision under the election's prefix.
func readLeader(ctx context.Context, store meta.Store, key string) (Owner, error) {
	kvs, _, err := store.List(ctx, meta.Prefix(key))
	if err != nil {
		return Owner{}, fmt.Errorf("%w: read the region leader: %v", wire.ErrMetadata, err)
	}
	var first *meta.KV
	for i := range kvs {
		if first == nil || kvs[i].CreateRevision < first.CreateRevision {
			first = &kvs[i]
		}
	}
	if first == nil {
		return Owner{}, fmt.Errorf("%w: no leader is elected", ErrNoLeader)
	}
	var o Owner
	if _, err := meta.DecodeJSON(first.Value, 1, &o); err != nil {
		return Owner{}, fmt.Errorf("%w: leader record %s: %v", wire.ErrMetadata, first.Key, err)
	}
	return o, nil
}

// keepClusterRecord runs one pass of maintainClusterRecord, within one
// interval; a failed pass is retried at the next.
func (s *Service) keepClusterRecord() {
	ctx, cancel := context.WithTimeout(s.ctx, clusterRecordInterval)
	defer cancel()
	if err := s.maintainClusterRecord(ctx); err != nil && s.ctx.Err() == nil {
		s.log.Warn("keeping the cluster record", "err", err)
	}
}
