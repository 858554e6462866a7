package global

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/topology"
)

// Replicated subscriptions' states (cluster/broker/replsub) live here, in
// the store every region shares, one key per topic, subscription and
// region:
//
//	subscription-states/<tenant>/<namespace>/<domain>/<topic>/<subscription>/<region>
//
// A partition is a topic of its own here (its name has -partition-N). The
// key of region R is written only by the broker that owns the topic in R,
// at the revision its watch last saw; the owners in the other regions read
// it through that watch. The value is opaque to this package. The Cache
// ignores these keys: they are runtime state, not configuration.
const kindSubscriptionStates = "subscription-states"

func subscriptionStatesParts(t topology.TopicName) []string {
	return []string{kindSubscriptionStates, t.Tenant, t.Namespace, string(t.Domain), t.Local}
}

func (s *Store) subscriptionStatesPrefix(t topology.TopicName) string {
	return meta.Prefix(s.key(subscriptionStatesParts(t)...))
}

func (s *Store) subscriptionStateKey(t topology.TopicName, sub, region string) string {
	return s.key(append(subscriptionStatesParts(t), sub, region)...)
}

// SubscriptionState is one region's state of one subscription, as stored.
type SubscriptionState struct {
	Subscription, Region string
	Value                []byte
	// ModRevision is the key's revision: the one its writer updates at.
	ModRevision int64
	// Deleted is set by a watch event that removed the key.
	Deleted bool
}

// WriteSubscriptionState writes region's state of sub on t: it creates the
// key when modRev is 0 and updates it at modRev otherwise (ErrExists,
// ErrConflict when someone else wrote it meanwhile). It returns the new
// revision.
func (s *Store) WriteSubscriptionState(ctx context.Context, t topology.TopicName, sub, region string, value []byte, modRev int64) (int64, error) {
	key := s.subscriptionStateKey(t, sub, region)
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	var rev int64
	var err error
	if modRev == 0 {
		rev, err = s.st.Create(ctx, key, value, meta.NoLease)
	} else {
		rev, err = s.st.Update(ctx, key, value, modRev)
	}
	if err != nil {
		return 0, fail("write", key, err)
	}
	return rev, nil
}

// DeleteSubscriptionStates deletes region's states of t: of sub alone, or
// of every subscription when sub is "". A topic deleted, or a subscription
// unsubscribed, leaves nothing for a later one of the same name.
func (s *Store) DeleteSubscriptionStates(ctx context.Context, t topology.TopicName, sub, region string) error {
	prefix := s.subscriptionStatesPrefix(t)
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	kvs, _, err := s.st.List(ctx, prefix)
	if err != nil {
		return fail("list", prefix, err)
	}
	for _, kv := range kvs {
		st, ok := s.parseSubscriptionState(prefix, kv)
		if !ok || st.Region != region || (sub != "" && st.Subscription != sub) {
			continue
		}
		// A key changed or gone meanwhile was its writer's doing (a
		// subscription or topic created again): not ours to remove.
		if err := s.st.Delete(ctx, kv.Key, kv.ModRevision); err != nil && !errors.Is(err, meta.ErrNotFound) && !errors.Is(err, meta.ErrConflict) {
			return fail("delete", kv.Key, err)
		}
	}
	return nil
}

// SubscriptionStates reads every region's states of t's subscriptions,
// linearizably: every write acknowledged before the call is in the answer.
func (s *Store) SubscriptionStates(ctx context.Context, t topology.TopicName) ([]SubscriptionState, error) {
	prefix := s.subscriptionStatesPrefix(t)
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	kvs, _, err := s.st.List(ctx, prefix)
	if err != nil {
		return nil, fail("list", prefix, err)
	}
	var out []SubscriptionState
	for _, kv := range kvs {
		if st, ok := s.parseSubscriptionState(prefix, kv); ok {
			out = append(out, st)
		}
	}
	return out, nil
}

// WatchSubscriptionStates follows every region's states of t's
// subscriptions until ctx ends (meta.ListWatch): snapshot gets the whole
// set, after a start and after every watch error, and replaces what the
// caller held; changes gets each later batch.
func (s *Store) WatchSubscriptionStates(ctx context.Context, t topology.TopicName, retry time.Duration,
	log *slog.Logger, snapshot func([]SubscriptionState), changes func([]SubscriptionState)) {
	prefix := s.subscriptionStatesPrefix(t)
	meta.ListWatch(ctx, s.st, prefix, retry, log,
		func(kvs []meta.KV) {
			var out []SubscriptionState
			for _, kv := range kvs {
				if st, ok := s.parseSubscriptionState(prefix, kv); ok {
					out = append(out, st)
				}
			}
			snapshot(out)
		},
		func(evs []meta.Event) {
			var out []SubscriptionState
			for _, ev := range evs {
				if st, ok := s.parseSubscriptionState(prefix, ev.KV); ok {
					st.Deleted = ev.Type == meta.EventDelete
					out = append(out, st)
				}
			}
			changes(out)
		})
}

// parseSubscriptionState reads the subscription and region of a key under
// prefix; keys of any other shape are not states.
func (s *Store) parseSubscriptionState(prefix string, kv meta.KV) (SubscriptionState, bool) {
	segs, ok := unescapeSegments(strings.TrimPrefix(kv.Key, prefix))
	if !ok || len(segs) != 2 {
		return SubscriptionState{}, false
	}
	return SubscriptionState{Subscription: segs[0], Region: segs[1], Value: kv.Value, ModRevision: kv.ModRevision}, true
}
