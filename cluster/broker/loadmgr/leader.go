package loadmgr

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

func (m *Manager) leaderKey() string { return meta.RegionKey(m.cfg.Region, "leader") }

// leaderLoop campaigns for leadership until the Manager closes, and leads
// while it holds it (lead).
func (m *Manager) leaderLoop() {
	value, err := meta.EncodeJSON(1, m.own.self)
	if err != nil {
		m.log.Error("encoding the leader candidate", "err", err)
		return
	}
	for m.ctx.Err() == nil {
		lead, err := m.campaign(value)
		if err != nil {
			if m.ctx.Err() == nil {
				m.log.Info("campaign for region leader failed; retrying", "err", err)
			}
			select {
			case <-m.cfg.Clock.After(leaderRetry):
			case <-m.ctx.Done():
			}
			continue
		}
		m.log.Info("elected region leader", "region", m.cfg.Region)
		m.lead(lead)
	}
}

// campaign waits to lead under the current session lease.
func (m *Manager) campaign(value []byte) (meta.Leadership, error) {
	l, err := m.own.currentLease(m.ctx)
	if err != nil {
		return nil, err
	}
	return m.store.Campaign(m.ctx, m.leaderKey(), value, l)
}

// lead runs the shedder every SheddingInterval, and keeps the region's
// cluster record (clusterrecord.go), until leadership is lost or the
// Manager closes, and then resigns (a no-op when the key is already gone).
func (m *Manager) lead(lead meta.Leadership) {
	m.metrics.leading(true)
	defer m.metrics.leading(false)
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), m.cfg.CloseTimeout)
		defer cancel()
		if err := lead.Resign(ctx); err != nil {
			m.log.Info("resigning region leadership", "err", err)
		}
	}()
	sh := newShedder(m.cfg.LoadBalance, m.cfg.Clock.Now)
	tick := m.cfg.Clock.NewTicker(m.cfg.LoadBalance.SheddingInterval)
	defer tick.Stop()
	records := m.cfg.Clock.NewTicker(clusterRecordInterval)
	defer records.Stop()
	m.keepClusterRecord() // at once: the leader before may have died, and still be named
	for {
		select {
		case <-tick.Chan():
			if m.cfg.LoadBalance.SheddingEnabled {
				m.shedOnce(lead.Done(), sh)
			}
		case <-records.Chan():
			m.keepClusterRecord()
		case <-lead.Done():
			m.log.Info("lost region leadership", "region", m.cfg.Region)
			return
		case <-m.ctx.Done():
			return
		}
	}
}

// Leader returns the region's elected leader.
func (m *Manager) Leader(ctx context.Context) (Owner, error) {
	return readLeader(ctx, m.store, m.leaderKey())
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
func (m *Manager) keepClusterRecord() {
	ctx, cancel := context.WithTimeout(m.ctx, clusterRecordInterval)
	defer cancel()
	if err := m.maintainClusterRecord(ctx); err != nil && m.ctx.Err() == nil {
		m.log.Warn("keeping the cluster record", "err", err)
	}
}
