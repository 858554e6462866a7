package global

import (
	"encoding/json"
	"fmt"
)

// The Extra keys of the publish rate, by Pulsar's names: a namespace's is a
// map from region to PublishRate (Pulsar's Policies.publishMaxMessageRate,
// keyed by the cluster whose admin API set it, as the replicator dispatch
// rate is), a topic's one PublishRate for the topic in every region
// (TopicPolicies.publishRate).
const (
	ExtraPublishRate      = "publishMaxMessageRate"
	ExtraTopicPublishRate = "publishRate"
)

// PublishRate is Pulsar's PublishRate (pulsaradmin's utils.PublishRate): at
// most PublishThrottlingRateInMsg messages and PublishThrottlingRateInByte
// bytes per second into one topic, all its producers together. A dimension
// of 0 or less is not limited, as in Pulsar (its default is -1).
type PublishRate struct {
	PublishThrottlingRateInMsg  int64 `json:"publishThrottlingRateInMsg"`
	PublishThrottlingRateInByte int64 `json:"publishThrottlingRateInByte"`
}

// Limited reports whether r limits anything.
func (r PublishRate) Limited() bool {
	return r.PublishThrottlingRateInMsg > 0 || r.PublishThrottlingRateInByte > 0
}

// PublishRateIn is the publish rate of the topic in region, and whether
// there is one: the topic's policy, else the namespace's for region, as
// Pulsar resolves it. A rate that limits nothing counts as none.
func (e Effective) PublishRateIn(region string) (PublishRate, bool) {
	return topicElseRegion(e.PublishRate, e.NamespacePublishRates, region)
}

// topicElseRegion resolves a rate kept per topic and per region of the
// namespace: the topic's, else region's entry; one that limits nothing
// counts as none.
func topicElseRegion[T interface{ Limited() bool }](topic *T, ns map[string]T, region string) (T, bool) {
	var r T
	ok := false
	if topic != nil {
		r, ok = *topic, true
	} else {
		r, ok = ns[region]
	}
	if !ok || !r.Limited() {
		var none T
		return none, false
	}
	return r, true
}

// ExtraMaxMessageSize is the Extra key of a topic's maxMessageSize (Pulsar's
// TopicPolicies.maxMessageSize): the largest SEND, metadata and payload, the
// topic stores, in bytes. 0 is no limit beyond the broker's.
const ExtraMaxMessageSize = "maxMessageSize"

// ExtraPersistence is the Extra key, in a namespace's record and in a
// topic's, of the PersistencePolicies of the ledgers the topic creates.
const ExtraPersistence = "persistence"

// PersistencePolicies is Pulsar's PersistencePolicies: the ensemble, write
// quorum and ack quorum of a topic's new ledgers, and the rate at which its
// cursors' mark-delete positions are written.
type PersistencePolicies struct {
	BookkeeperEnsemble    int `json:"bookkeeperEnsemble"`
	BookkeeperWriteQuorum int `json:"bookkeeperWriteQuorum"`
	BookkeeperAckQuorum   int `json:"bookkeeperAckQuorum"`
	// ManagedLedgerMaxMarkDeleteRate is the most writes of one cursor's
	// state per second (mledger's SetMarkDeleteRate); 0 leaves the
	// region's CursorPersistInterval.
	ManagedLedgerMaxMarkDeleteRate float64 `json:"managedLedgerMaxMarkDeleteRate"`
}

// Validate checks E >= Qw >= Qa >= 1 (DESIGN §4), with Pulsar's words.
func (p PersistencePolicies) Validate() error {
	e, qw, qa := p.BookkeeperEnsemble, p.BookkeeperWriteQuorum, p.BookkeeperAckQuorum
	if !(e >= qw && qw >= qa && qa >= 1) {
		return fmt.Errorf("%w: Bookkeeper Ensemble (%d) >= WriteQuorum (%d) >= AckQuorum (%d) >= 1 must hold", ErrInvalidPolicies, e, qw, qa)
	}
	if p.ManagedLedgerMaxMarkDeleteRate < 0 {
		return fmt.Errorf("%w: managedLedgerMaxMarkDeleteRate must not be negative, got %v", ErrInvalidPolicies, p.ManagedLedgerMaxMarkDeleteRate)
	}
	return nil
}

// decodeExtra reads key of e as a T: nil when unset or when it does not
// decode, or valid (when given) refuses it. The admin API stores no such
// value; a record written by hand reads as unset rather than as a guess.
func decodeExtra[T any](e Extra, key string, valid func(T) error) *T {
	raw, set := e[key]
	var v T
	if !set || json.Unmarshal(raw, &v) != nil || (valid != nil && valid(v) != nil) {
		return nil
	}
	return &v
}

// regionValues reads key of e as a map from region to T, leaving out the
// entries valid refuses: nil when unset or not such a map.
func regionValues[T any](e Extra, key string, valid func(T) error) map[string]T {
	raw, set := e[key]
	var m map[string]T
	if !set || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	for region, v := range m {
		if valid != nil && valid(v) != nil {
			delete(m, region)
		}
	}
	return m
}
