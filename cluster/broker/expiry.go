package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
)

// Message expiry, as Pulsar's expiry monitor runs it. Every
// MessageExpiryCheckInterval (messageExpiryCheckIntervalInMinutes) the
// service goes over its loaded topics. On a topic with a message TTL
// (messageTTLInSeconds: the topic's, else the namespace's, else
// ttlDurationDefaultInSeconds), every subscription consumes what was stored
// longer ago than the TTL, as an admin's expire-messages does: its cursor
// moves past those entries, and the messages still to deliver or
// redeliver among them are dropped. A message may so outlive its TTL by up
// to one interval, as in Pulsar.
//
// Age is the entry's broker timestamp in this region (mledger.FindByTime):
// a message replicated here ages from its arrival, not from its first
// publication; but a replicated subscription's messages age from their
// publish time, so that every region expires the same set of them
// (replicatedSubs.expire). Replication cursors are not the broker's to
// move: the replicator skips expired entries as it reads them
// (replicator/ttl.go).

// expireByTTL expires t's subscriptions by its message TTL, if it has one.
func (t *Topic) expireByTTL(ctx context.Context) {
	eff, err := t.svc.resolve(t.name)
	if err != nil || eff.MessageTTLInSeconds <= 0 {
		return
	}
	subs := t.subscriptions()
	if len(subs) == 0 {
		return
	}
	ttl := time.Duration(eff.MessageTTLInSeconds) * time.Second
	first, _, err := t.storedWithin(ctx, ttl)
	if err != nil {
		t.svc.log.Warn("message expiry: finding the first message within the TTL", "topic", t.Name(), "err", err)
		return
	}
	cutoff := t.svc.clock.Now().Add(-ttl)
	for _, s := range subs {
		if err := t.expireOlder(s, first, cutoff); err != nil {
			t.svc.log.Warn("message expiry", "topic", t.Name(), "subscription", s.name, "err", err)
		}
	}
}

// storedWithin finds the entries stored at most age ago: first is the
// first of them (the position after the last entry when there is none),
// and within how many there are.
func (t *Topic) storedWithin(ctx context.Context, age time.Duration) (first mledger.Position, within int64, err error) {
	p, found, err := t.ml.FindByTime(ctx, t.svc.clock.Now().Add(-age).UnixMilli())
	if err != nil {
		return mledger.Position{}, 0, fmt.Errorf("%w: %v", wire.ErrPersistence, err)
	}
	if !found {
		p = t.ml.LastConfirmed()
		p.Entry++
		return p, 0, nil
	}
	return p, t.ml.EntriesAfter(p) + 1, nil
}

// expireOlder expires what s holds from before cutoff: the entries stored
// here before first (the first stored since cutoff), or, for a replicated
// subscription, those published before cutoff, at the replicated
// subscriptions' next sync.
func (t *Topic) expireOlder(s *subscription, first mledger.Position, cutoff time.Time) error {
	if t.rs != nil && s.replicated() {
		t.rs.expire(cutoff)
		return nil
	}
	return s.expireBefore(first)
}

// expireBefore consumes every entry of s before first, and counts those it
// consumed (the subscription stats' expired messages, in entries, as
// Pulsar's expiry monitor counts them).
func (s *subscription) expireBefore(first mledger.Position) error {
	if first.Entry == 0 {
		return nil // nothing older than the first entry of a ledger to know of
	}
	backlog := s.cursor.Backlog()
	if err := s.cursor.AckCumulative(mledger.Position{Ledger: first.Ledger, Entry: first.Entry - 1}); err != nil &&
		!errors.Is(err, mledger.ErrInvalidPosition) {
		return err
	}
	s.expired.Add(max(backlog-s.cursor.Backlog(), 0))
	s.dropPending()
	s.replicatedChanged()
	return nil
}

// Inactive subscriptions, as Pulsar expires them. Every
// SubscriptionExpiryCheckInterval (subscriptionExpiryCheckIntervalInMinutes)
// a durable subscription that has had no consumer for longer than its
// namespace's subscriptionExpirationTime (else the broker's
// subscriptionExpirationTimeMinutes) is deleted, with its cursor. A
// replicated subscription is kept, as in Pulsar (apache/pulsar#8066):
// another region's state would only create it again.

// expireInactiveSubscriptions deletes t's subscriptions that have gone
// without a consumer for longer than their expiration time.
func (t *Topic) expireInactiveSubscriptions(ctx context.Context) {
	eff, err := t.svc.resolve(t.name)
	if err != nil || eff.SubscriptionExpirationTimeMinutes <= 0 {
		return
	}
	idleSince := t.svc.clock.Now().Add(-time.Duration(eff.SubscriptionExpirationTimeMinutes) * time.Minute).UnixMilli()
	for _, s := range t.subscriptions() {
		if !s.cursor.Durable() || s.replicated() || s.consumerCount() > 0 || s.lastActive.Load() > idleSince {
			continue
		}
		// Refused (ErrConsumerBusy) if a consumer attached meanwhile.
		if err := t.DeleteSubscription(ctx, s.name, false); err != nil {
			t.svc.log.Warn("subscription expiry", "topic", t.Name(), "subscription", s.name, "err", err)
			continue
		}
		t.svc.log.Info("deleted a subscription without consumers for longer than its expiration time",
			"topic", t.Name(), "subscription", s.name, "minutes", eff.SubscriptionExpirationTimeMinutes)
	}
}
