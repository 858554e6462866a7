package global

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/topology"
)

// Fences: a region cut off, for some topics of one namespace only, by a
// drill (`meridian drill --cut isolate`). While a fence is in the store the
// fenced region's brokers close those topics' clients and refuse new ones,
// and replication of those topics to and from the region stops
// (cluster/broker's fence.go). Every other topic is untouched.
//
//	fences/<tenant>/<namespace>/<name>   Fence, under a lease of its own
//
// Why a lease that nobody keeps alive. The fence must end by itself when
// the drill that holds it dies, even by SIGKILL, and it must not depend on
// the broker that served the request staying up either. So the lease is
// granted and its keep-alive stopped at once: it lapses one TTL later,
// and the key with it, unless the holder renews the fence first. A renewal
// grants a fresh lease the same way and moves the key onto it in one
// compare-and-swap (meta.Store.MoveToLease), so any broker of any region
// can serve it, and a fence is never briefly absent. A holder therefore
// renews well within the TTL (the drill does at a third of it).

const kindFences = "fences"

// MinFenceTTL and MaxFenceTTL bound a fence's TTL: below the minimum a
// renewal crossing a loaded network would miss its turn; above the
// maximum a killed drill would leave a region fenced too long.
const (
	MinFenceTTL = 3 * time.Second
	MaxFenceTTL = 5 * time.Minute
)

// Fence cuts Region off for the topics of Tenant/Namespace whose local
// name starts with TopicPrefix.
type Fence struct {
	// Tenant, Namespace and Name are the fence's key.
	Tenant    string `json:"-"`
	Namespace string `json:"-"`
	Name      string `json:"-"`
	// Region is the region fenced.
	Region string `json:"region"`
	// TopicPrefix is the prefix of the local names of the topics fenced;
	// never empty, so a fence never takes a whole namespace.
	TopicPrefix string `json:"topicPrefix"`
	// TTLSeconds is how long the fence outlives its last renewal.
	TTLSeconds int `json:"ttlSeconds"`
	// Holder says who holds the fence (the admin role), for operators.
	Holder string `json:"holder,omitempty"`
	// CreatedMillis is when the fence was created (Unix milliseconds).
	CreatedMillis int64 `json:"createdMillis"`
	// Lease is the lease the key lives under (from the store).
	Lease meta.LeaseID `json:"-"`
}

// TTL is TTLSeconds as a duration.
func (f Fence) TTL() time.Duration { return time.Duration(f.TTLSeconds) * time.Second }

// Covers reports whether f fences t in region: t is in f's namespace and
// its local name (a partition's included) starts with f's prefix.
func (f Fence) Covers(region string, t topology.TopicName) bool {
	return region == f.Region && t.Tenant == f.Tenant && t.Namespace == f.Namespace &&
		f.TopicPrefix != "" && strings.HasPrefix(t.Local, f.TopicPrefix)
}

// validate checks the fence's fields, not the regions' existence.
func (f Fence) validate() error {
	switch {
	case f.Name == "" || strings.Contains(f.Name, "/"):
		return fmt.Errorf("%w: a fence's name must be one non-empty path segment, got %q", ErrInvalidName, f.Name)
	case f.Region == "":
		return fmt.Errorf("%w: a fence needs a region", ErrInvalidPolicies)
	case f.TopicPrefix == "":
		return fmt.Errorf("%w: a fence needs a topic prefix: it never fences a whole namespace", ErrInvalidPolicies)
	case f.TTL() < MinFenceTTL || f.TTL() > MaxFenceTTL:
		return fmt.Errorf("%w: a fence's TTL must be in [%v, %v], got %ds", ErrInvalidPolicies, MinFenceTTL, MaxFenceTTL, f.TTLSeconds)
	}
	return nil
}

func (s *Store) fenceKey(tenant, ns, name string) string { return s.key(kindFences, tenant, ns, name) }

// FenceKey is f's key in the store.
func (s *Store) FenceKey(f Fence) string { return s.fenceKey(f.Tenant, f.Namespace, f.Name) }

// FencesPrefix is the prefix of every fence's key, for a watch.
func (s *Store) FencesPrefix() string { return meta.Prefix(s.key(kindFences)) }

// lapsingLease grants a lease of ttl whose keep-alive is stopped at once:
// it ends one TTL later unless a key on it is moved to a newer one.
func (s *Store) lapsingLease(ctx context.Context, ttl time.Duration) (meta.LeaseID, error) {
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	gctx, cancel := s.opCtx(gctx)
	defer cancel()
	l, err := s.st.Grant(gctx, ttl)
	if err != nil {
		return 0, fail("grant", "a fence's lease", err)
	}
	return l.ID(), nil
}

// CreateFence stores f under a lease of its TTL, or ErrExists when a fence
// of that name is there. The caller checks that the region and namespace
// exist.
func (s *Store) CreateFence(ctx context.Context, f Fence, now time.Time) (Fence, error) {
	if err := f.validate(); err != nil {
		return Fence{}, err
	}
	f.CreatedMillis = now.UnixMilli()
	data, err := meta.EncodeJSON(recordVersion, f)
	if err != nil {
		return Fence{}, err
	}
	lease, err := s.lapsingLease(ctx, f.TTL())
	if err != nil {
		return Fence{}, err
	}
	key := s.fenceKey(f.Tenant, f.Namespace, f.Name)
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	if _, err := s.st.Create(octx, key, data, lease); err != nil {
		_ = s.st.Revoke(octx, lease)
		return Fence{}, fail("create", key, err)
	}
	f.Lease = lease
	s.log.Warn("fence created", "namespace", f.Tenant+"/"+f.Namespace, "fence", f.Name, "region", f.Region,
		"topic_prefix", f.TopicPrefix, "ttl", f.TTL(), "holder", f.Holder)
	return f, nil
}

// RenewFence gives the fence a whole TTL again, or ErrNotFound once it has
// lapsed or was removed.
func (s *Store) RenewFence(ctx context.Context, tenant, ns, name string) (Fence, error) {
	key := s.fenceKey(tenant, ns, name)
	f, kv, err := s.readFence(ctx, key)
	if err != nil {
		return Fence{}, err
	}
	lease, err := s.lapsingLease(ctx, f.TTL())
	if err != nil {
		return Fence{}, err
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	if _, err := s.st.MoveToLease(octx, key, kv.Value, kv.ModRevision, lease); err != nil {
		_ = s.st.Revoke(octx, lease)
		if errors.Is(err, meta.ErrConflict) {
			// Gone (lapsed or removed) between the read and the move; a
			// concurrent renewal is the other way, and the holder retries.
			if _, _, again := s.readFence(ctx, key); errors.Is(again, ErrNotFound) {
				return Fence{}, again
			}
		}
		return Fence{}, fail("renew", key, err)
	}
	// The old lease holds no key now; ending it tidies the store.
	_ = s.st.Revoke(octx, kv.Lease)
	f.Lease = lease
	return f, nil
}

// DeleteFence removes the fence; ErrNotFound when it is not there.
func (s *Store) DeleteFence(ctx context.Context, tenant, ns, name string) error {
	key := s.fenceKey(tenant, ns, name)
	f, kv, err := s.readFence(ctx, key)
	if err != nil {
		return err
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	if err := s.st.Delete(octx, key, kv.ModRevision); err != nil {
		return fail("delete", key, err)
	}
	_ = s.st.Revoke(octx, kv.Lease)
	s.log.Warn("fence removed", "namespace", tenant+"/"+ns, "fence", name, "region", f.Region)
	return nil
}

func (s *Store) readFence(ctx context.Context, key string) (Fence, meta.KV, error) {
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	kv, err := s.st.Get(octx, key)
	if err != nil {
		return Fence{}, kv, fail("get", key, err)
	}
	f, err := s.DecodeFence(kv)
	return f, kv, err
}

// DecodeFence reads one fence key as listed or watched.
func (s *Store) DecodeFence(kv meta.KV) (Fence, error) {
	var f Fence
	if err := decodeRecord(kv.Value, &f); err != nil {
		return f, fmt.Errorf("%s: %w", kv.Key, err)
	}
	segs, ok := unescapeSegments(strings.TrimPrefix(kv.Key, s.FencesPrefix()))
	if !ok || len(segs) != 3 {
		return f, fmt.Errorf("%w: %s is not a fence's key", ErrCorrupt, kv.Key)
	}
	f.Tenant, f.Namespace, f.Name, f.Lease = segs[0], segs[1], segs[2], kv.Lease
	return f, nil
}

// Fences lists the fences of tenant/ns, or of every namespace when tenant
// is empty, in key order, with the store revision read at.
func (s *Store) Fences(ctx context.Context, tenant, ns string) ([]Fence, int64, error) {
	prefix := s.FencesPrefix()
	if tenant != "" {
		prefix = meta.Prefix(s.key(kindFences, tenant, ns))
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	kvs, rev, err := s.st.List(octx, prefix)
	if err != nil {
		return nil, 0, fail("list", prefix, err)
	}
	out := make([]Fence, 0, len(kvs))
	for _, kv := range kvs {
		f, err := s.DecodeFence(kv)
		if err != nil {
			s.log.Error("fence not readable; ignored", "key", kv.Key, "err", err)
			continue
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b Fence) int {
		return strings.Compare(a.Tenant+"/"+a.Namespace+"/"+a.Name, b.Tenant+"/"+b.Namespace+"/"+b.Name)
	})
	return out, rev, nil
}

// WatchFences streams the changes to every fence from revision fromRev
// (see meta.Store.Watch).
func (s *Store) WatchFences(ctx context.Context, fromRev int64) <-chan meta.WatchResponse {
	return s.st.Watch(ctx, s.FencesPrefix(), fromRev)
}
