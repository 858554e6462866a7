package loadmgr

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Bundle split. A bundle's owner splits it in two halves of its hash range
// (Pulsar's range_equally_divide), keeping both, in an order chosen so that
// every topic of the bundle has an owner, and the same one, at every step:
//
//  1. claim both halves' ownership keys under this broker's session lease
//     (create-if-absent; the old bundle's key, under the same lease, still
//     stands);
//  2. CAS-update the namespace's bundle boundaries in the global store: from
//     here a broker whose cache shows the new boundaries finds a topic in
//     its half, owned by this broker, and one whose cache lags finds it in
//     the old bundle, owned by this broker too;
//  3. wait for this broker's policy cache to show the new boundaries, so
//     that its own lookups agree;
//  4. delete the old bundle's key.
//
// The loaded topics are not touched: a topic's bundle is computed from the
// policies on each lookup, and both answers name this broker, so producers
// and consumers keep their connections and send on. If step 2 fails, the
// halves' keys are deleted again and nothing changed. A broker whose
// cache still lags after step 4 could claim the old bundle for itself;
// storage fencing keeps that safe (its load fences the topic's ledger and
// this broker's copy unloads), and it lasts one watch delay.

// splitRange is Pulsar's range_equally_divide: the halves of b's range.
func splitRange(b topology.Bundle) (lo, hi topology.Bundle, err error) {
	if b.Upper-b.Lower < 2 {
		return lo, hi, fmt.Errorf("%w: bundle %s is too small to split", wire.ErrNotAllowed, b)
	}
	mid := b.Lower + (b.Upper-b.Lower)/2
	return topology.Bundle{Lower: b.Lower, Upper: mid}, topology.Bundle{Lower: mid, Upper: b.Upper}, nil
}

// namespaceBundles returns p's bundles, or the default bundles BundleOf
// uses for a namespace that has none (NamespaceBundles).
func namespaceBundles(p global.Policies) ([]topology.Bundle, error) {
	if p.Bundles == nil {
		return topology.EvenBundles(topology.DefaultBundleCount)
	}
	return p.Bundles.Bundles()
}

// bundlesData is bs in Pulsar's boundary form.
func bundlesData(bs []topology.Bundle) *global.BundlesData {
	d := &global.BundlesData{NumBundles: len(bs), Boundaries: make([]string, 0, len(bs)+1)}
	for _, b := range bs {
		d.Boundaries = append(d.Boundaries, fmt.Sprintf("0x%08x", b.Lower))
	}
	d.Boundaries = append(d.Boundaries, fmt.Sprintf("0x%08x", bs[len(bs)-1].Upper))
	return d
}

// SplitBundle splits tenant/ns's bundle b, which this broker must own, in
// two halves, which it keeps and returns (see the file comment). A bundle
// that is not one of the namespace's is ErrBundleNotFound; one owned
// elsewhere is wire.ErrServiceNotReady, naming its owner.
func (m *Manager) SplitBundle(ctx context.Context, tenant, ns string, b topology.Bundle) (lo, hi topology.Bundle, err error) {
	bundles, err := m.NamespaceBundles(tenant, ns)
	if err != nil {
		return lo, hi, err
	}
	if !slices.Contains(bundles, b) {
		return lo, hi, fmt.Errorf("%w: %s is not a bundle of %s/%s", ErrBundleNotFound, b, tenant, ns)
	}
	lo, hi, err = splitRange(b)
	if err != nil {
		return lo, hi, err
	}
	owner, mine, err := m.own.acquire(ctx, tenant, ns, b, placeHere)
	if err != nil {
		return lo, hi, err
	}
	if !mine {
		return lo, hi, fmt.Errorf("%w: bundle %s of %s/%s is served by %s", wire.ErrServiceNotReady, b, tenant, ns, owner.BrokerID)
	}
	l, err := m.own.currentLease(ctx)
	if err != nil {
		return lo, hi, err
	}
	var claimed []string
	release := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.CloseTimeout)
		defer cancel()
		for _, key := range claimed {
			m.own.deleteOwnKey(dctx, key, l.ID())
		}
	}
	for _, half := range []topology.Bundle{lo, hi} {
		key := m.own.bundleKey(tenant, ns, half)
		created, err := m.own.claimUnder(ctx, key, l.ID())
		if err != nil {
			release()
			return lo, hi, err
		}
		if created {
			claimed = append(claimed, key)
		}
	}
	_, rc, err := m.gstore.UpdateNamespace(ctx, tenant, ns, func(p *global.Policies) error {
		cur, err := namespaceBundles(*p)
		if err != nil {
			return err
		}
		i := slices.Index(cur, b)
		if i < 0 {
			return fmt.Errorf("%w: %s is no longer a bundle of %s/%s", ErrBundleNotFound, b, tenant, ns)
		}
		p.Bundles = bundlesData(slices.Replace(cur, i, i+1, lo, hi))
		return nil
	})
	if err != nil {
		release()
		if errors.Is(err, global.ErrNotFound) {
			return lo, hi, fmt.Errorf("%w: namespace %s/%s does not exist", wire.ErrTopicNotFound, tenant, ns)
		}
		return lo, hi, fmt.Errorf("split %s of %s/%s: %w", b, tenant, ns, err)
	}
	if err := m.policies.Await(ctx, rc); err != nil {
		// The split is made; the old key goes with the lease at worst.
		return lo, hi, fmt.Errorf("split %s of %s/%s: waiting for the policy cache: %w", b, tenant, ns, err)
	}
	m.own.deleteOwnKey(ctx, m.own.bundleKey(tenant, ns, b), l.ID())
	m.metrics.balanced(balanceSplit)
	m.log.Info("split bundle", "namespace", tenant+"/"+ns, "bundle", b.String(), "into", []string{lo.String(), hi.String()})
	return lo, hi, nil
}

// claimUnder creates key as this broker's claim under lease; a key that
// is already this broker's under that lease (a split retried) is fine,
// and created is false for it. Anything else holding it is an error.
func (o *ownership) claimUnder(ctx context.Context, key string, lease meta.LeaseID) (created bool, err error) {
	v, err := meta.EncodeJSON(1, o.self)
	if err != nil {
		return false, err
	}
	_, err = o.store.Create(ctx, key, v, lease)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, meta.ErrExists) {
		return false, fmt.Errorf("%w: claim %s: %v", wire.ErrMetadata, key, err)
	}
	kv, err := o.store.Get(ctx, key)
	if err != nil {
		return false, fmt.Errorf("%w: read %s: %v", wire.ErrMetadata, key, err)
	}
	var w Owner
	if _, err := meta.DecodeJSON(kv.Value, 1, &w); err != nil || w.BrokerID != o.self.BrokerID || kv.Lease != lease {
		return false, fmt.Errorf("%w: %s is held by %s", wire.ErrServiceNotReady, key, w.BrokerID)
	}
	return false, nil
}

// deleteOwnKey deletes key if it is still this broker's claim under
// lease; a failure is logged (the key goes with the lease at worst).
func (o *ownership) deleteOwnKey(ctx context.Context, key string, lease meta.LeaseID) {
	kv, err := o.store.Get(ctx, key)
	if errors.Is(err, meta.ErrNotFound) {
		return
	}
	if err == nil && kv.Lease == lease {
		err = o.store.Delete(ctx, key, kv.ModRevision)
	}
	if err != nil && !errors.Is(err, meta.ErrConflict) && !errors.Is(err, meta.ErrNotFound) {
		o.log.Warn("deleting a bundle claim", "key", key, "err", err)
	}
}

// splitHotBundles splits each bundle of the report that passes one of the
// LoadBalance bounds, while its namespace has fewer than MaxBundles.
// Bundles of one topic are left alone, as Pulsar does: a split cannot
// spread a single topic.
func (m *Manager) splitHotBundles(r LoadReport) {
	cfg := m.cfg.LoadBalance
	for _, name := range r.Bundles {
		st := r.LastStats[name]
		hot := st.TopicsCount > int64(cfg.BundleMaxTopics) ||
			st.ProducerCount+st.ConsumerCount > cfg.BundleMaxSessions ||
			st.MsgRateIn+st.MsgRateOut > cfg.BundleMaxMsgRate ||
			st.MsgThroughputIn+st.MsgThroughputOut > cfg.BundleMaxThroughput
		if !hot || st.TopicsCount < 2 {
			continue
		}
		tenant, ns, b, err := parseBundleName(name)
		if err != nil {
			continue
		}
		if bs, err := m.NamespaceBundles(tenant, ns); err != nil || len(bs) >= cfg.MaxBundles {
			continue
		}
		ctx, cancel := context.WithTimeout(m.ctx, m.cfg.TopicLoadTimeout)
		_, _, err = m.SplitBundle(ctx, tenant, ns, b)
		cancel()
		if err == nil {
			m.metrics.split()
		}
		if err != nil && m.ctx.Err() == nil {
			m.log.Warn("automatic bundle split failed", "namespace", tenant+"/"+ns, "bundle", b.String(), "err", err)
		}
	}
}
