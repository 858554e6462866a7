package broker

import (
	"fmt"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/global"
)

// Backlog quotas, as Pulsar enforces them: a topic's backlog is what its
// slowest durable cursor has not consumed, its replication cursors
// included (a remote region that is down holds it). When it is over the
// destination_storage limit,
//   - producer_request_hold and producer_exception: the topic's producers
//     are disconnected, and new ones are refused (ProducerBlockedQuota...)
//     until the backlog is back under the limit; clients keep retrying
//     until their send timeout;
//   - consumer_backlog_eviction: the slowest subscriptions skip their
//     oldest messages until their backlog fits; a replication cursor is
//     its replicator's and is not moved, so what a remote has not received
//     stays for it.
//
// The service checks every loaded topic each BacklogQuotaCheckInterval
// (Pulsar's backlogQuotaCheckIntervalInSeconds), and a new producer is
// checked when it connects. The backlog's size is estimated as its entry
// count times the topic's average stored entry size.

// backlogBytes estimates the bytes the slowest durable cursor has not
// consumed: a subscription's, or a replication cursor's (a remote region
// that is down or slow holds the backlog too, as in Pulsar). Sizes are
// entry counts times the topic's average stored entry size.
func (t *Topic) backlogBytes() int64 {
	worst, _ := t.slowestSubscription()
	for name, p := range t.ml.ForeignCursors() {
		if strings.HasPrefix(name, mledger.ReplicationCursorPrefix) {
			worst = max(worst, t.ml.EntriesAfter(p))
		}
	}
	return worst * t.averageEntrySize()
}

// slowestSubscription returns the durable subscription with the largest
// backlog, in entries, which eviction may move; a replication cursor is its
// replicator's and is never moved here.
func (t *Topic) slowestSubscription() (int64, *subscription) {
	var worst int64
	var slowest *subscription
	for _, s := range t.subscriptions() {
		if !s.cursor.Durable() {
			continue
		}
		if b := s.cursor.Backlog(); b > worst {
			worst, slowest = b, s
		}
	}
	return worst, slowest
}

// averageEntrySize is the topic's stored bytes per entry, 0 when empty.
func (t *Topic) averageEntrySize() int64 {
	ms := t.ml.Stats()
	if ms.Entries == 0 {
		return 0
	}
	return ms.StorageSize / ms.Entries
}

// storageQuota is the topic's destination_storage quota, if it has a
// limit.
func storageQuota(eff global.Effective) (global.BacklogQuota, bool) {
	q, ok := eff.BacklogQuotas[global.DestinationStorage]
	return q, ok && q.LimitSize >= 0
}

// quotaExceeded reports the storage quota's policy when the topic is over
// it.
func (t *Topic) quotaExceeded(eff global.Effective) (global.BacklogPolicy, bool) {
	q, ok := storageQuota(eff)
	if !ok {
		return "", false
	}
	return q.Policy, t.backlogBytes() > q.LimitSize
}

// admitProducerQuota refuses a new producer on a topic over its quota
// with a producer-blocking policy.
func (t *Topic) admitProducerQuota(eff global.Effective) error {
	policy, over := t.quotaExceeded(eff)
	switch {
	case !over:
		return nil
	case policy == global.ProducerRequestHold:
		return fmt.Errorf("%w: topic %s is over its backlog quota", wire.ErrProducerBlockedQuotaExceeded, t.Name())
	case policy == global.ProducerException:
		return fmt.Errorf("%w: topic %s is over its backlog quota", wire.ErrProducerBlockedQuotaExceededAtOpen, t.Name())
	}
	return nil
}

// enforceQuota applies the storage quota's policy once.
func (t *Topic) enforceQuota() {
	eff, err := t.svc.resolve(t.name)
	if err != nil {
		return
	}
	q, ok := storageQuota(eff)
	if !ok {
		return
	}
	switch q.Policy {
	case global.ProducerRequestHold, global.ProducerException:
		if _, over := t.quotaExceeded(eff); over {
			t.disconnectProducers()
		}
	case global.ConsumerBacklogEviction:
		for range 1000 { // bounded: each pass skips at least one entry
			entries, slowest := t.slowestSubscription()
			avg := max(t.averageEntrySize(), 1)
			size := entries * avg
			if slowest == nil || size <= q.LimitSize {
				return
			}
			if _, err := slowest.cursor.Skip(max((size-q.LimitSize+avg-1)/avg, 1)); err != nil {
				return
			}
			slowest.dropPending()
		}
	}
}

// quotaLoop checks every loaded topic's backlog quota on a schedule.
func (s *Service) quotaLoop(interval time.Duration) {
	defer s.wg.Done()
	tick := s.clock.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.Chan():
		}
		for _, t := range s.loadedTopics() {
			t.enforceQuota()
		}
	}
}
