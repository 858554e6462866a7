package global

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// Automatic region failover (cluster/broker's failover.go runs it; the
// safety argument is in docs/architecture.md). A namespace opts in with
// its AutoFailover policy, and three kinds of keys in this store carry the
// rest:
//
//	failover-sessions/<region>/<broker>                 one per broker of a region in an opted-in set, under the broker's session lease
//	failover-views/<tenant>/<namespace>/<region>/<broker> what that broker's probes see of the namespace's active region, under the same lease
//	failover-revocations/<region>                       written before a decider revokes the region's sessions: its revision tells a revocation from an expiry
//	namespaces/<tenant>/<namespace>                     the policy; a takeover is one compare-and-swap of it
//
// A region may dispatch a namespace's replicated subscriptions only while
// its brokers hold their sessions, and the switch away from a region
// requires that no session of it is left (meta.Store.UpdateIfNone).
// The Cache ignores the session and view keys: they are runtime state.

// ExtraAutoFailover is the Extra key of a namespace's AutoFailover. It
// lives in Extra for the reason ExtraFallbackRegions does: a broker that
// predates it carries it through its updates unchanged.
const ExtraAutoFailover = "meridianAutoFailover"

// MinAutoFailoverRegions is the smallest replication set automatic
// failover accepts: with two regions, one region's view of the other is
// never a majority, and a partition between them could not be told from
// the other's death.
const MinAutoFailoverRegions = 3

// AutoFailover is a namespace's automatic failover: when a majority of
// its replication set has seen the active region unreachable for Delay,
// or the active region has held no session for Delay, the first fallback
// region becomes active.
type AutoFailover struct {
	DelaySeconds int `json:"delaySeconds"`
	// LastSwitch is the last automatic switch, nil before the first.
	LastSwitch *FailoverSwitch `json:"lastSwitch,omitempty"`
}

// Delay is DelaySeconds as a duration.
func (a AutoFailover) Delay() time.Duration { return time.Duration(a.DelaySeconds) * time.Second }

// FailoverSwitch records one automatic switch of the active region.
type FailoverSwitch struct {
	From string `json:"from"`
	To   string `json:"to"`
	// AtMillis is when the switch was written, by the writer's clock (Unix
	// milliseconds).
	AtMillis int64 `json:"atMillis"`
	// DispatchWaitMillis is how long after AtMillis the new region waits
	// before it dispatches replicated subscriptions: the rest of a session
	// TTL since the writer first saw no session of From (a whole TTL when
	// it revoked them itself), since From, cut off, stops on its own timer
	// at most a TTL after its last session was revoked; 0 when they
	// expired, since From stopped before they could.
	DispatchWaitMillis int64 `json:"dispatchWaitMillis"`
}

// NotBefore is when the new region may dispatch: AtMillis plus the wait.
func (s FailoverSwitch) NotBefore() time.Time {
	return time.UnixMilli(s.AtMillis + s.DispatchWaitMillis)
}

// AutoFailover returns the namespace's automatic failover, ok false when
// it is off (or the stored value does not read, which validate refuses to
// store).
func (p Policies) AutoFailover() (a AutoFailover, ok bool) {
	a, err := p.autoFailover()
	return a, err == nil && a.DelaySeconds > 0
}

func (p Policies) autoFailover() (AutoFailover, error) {
	var a AutoFailover
	raw, set := p.Extra[ExtraAutoFailover]
	if !set {
		return a, nil
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, fmt.Errorf("%w: %s: %v", ErrInvalidPolicies, ExtraAutoFailover, err)
	}
	return a, nil
}

// SetAutoFailover stores a; nil turns automatic failover off.
func (p *Policies) SetAutoFailover(a *AutoFailover) {
	if a == nil {
		delete(p.Extra, ExtraAutoFailover)
		return
	}
	p.Extra.put(ExtraAutoFailover, a)
}

// validateAutoFailover checks that automatic failover has what it needs:
// an active region, somewhere to go, and a set in which a majority exists.
func (p Policies) validateAutoFailover() error {
	a, err := p.autoFailover()
	if err != nil {
		return err
	}
	if _, set := p.Extra[ExtraAutoFailover]; !set {
		return nil
	}
	switch {
	case a.DelaySeconds < 1:
		return fmt.Errorf("%w: automatic failover needs a delay of at least 1 second, got %d", ErrInvalidPolicies, a.DelaySeconds)
	case p.ActiveRegion == "":
		return fmt.Errorf("%w: automatic failover needs an active region", ErrInvalidPolicies)
	case len(p.FallbackRegions()) == 0:
		return fmt.Errorf("%w: automatic failover needs at least one fallback region", ErrInvalidPolicies)
	case len(p.ReplicationClusters) < MinAutoFailoverRegions:
		return fmt.Errorf("%w: automatic failover needs at least %d replication clusters, so that a majority of them can decide; %v has %d",
			ErrInvalidPolicies, MinAutoFailoverRegions, p.ReplicationClusters, len(p.ReplicationClusters))
	}
	return nil
}

const (
	kindFailoverSessions    = "failover-sessions"
	kindFailoverViews       = "failover-views"
	kindFailoverRevocations = "failover-revocations"
)

// FailoverSessionsPrefix is the prefix of region's session keys: empty
// once no broker of region holds a session.
func (s *Store) FailoverSessionsPrefix(region string) string {
	return meta.Prefix(s.key(kindFailoverSessions, region))
}

// FailoverSession is one broker's session key. Every broker that knows
// automatic failover holds one, whether or not a namespace has opted in:
// it is also how the admin API tells that a region's brokers are all new
// enough to gate their dispatch.
type FailoverSession struct {
	Broker string `json:"broker"`
	// ServiceURL is the broker's Pulsar service URL, as its region's
	// cluster record lists it.
	ServiceURL string `json:"serviceUrl"`
	// RecordsRevocations says the broker writes the region's revocation
	// record before it revokes another region's sessions
	// (RevokeFailoverSessions); brokers that predate the record do not.
	RecordsRevocations bool `json:"recordsRevocations,omitempty"`
	// Lease and CreateRevision are the key's (from the store).
	Lease          meta.LeaseID `json:"-"`
	CreateRevision int64        `json:"-"`
}

// CreateFailoverSession creates the session key of ss.Broker in region
// under lease.
func (s *Store) CreateFailoverSession(ctx context.Context, region string, ss FailoverSession, lease meta.LeaseID) error {
	key := s.key(kindFailoverSessions, region, ss.Broker)
	data, err := meta.EncodeJSON(recordVersion, ss)
	if err != nil {
		return err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	if _, err := s.st.Create(ctx, key, data, lease); err != nil {
		return fail("create", key, err)
	}
	return nil
}

// FailoverSessions lists region's live sessions.
func (s *Store) FailoverSessions(ctx context.Context, region string) ([]FailoverSession, error) {
	prefix := s.FailoverSessionsPrefix(region)
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	kvs, _, err := s.st.List(ctx, prefix)
	if err != nil {
		return nil, fail("list", prefix, err)
	}
	out := make([]FailoverSession, len(kvs))
	for i, kv := range kvs {
		if err := decodeRecord(kv.Value, &out[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", kv.Key, err)
		}
		out[i].Lease, out[i].CreateRevision = kv.Lease, kv.CreateRevision
	}
	return out, nil
}

// EverySessionRecordsRevocations reports whether every broker that holds
// a failover session, in any region, writes revocation records: only
// then does a region's sessions' end without a newer record mean they
// expired.
func (s *Store) EverySessionRecordsRevocations(ctx context.Context) (bool, error) {
	prefix := meta.Prefix(s.key(kindFailoverSessions))
	recs, err := listRecords[FailoverSession](ctx, s, prefix)
	if err != nil {
		return false, err
	}
	for _, ss := range recs {
		if !ss.RecordsRevocations {
			return false, nil
		}
	}
	return true, nil
}

// failoverRevocation is the record a decider writes before it revokes a
// region's sessions. Its revision is what counts; the time is for people.
type failoverRevocation struct {
	AtMillis int64 `json:"atMillis"`
}

// FailoverRevocation returns the revision of region's revocation record,
// 0 if no session of region has ever been revoked. A session created
// before that revision may have been revoked; one created after it was
// not, by that revocation.
func (s *Store) FailoverRevocation(ctx context.Context, region string) (int64, error) {
	_, rev, err := getRecord[failoverRevocation](ctx, s, s.key(kindFailoverRevocations, region))
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	return rev, err
}

// recordRevocation writes region's revocation record at a revision above
// every session key listed before it. A conflict means another decider
// wrote it meanwhile, which does as well.
func (s *Store) recordRevocation(ctx context.Context, region string, at time.Time) error {
	err := s.writeRecord(ctx, s.key(kindFailoverRevocations, region), failoverRevocation{AtMillis: at.UnixMilli()}, meta.NoLease)
	if errors.Is(err, ErrExists) || errors.Is(err, ErrConflict) {
		return nil
	}
	return err
}

// RevokeFailoverSessions ends every session of region, deleting its keys
// and every view its brokers wrote. A broker learns of it at its next
// check of its lease, or, cut off from the store, by its own timer. The
// revocation record is written first, after the sessions are listed, so
// its revision is above every session revoked.
func (s *Store) RevokeFailoverSessions(ctx context.Context, region string, at time.Time) error {
	sessions, err := s.FailoverSessions(ctx, region)
	if err != nil || len(sessions) == 0 {
		return err
	}
	if err := s.recordRevocation(ctx, region, at); err != nil {
		return err
	}
	var errs []error
	for _, ss := range sessions {
		octx, cancel := s.opCtx(ctx)
		if err := s.st.Revoke(octx, ss.Lease); err != nil {
			errs = append(errs, fail("revoke", s.key(kindFailoverSessions, region, ss.Broker), err))
		}
		cancel()
	}
	return errors.Join(errs...)
}

// FailoverView is what one broker's probes see of a namespace's active
// region.
type FailoverView struct {
	// Region and Broker are the observer (from the key).
	Region string `json:"-"`
	Broker string `json:"-"`
	// Active is the active region probed.
	Active string `json:"active"`
	// UnreachableSinceMillis is when the probes of Active began to fail,
	// by the observer's clock (Unix milliseconds); 0 while they succeed.
	UnreachableSinceMillis int64 `json:"unreachableSinceMillis,omitempty"`
}

func (s *Store) failoverViewsPrefix(tenant, ns string) string {
	return meta.Prefix(s.key(kindFailoverViews, tenant, ns))
}

// WriteFailoverView stores v as broker's view of tenant/ns, under lease
// (the broker's session), so that it goes when the broker does.
func (s *Store) WriteFailoverView(ctx context.Context, tenant, ns string, v FailoverView, lease meta.LeaseID) error {
	return s.writeRecord(ctx, s.key(kindFailoverViews, tenant, ns, v.Region, v.Broker), v, lease)
}

// writeRecord stores v at key, attached to lease (meta.NoLease: to none),
// whether or not the key exists: a read, then a create or a
// compare-and-swap at the revision read, which fails (ErrExists,
// ErrConflict) if another writer came between.
func (s *Store) writeRecord(ctx context.Context, key string, v any, lease meta.LeaseID) error {
	data, err := meta.EncodeJSON(recordVersion, v)
	if err != nil {
		return err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	kv, err := s.st.Get(ctx, key)
	switch {
	case errors.Is(err, meta.ErrNotFound):
		_, err = s.st.Create(ctx, key, data, lease)
	case err == nil:
		_, err = s.st.MoveToLease(ctx, key, data, kv.ModRevision, lease)
	}
	if err != nil {
		return fail("write", key, err)
	}
	return nil
}

// FailoverViews reads every broker's view of tenant/ns.
func (s *Store) FailoverViews(ctx context.Context, tenant, ns string) ([]FailoverView, error) {
	prefix := s.failoverViewsPrefix(tenant, ns)
	recs, err := listRecords[FailoverView](ctx, s, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]FailoverView, 0, len(recs))
	for key, v := range recs {
		segs, ok := unescapeSegments(strings.TrimPrefix(key, prefix))
		if !ok || len(segs) != 2 {
			continue
		}
		v.Region, v.Broker = segs[0], segs[1]
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b FailoverView) int { return strings.Compare(a.Region+"/"+a.Broker, b.Region+"/"+b.Broker) })
	return out, nil
}

// SwitchActiveRegion makes to the active region of tenant/ns in place of
// from, in one compare-and-swap that also requires that no session of from
// is left: from's fallback place goes to the end of the list, and the
// switch is recorded in the AutoFailover policy with the wait the new
// region observes. It refuses (ErrConflict) when the policy changed since
// it was read, from is no longer active, automatic failover is off, or a
// session of from exists; nothing is written then.
func (s *Store) SwitchActiveRegion(ctx context.Context, tenant, ns, from, to string, at time.Time, wait time.Duration) (Policies, error) {
	key := s.key(namespaceParts(tenant, ns)...)
	p, modRev, err := getRecord[Policies](ctx, s, key)
	if err != nil {
		return Policies{}, err
	}
	a, on := p.AutoFailover()
	if !on || p.ActiveRegion != from {
		return Policies{}, fmt.Errorf("%w: %s/%s: active region %q (automatic failover %v), not %q", ErrConflict, tenant, ns, p.ActiveRegion, on, from)
	}
	next := p.Clone()
	next.ActiveRegion = to
	next.SetFallbackRegions(append(slices.DeleteFunc(p.FallbackRegions(), func(r string) bool { return r == to }), from))
	a.LastSwitch = &FailoverSwitch{From: from, To: to, AtMillis: at.UnixMilli(), DispatchWaitMillis: wait.Milliseconds()}
	next.SetAutoFailover(&a)
	next.normalize()
	if err := next.validate(); err != nil {
		return Policies{}, err
	}
	data, err := meta.EncodeJSON(recordVersion, next)
	if err != nil {
		return Policies{}, err
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	if _, err := s.st.UpdateIfNone(octx, key, data, modRev, s.FailoverSessionsPrefix(from)); err != nil {
		return Policies{}, fail("switch", key, err)
	}
	s.log.Warn("active region switched by automatic failover", "namespace", tenant+"/"+ns, "from", from, "to", to, "dispatch_wait", wait)
	return next, nil
}

// GrantLease grants a lease of ttl in the global store, kept alive by the
// store until it is revoked, cannot be renewed, or ctx ends
// (meta.Store.Grant): a broker's failover session. ctx must therefore live
// as long as the session, and also bounds the grant itself.
func (s *Store) GrantLease(ctx context.Context, ttl time.Duration) (meta.Lease, error) {
	l, err := s.st.Grant(ctx, ttl)
	if err != nil {
		return nil, fail("grant", "a lease", err)
	}
	return l, nil
}

// LeaseTimeLeftSlack is how much more than a lease has left LeaseTimeLeft
// may report: etcd counts whole seconds.
const LeaseTimeLeftSlack = time.Second

// LeaseTimeLeft is at most how long lease id has left, as the store sees
// it (and at least that less LeaseTimeLeftSlack), and the TTL it was
// granted, or meta.ErrLeaseNotFound once it has ended.
func (s *Store) LeaseTimeLeft(ctx context.Context, id meta.LeaseID) (left, granted time.Duration, err error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	left, granted, err = s.st.TimeToLive(ctx, id)
	if errors.Is(err, meta.ErrLeaseNotFound) {
		return 0, 0, err
	}
	if err != nil {
		return 0, 0, fail("time-to-live", "a lease", err)
	}
	return left, granted, nil
}
