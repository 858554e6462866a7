package broker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/global"
)

// Backlog quotas, as Pulsar enforces them: a topic's backlog is what its
// slowest durable cursor has not consumed, its replication cursors
// included (a remote region that is down holds it). A destination_storage
// quota limits its size, a message_age quota the age of its oldest
// message (stored in this region longer ago than limitTime). When the
// topic is over either,
//   - producer_request_hold and producer_exception: the topic's producers
//     are disconnected, and new ones are refused (ProducerBlockedQuota...)
//     until the backlog is back under the limit; clients keep retrying
//     until their send timeout;
//   - consumer_backlog_eviction: for size, the slowest subscriptions skip
//     their oldest messages until their backlog fits; for age, every
//     subscription expires what is older than the limit (counted as
//     expired, as Pulsar's eviction by time is; a replicated
//     subscription's messages by their publish time, as for a TTL:
//     expiry.go). A replication cursor is
//     its replicator's and is not moved, so what a remote has not received
//     stays for it.
//
// The service checks every loaded topic each BacklogQuotaCheckInterval
// (Pulsar's backlogQuotaCheckIntervalInSeconds), and a new producer is
// checked when it connects: against the size then, and against the age as
// the last check found it (the age needs a search of the storage). The
// backlog's size is estimated as its entry count times the topic's
// average stored entry size.

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

// ageQuota is the topic's message_age quota, if it has a limit.
func ageQuota(eff global.Effective) (global.BacklogQuota, bool) {
	q, ok := eff.BacklogQuotas[global.MessageAge]
	return q, ok && q.LimitTime > 0
}

// storageExceeded reports whether the topic is over its storage quota.
func (t *Topic) storageExceeded(eff global.Effective) bool {
	q, ok := storageQuota(eff)
	return ok && t.backlogBytes() > q.LimitSize
}

// admitProducerQuota refuses a new producer on a topic over a quota with
// a producer-blocking policy.
func (t *Topic) admitProducerQuota(eff global.Effective) error {
	if q, ok := storageQuota(eff); ok && t.storageExceeded(eff) {
		if err := refuseProducer(q.Policy, t.Name()); err != nil {
			return err
		}
	}
	if q, ok := ageQuota(eff); ok && t.overAgeQuota.Load() {
		return refuseProducer(q.Policy, t.Name())
	}
	return nil
}

// refuseProducer is the refusal of a new producer on a topic over a quota
// whose policy is policy; nil for a policy that blocks no producer.
func refuseProducer(policy global.BacklogPolicy, topic string) error {
	switch policy {
	case global.ProducerRequestHold:
		return fmt.Errorf("%w: topic %s is over its backlog quota", wire.ErrProducerBlockedQuotaExceeded, topic)
	case global.ProducerException:
		return fmt.Errorf("%w: topic %s is over its backlog quota", wire.ErrProducerBlockedQuotaExceededAtOpen, topic)
	}
	return nil
}

// enforceQuota applies the topic's backlog quotas once.
func (t *Topic) enforceQuota(ctx context.Context) {
	eff, err := t.svc.resolve(t.name)
	if err != nil {
		return
	}
	if q, ok := storageQuota(eff); ok {
		t.enforceStorageQuota(eff, q)
	}
	q, ok := ageQuota(eff)
	if !ok {
		t.overAgeQuota.Store(false)
		return
	}
	if err := t.enforceAgeQuota(ctx, q); err != nil {
		t.svc.log.Warn("backlog quota: checking the age of the backlog", "topic", t.Name(), "err", err)
	}
}

func (t *Topic) enforceStorageQuota(eff global.Effective, q global.BacklogQuota) {
	switch q.Policy {
	case global.ProducerRequestHold, global.ProducerException:
		if t.storageExceeded(eff) {
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

// enforceAgeQuota checks the message_age quota q, and records the verdict
// for the producers that connect until the next check.
func (t *Topic) enforceAgeQuota(ctx context.Context, q global.BacklogQuota) error {
	limit := time.Duration(q.LimitTime) * time.Second
	first, within, err := t.storedWithin(ctx, limit)
	if err != nil {
		return err
	}
	// A cursor holds a message older than the limit when it has more
	// entries after its mark-delete position than were stored within it.
	holdsOlder := func(markDeleted mledger.Position) bool { return t.ml.EntriesAfter(markDeleted) > within }
	over := false
	cutoff := t.svc.clock.Now().Add(-limit)
	for _, s := range t.subscriptions() {
		if !s.cursor.Durable() {
			continue
		}
		// A replicated subscription is asked every time: it may hold
		// messages published before the limit that arrived here since.
		if q.Policy == global.ConsumerBacklogEviction && (s.replicated() || holdsOlder(s.cursor.MarkDeletePosition())) {
			if err := t.expireOlder(s, first, cutoff); err != nil {
				return err
			}
		}
		over = over || holdsOlder(s.cursor.MarkDeletePosition())
	}
	for name, p := range t.ml.ForeignCursors() {
		over = over || (strings.HasPrefix(name, mledger.ReplicationCursorPrefix) && holdsOlder(p))
	}
	t.overAgeQuota.Store(over)
	if over && (q.Policy == global.ProducerRequestHold || q.Policy == global.ProducerException) {
		t.disconnectProducers()
	}
	return nil
}
