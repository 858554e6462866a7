package broker

import (
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/global"
)

// applyPolicies hands a loaded topic the policies it enforces as they
// change: its publish rate in this region and its maxMessageSize, checked
// on each SEND, the quorums of its next ledgers and its cursors'
// mark-delete rate (persistence), its dispatch rates, its subscriptions'
// unacked limit, and its delayed delivery policy. A subscription
// whose dispatch waits on that limit takes a changed one at its next ack. It runs
// at load and on every pass of the Service's policy loop.
func (t *Topic) applyPolicies(eff global.Effective) {
	r, _ := eff.PublishRateIn(t.svc.cfg.Region)
	t.limits.publishRate.set(publishRate{msgs: r.PublishThrottlingRateInMsg, bytes: r.PublishThrottlingRateInByte})
	t.limits.maxMessageSize.Store(int64(eff.MaxMessageSize))
	t.ml.SetQuorums(t.svc.quorumsOf(eff))
	t.ml.SetBookieGroups(eff.BookieGroups)
	var markDeleteRate float64 // the region's CursorPersistInterval
	if p := eff.Persistence; p != nil {
		markDeleteRate = p.ManagedLedgerMaxMarkDeleteRate
	}
	t.ml.SetMarkDeleteRate(markDeleteRate)
	t.applyDispatchRates(eff)
	t.subscribeRate.set(eff.SubscribeRateIn(t.svc.cfg.Region))
	limit := t.svc.cfg.Dispatch.MaxUnackedPerSubscription
	if n := eff.MaxUnackedMessagesOnSubscription; n != nil {
		limit = *n
	}
	t.maxUnackedOnSubscription.Store(int64(limit))
	dd := eff.DelayedDelivery
	t.delayedDeliveryOff.Store(dd != nil && !dd.Active)
	var maxDelay int64
	if dd != nil {
		maxDelay = dd.MaxDelay()
	}
	t.limits.maxDeliveryDelay.Store(maxDelay)
}

// quorumsOf is the E/Qw/Qa of a topic's new ledgers: its persistence
// policy, else the broker's managedLedgerDefault* (mledger.Config).
func (s *Service) quorumsOf(eff global.Effective) mledger.Quorums {
	if p := eff.Persistence; p != nil {
		return mledger.Quorums{Ensemble: p.BookkeeperEnsemble, Write: p.BookkeeperWriteQuorum, Ack: p.BookkeeperAckQuorum}
	}
	return s.ledgers.DefaultQuorums()
}

// WritableBookies is how many of the region's live bookies take adds: the
// largest ensemble a persistence policy may ask for when the namespace has
// no bookie affinity (with one, the admin API counts the groups' bookies).
func (s *Service) WritableBookies() int { return s.ledgers.WritableBookies() }
