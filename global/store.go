package global

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/topology"
)

// Config configures a Store.
type Config struct {
	// Prefix is the root of the global configuration in etcd. Default
	// /meridian/global (DESIGN §3); another value only lets tests or several
	// independent deployments share one etcd. No trailing slash.
	Prefix string
	// MaxUpdateAttempts bounds how often an update re-reads and re-applies
	// its change after losing a compare-and-swap to a concurrent writer (see
	// Store's doc). Past it the update fails with ErrConflict. Each attempt
	// is one read and one write to etcd. Default 8; between 1 and 100.
	MaxUpdateAttempts int
	// RequestTimeout bounds each call to the metadata store, so that an
	// admin request fails with ErrUnavailable instead of hanging while the
	// global etcd is unreachable. Default 10s; at least 100ms.
	RequestTimeout time.Duration
	// DefaultBundles is the bundle count of a namespace created without
	// bundles. Default 4 (Pulsar's defaultNumberOfNamespaceBundles); between
	// 1 and 1024.
	DefaultBundles int
	// Logger receives the store's records. Nil discards them; the
	// assembly hands its region's logger.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults documented on Config, without a
// logger.
func DefaultConfig() Config {
	return Config{
		Prefix:            meta.Root + "/global",
		MaxUpdateAttempts: 8,
		RequestTimeout:    10 * time.Second,
		DefaultBundles:    topology.DefaultBundleCount,
	}
}

// Validate reports a field out of bounds.
func (c Config) Validate() error {
	switch {
	case !strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/"):
		return fmt.Errorf("global: Config.Prefix %q must start with '/' and not end with one", c.Prefix)
	case c.MaxUpdateAttempts < 1 || c.MaxUpdateAttempts > 100:
		return fmt.Errorf("global: Config.MaxUpdateAttempts must be in [1, 100], got %d", c.MaxUpdateAttempts)
	case c.RequestTimeout < 100*time.Millisecond:
		return fmt.Errorf("global: Config.RequestTimeout must be at least 100ms, got %v", c.RequestTimeout)
	case c.DefaultBundles < 1 || c.DefaultBundles > 1024:
		return fmt.Errorf("global: Config.DefaultBundles must be in [1, 1024], got %d", c.DefaultBundles)
	}
	return nil
}

// Receipt identifies one write, so that a Cache in the same process can wait
// until it has seen it (Cache.Await): an admin write followed by a read from
// the cache then reads its own write.
type Receipt struct {
	// Key is the etcd key written.
	Key string
	// Revision is the key's new ModRevision, or, when Deleted, the
	// ModRevision of the version that was deleted (meta.Store.Delete does
	// not report the revision of a deletion).
	Revision int64
	Deleted  bool
}

// Store reads and writes the global configuration in the metadata store: the
// cluster registry, tenants, namespaces and topic records. It is the write
// path of the admin API; the data path reads a Cache instead. A Store has no
// goroutines and is safe for concurrent use.
//
// Every write is conditional (DESIGN §3): creates require CreateRevision == 0
// and updates and deletes the ModRevision just read.
//
// Why updates retry, when ownership never does. A failed CAS on a ledger list
// or a cursor means another process owns the thing now, and retrying would
// overwrite the winner's state. An admin update is different: it is the
// caller's intent (set the TTL, add a role, allow a cluster) expressed as a
// function of the current record, and re-applying that function to the
// winner's newer record merges both changes instead of discarding one. So an
// update re-reads, re-applies, re-validates against the new state and tries
// again, at most MaxUpdateAttempts times; the mutate function must therefore
// be a pure function of its argument (it may run several times).
//
// Cross-record rules (a namespace's clusters must be allowed by its tenant,
// a cluster in use cannot be deleted, a tenant with namespaces cannot be
// deleted) are checked by reading the other records just before the
// conditional write. etcd offers no multi-key condition here (the meta.Store
// CAS is per key), so two admins racing on two different records (one
// deleting a tenant while another creates a namespace in it) can still leave
// a dangling reference; Pulsar's ZooKeeper-based checks have the same window.
// Readers therefore treat a missing parent as "not found", never as a crash.
type Store struct {
	st  meta.Store
	cfg Config
	log *slog.Logger
}

// NewStore returns a Store over st, which it does not own (Close st
// yourself).
func NewStore(st meta.Store, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{st: st, cfg: cfg, log: log}, nil
}

// Prefix is the root of the store's keys, as configured.
func (s *Store) Prefix() string { return s.cfg.Prefix }

func (s *Store) key(parts ...string) string { return s.cfg.Prefix + meta.Key(parts...) }

func clusterParts(name string) []string         { return []string{kindClusters, name} }
func tenantParts(name string) []string          { return []string{kindTenants, name} }
func namespaceParts(tenant, ns string) []string { return []string{kindNamespaces, tenant, ns} }
func topicParts(t topology.TopicName) []string {
	return []string{kindTopics, t.Tenant, t.Namespace, string(t.Domain), t.Local}
}

// The first key segment under the prefix says what a record is.
const (
	kindClusters   = "clusters"
	kindTenants    = "tenants"
	kindNamespaces = "namespaces"
	kindTopics     = "topics"
)

// fail classifies a metadata store error into this package's sentinels,
// keeping the original in the chain.
func fail(op, key string, err error) error {
	switch {
	case errors.Is(err, meta.ErrNotFound):
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	case errors.Is(err, meta.ErrExists):
		return fmt.Errorf("%w: %s", ErrExists, key)
	case errors.Is(err, meta.ErrConflict):
		return fmt.Errorf("%w: %s %s", ErrConflict, op, key)
	case errors.Is(err, meta.ErrValueVersion):
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, key, err)
	}
	return fmt.Errorf("%w: %s %s: %w", ErrUnavailable, op, key, err)
}

// checkTopic accepts a V2 topic name and returns the partitioned topic it
// belongs to: topic records are per partitioned topic, never per partition.
func checkTopic(t topology.TopicName) (topology.TopicName, error) {
	if t.Cluster != "" {
		return t, fmt.Errorf("%w: %s: V1 topic names (with a cluster) have no global record", ErrInvalidName, t)
	}
	if t.Tenant == "" || t.Namespace == "" || t.Local == "" {
		return t, fmt.Errorf("%w: topic %q: parse it with topology.ParseTopicName", ErrInvalidName, t.String())
	}
	return t.Base(), nil
}

func (s *Store) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.RequestTimeout)
}

// getRecord reads and decodes one record and returns its ModRevision.
func getRecord[T any](ctx context.Context, s *Store, key string) (T, int64, error) {
	var v T
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	kv, err := s.st.Get(ctx, key)
	if err != nil {
		return v, 0, fail("get", key, err)
	}
	if err := decodeRecord(kv.Value, &v); err != nil {
		return v, 0, fmt.Errorf("%s: %w", key, err)
	}
	return v, kv.ModRevision, nil
}

func decodeRecord(data []byte, v any) error {
	if _, err := meta.DecodeJSON(data, recordVersion, v); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return nil
}

// listRecords reads every record directly under prefix (a key ending in
// '/'), decoded, keyed by their etcd key.
func listRecords[T any](ctx context.Context, s *Store, prefix string) (map[string]T, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	kvs, _, err := s.st.List(ctx, prefix)
	if err != nil {
		return nil, fail("list", prefix, err)
	}
	out := make(map[string]T, len(kvs))
	for _, kv := range kvs {
		var v T
		if err := decodeRecord(kv.Value, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", kv.Key, err)
		}
		out[kv.Key] = v
	}
	return out, nil
}

func (s *Store) create(ctx context.Context, key string, v any) (Receipt, error) {
	data, err := meta.EncodeJSON(recordVersion, v)
	if err != nil {
		return Receipt{}, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	rev, err := s.st.Create(ctx, key, data, meta.NoLease)
	if err != nil {
		return Receipt{}, fail("create", key, err)
	}
	s.log.Info("global config created", "key", key, "revision", rev)
	return Receipt{Key: key, Revision: rev}, nil
}

// update is the bounded read-modify-CAS loop described on Store. check
// validates the mutated record against the rest of the store (and against
// the record it replaces); it runs on every attempt, because the state it
// checks may be what the winner changed.
func update[T any](ctx context.Context, s *Store, key string, clone func(T) T, mutate func(*T) error,
	check func(ctx context.Context, old, next *T) error) (T, Receipt, error) {
	var zero T
	for attempt := 1; ; attempt++ {
		old, modRev, err := getRecord[T](ctx, s, key)
		if err != nil {
			return zero, Receipt{}, err
		}
		next := clone(old)
		if err := mutate(&next); err != nil {
			return zero, Receipt{}, err
		}
		if err := check(ctx, &old, &next); err != nil {
			return zero, Receipt{}, err
		}
		data, err := meta.EncodeJSON(recordVersion, next)
		if err != nil {
			return zero, Receipt{}, err
		}
		// A change that changes nothing is not written: repeated bootstraps
		// and idempotent admin calls leave the revision, and the caches and
		// subscribers of every region, alone.
		if was, err := meta.EncodeJSON(recordVersion, old); err == nil && bytes.Equal(was, data) {
			return next, Receipt{Key: key, Revision: modRev}, nil
		}
		octx, cancel := s.opCtx(ctx)
		rev, err := s.st.Update(octx, key, data, modRev)
		cancel()
		if err == nil {
			s.log.Info("global config updated", "key", key, "revision", rev, "attempt", attempt)
			return next, Receipt{Key: key, Revision: rev}, nil
		}
		if !errors.Is(err, meta.ErrConflict) || attempt >= s.cfg.MaxUpdateAttempts {
			return zero, Receipt{}, fail("update", key, err)
		}
		s.log.Debug("global config update lost a race; re-applying to the newer record", "key", key, "attempt", attempt)
	}
}

func (s *Store) remove(ctx context.Context, key string, modRev int64) (Receipt, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	if err := s.st.Delete(ctx, key, modRev); err != nil {
		return Receipt{}, fail("delete", key, err)
	}
	s.log.Info("global config deleted", "key", key)
	return Receipt{Key: key, Revision: modRev, Deleted: true}, nil
}

// names lists the unescaped last segments of the keys directly under
// prefix (one level: deeper keys are skipped).
func (s *Store) names(ctx context.Context, prefix string) ([]string, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	kvs, _, err := s.st.List(ctx, prefix)
	if err != nil {
		return nil, fail("list", prefix, err)
	}
	out := []string{}
	for _, kv := range kvs {
		rest := kv.Key[len(prefix):]
		if strings.Contains(rest, "/") {
			continue
		}
		name, err := meta.Name(kv.Key)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		out = append(out, name)
	}
	return out, nil
}

// ---- clusters ----

// CreateCluster registers a region.
func (s *Store) CreateCluster(ctx context.Context, name string, d ClusterData) (Receipt, error) {
	if err := validName("cluster", name); err != nil {
		return Receipt{}, err
	}
	if err := d.Validate(); err != nil {
		return Receipt{}, err
	}
	return s.create(ctx, s.key(clusterParts(name)...), d)
}

// Cluster reads a region's entry.
func (s *Store) Cluster(ctx context.Context, name string) (ClusterData, error) {
	d, _, err := getRecord[ClusterData](ctx, s, s.key(clusterParts(name)...))
	return d, err
}

// Clusters lists the registered regions, sorted.
func (s *Store) Clusters(ctx context.Context) ([]string, error) {
	return s.names(ctx, meta.Prefix(s.key(kindClusters)))
}

// UpdateCluster applies mutate to the region's entry (see Store on
// retries).
func (s *Store) UpdateCluster(ctx context.Context, name string, mutate func(*ClusterData) error) (ClusterData, Receipt, error) {
	return update(ctx, s, s.key(clusterParts(name)...), func(d ClusterData) ClusterData { return d }, mutate,
		func(_ context.Context, _, next *ClusterData) error { return next.Validate() })
}

// DeleteCluster removes a region that no tenant allows and no namespace or
// topic replicates to (else ErrClusterInUse).
func (s *Store) DeleteCluster(ctx context.Context, name string) (Receipt, error) {
	key := s.key(clusterParts(name)...)
	_, modRev, err := getRecord[ClusterData](ctx, s, key)
	if err != nil {
		return Receipt{}, err
	}
	if err := s.clusterUnused(ctx, name); err != nil {
		return Receipt{}, err
	}
	return s.remove(ctx, key, modRev)
}

func (s *Store) clusterUnused(ctx context.Context, name string) error {
	tenants, err := listRecords[TenantInfo](ctx, s, meta.Prefix(s.key(kindTenants)))
	if err != nil {
		return err
	}
	for key, t := range tenants {
		if slices.Contains(t.AllowedClusters, name) {
			return fmt.Errorf("%w: %s is allowed by tenant %s", ErrClusterInUse, name, lastName(key))
		}
	}
	nss, err := listRecords[Policies](ctx, s, meta.Prefix(s.key(kindNamespaces)))
	if err != nil {
		return err
	}
	for key, p := range nss {
		if slices.Contains(p.ReplicationClusters, name) || p.ActiveRegion == name {
			return fmt.Errorf("%w: %s is used by namespace %s", ErrClusterInUse, name, key)
		}
	}
	topics, err := listRecords[TopicPolicies](ctx, s, meta.Prefix(s.key(kindTopics)))
	if err != nil {
		return err
	}
	for key, p := range topics {
		if slices.Contains(p.ReplicationClusters, name) {
			return fmt.Errorf("%w: %s is used by topic %s", ErrClusterInUse, name, key)
		}
	}
	return nil
}

func lastName(key string) string {
	n, err := meta.Name(key)
	if err != nil {
		return key
	}
	return n
}

// ---- tenants ----

// CreateTenant creates a tenant whose allowed clusters all exist.
func (s *Store) CreateTenant(ctx context.Context, name string, t TenantInfo) (Receipt, error) {
	if err := validName("tenant", name); err != nil {
		return Receipt{}, err
	}
	t = t.Clone()
	t.normalize()
	if err := t.validate(); err != nil {
		return Receipt{}, err
	}
	if err := s.clustersExist(ctx, t.AllowedClusters, ErrInvalidTenant); err != nil {
		return Receipt{}, err
	}
	return s.create(ctx, s.key(tenantParts(name)...), t)
}

// Tenant reads a tenant.
func (s *Store) Tenant(ctx context.Context, name string) (TenantInfo, error) {
	t, _, err := getRecord[TenantInfo](ctx, s, s.key(tenantParts(name)...))
	return t, err
}

// Tenants lists the tenants, sorted.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	return s.names(ctx, meta.Prefix(s.key(kindTenants)))
}

// UpdateTenant applies mutate to a tenant (see Store on retries). Newly
// allowed clusters must exist, and a cluster that one of the tenant's
// namespaces or topics still uses cannot stop being allowed
// (ErrClusterInUse), as in Pulsar.
func (s *Store) UpdateTenant(ctx context.Context, name string, mutate func(*TenantInfo) error) (TenantInfo, Receipt, error) {
	return update(ctx, s, s.key(tenantParts(name)...), TenantInfo.Clone, mutate,
		func(ctx context.Context, old, next *TenantInfo) error {
			next.normalize()
			if err := next.validate(); err != nil {
				return err
			}
			var added, removed []string
			for _, c := range next.AllowedClusters {
				if !slices.Contains(old.AllowedClusters, c) {
					added = append(added, c)
				}
			}
			for _, c := range old.AllowedClusters {
				if !slices.Contains(next.AllowedClusters, c) {
					removed = append(removed, c)
				}
			}
			if err := s.clustersExist(ctx, added, ErrInvalidTenant); err != nil {
				return err
			}
			if len(removed) == 0 {
				return nil
			}
			return s.tenantDoesNotUse(ctx, name, removed)
		})
}

// tenantDoesNotUse fails with ErrClusterInUse when a namespace or topic of
// tenant uses one of clusters.
func (s *Store) tenantDoesNotUse(ctx context.Context, tenant string, clusters []string) error {
	uses := func(list []string, active string) string {
		for _, c := range clusters {
			if slices.Contains(list, c) || c == active {
				return c
			}
		}
		return ""
	}
	nss, err := listRecords[Policies](ctx, s, meta.Prefix(s.key(kindNamespaces, tenant)))
	if err != nil {
		return err
	}
	for key, p := range nss {
		if c := uses(p.ReplicationClusters, p.ActiveRegion); c != "" {
			return fmt.Errorf("%w: namespace %s/%s replicates to %s", ErrClusterInUse, tenant, lastName(key), c)
		}
	}
	topics, err := listRecords[TopicPolicies](ctx, s, meta.Prefix(s.key(kindTopics, tenant)))
	if err != nil {
		return err
	}
	for key, p := range topics {
		if c := uses(p.ReplicationClusters, ""); c != "" {
			return fmt.Errorf("%w: topic %s replicates to %s", ErrClusterInUse, key, c)
		}
	}
	return nil
}

// DeleteTenant removes a tenant that has no namespaces (else
// ErrTenantNotEmpty).
func (s *Store) DeleteTenant(ctx context.Context, name string) (Receipt, error) {
	key := s.key(tenantParts(name)...)
	_, modRev, err := getRecord[TenantInfo](ctx, s, key)
	if err != nil {
		return Receipt{}, err
	}
	nss, err := s.Namespaces(ctx, name)
	if err != nil {
		return Receipt{}, err
	}
	if len(nss) > 0 {
		return Receipt{}, fmt.Errorf("%w: %s has %d namespace(s), for example %s", ErrTenantNotEmpty, name, len(nss), nss[0])
	}
	return s.remove(ctx, key, modRev)
}

// clustersExist fails with kind (wrapping ErrNotFound) when a cluster is
// not registered.
func (s *Store) clustersExist(ctx context.Context, clusters []string, kind error) error {
	for _, c := range clusters {
		if _, err := s.Cluster(ctx, c); err != nil {
			if errors.Is(err, ErrNotFound) {
				return fmt.Errorf("%w: cluster %q does not exist (%w)", kind, c, ErrNotFound)
			}
			return err
		}
	}
	return nil
}

// ---- namespaces ----

// CreateNamespace creates tenant/ns. Bundles default to Config.DefaultBundles
// even bundles. Its replication clusters (and active region) must exist
// and be allowed by the tenant (ErrNotAllowedCluster). An empty list means
// no geo-replication; the admin API fills in the local cluster, as Pulsar
// does, because only it knows which region it serves.
func (s *Store) CreateNamespace(ctx context.Context, tenant, ns string, p Policies) (Receipt, error) {
	if err := validName("tenant", tenant); err != nil {
		return Receipt{}, err
	}
	if err := validName("namespace", ns); err != nil {
		return Receipt{}, err
	}
	p = p.Clone()
	if p.Bundles == nil {
		b, err := EvenBundlesData(s.cfg.DefaultBundles)
		if err != nil {
			return Receipt{}, err
		}
		p.Bundles = &b
	}
	p.normalize()
	if err := p.validate(); err != nil {
		return Receipt{}, err
	}
	ti, err := s.Tenant(ctx, tenant)
	if err != nil {
		return Receipt{}, fmt.Errorf("namespace %s/%s: tenant: %w", tenant, ns, err)
	}
	if err := s.clustersAllowed(ctx, ti, p.ReplicationClusters); err != nil {
		return Receipt{}, err
	}
	return s.create(ctx, s.key(namespaceParts(tenant, ns)...), p)
}

// clustersAllowed fails with ErrNotAllowedCluster when a cluster is not in
// the tenant's allowed clusters or is not registered.
func (s *Store) clustersAllowed(ctx context.Context, t TenantInfo, clusters []string) error {
	for _, c := range clusters {
		if !slices.Contains(t.AllowedClusters, c) {
			return fmt.Errorf("%w: %q is not among the tenant's allowed clusters %v", ErrNotAllowedCluster, c, t.AllowedClusters)
		}
	}
	return s.clustersExist(ctx, clusters, ErrNotAllowedCluster)
}

// Namespace reads tenant/ns's policies.
func (s *Store) Namespace(ctx context.Context, tenant, ns string) (Policies, error) {
	p, _, err := getRecord[Policies](ctx, s, s.key(namespaceParts(tenant, ns)...))
	return p, err
}

// Namespaces lists a tenant's namespaces (their own segment, without the
// tenant), sorted.
func (s *Store) Namespaces(ctx context.Context, tenant string) ([]string, error) {
	return s.names(ctx, meta.Prefix(s.key(kindNamespaces, tenant)))
}

// UpdateNamespace applies mutate to tenant/ns's policies (see Store on
// retries), with CreateNamespace's cluster rules.
func (s *Store) UpdateNamespace(ctx context.Context, tenant, ns string, mutate func(*Policies) error) (Policies, Receipt, error) {
	return update(ctx, s, s.key(namespaceParts(tenant, ns)...), Policies.Clone, mutate,
		func(ctx context.Context, _, next *Policies) error {
			next.normalize()
			if next.Bundles == nil {
				return fmt.Errorf("%w: bundles cannot be removed from a namespace", ErrInvalidPolicies)
			}
			if err := next.validate(); err != nil {
				return err
			}
			ti, err := s.Tenant(ctx, tenant)
			if err != nil {
				return fmt.Errorf("namespace %s/%s: tenant: %w", tenant, ns, err)
			}
			return s.clustersAllowed(ctx, ti, next.ReplicationClusters)
		})
}

// DeleteNamespace removes tenant/ns when it has no topic records (else
// ErrNamespaceNotEmpty).
func (s *Store) DeleteNamespace(ctx context.Context, tenant, ns string) (Receipt, error) {
	key := s.key(namespaceParts(tenant, ns)...)
	_, modRev, err := getRecord[Policies](ctx, s, key)
	if err != nil {
		return Receipt{}, err
	}
	topics, err := s.Topics(ctx, tenant, ns)
	if err != nil {
		return Receipt{}, err
	}
	if len(topics) > 0 {
		return Receipt{}, fmt.Errorf("%w: %s/%s has %d topic record(s), for example %s", ErrNamespaceNotEmpty, tenant, ns, len(topics), topics[0])
	}
	return s.remove(ctx, key, modRev)
}

// ---- topics ----

// CreateTopic creates the record of a topic (of its partitioned topic, when
// given a partition): partitioned-topic metadata and topic-level policies.
// The namespace must exist, and replication clusters must be allowed by the
// tenant.
func (s *Store) CreateTopic(ctx context.Context, topic topology.TopicName, p TopicPolicies) (Receipt, error) {
	topic, err := checkTopic(topic)
	if err != nil {
		return Receipt{}, err
	}
	p = p.Clone()
	p.normalize()
	if err := p.validate(); err != nil {
		return Receipt{}, err
	}
	if err := s.topicClustersAllowed(ctx, topic, &p); err != nil {
		return Receipt{}, err
	}
	return s.create(ctx, s.key(topicParts(topic)...), p)
}

func (s *Store) topicClustersAllowed(ctx context.Context, topic topology.TopicName, p *TopicPolicies) error {
	if _, err := s.Namespace(ctx, topic.Tenant, topic.Namespace); err != nil {
		return fmt.Errorf("topic %s: namespace: %w", topic, err)
	}
	if p.ReplicationClusters == nil {
		return nil
	}
	ti, err := s.Tenant(ctx, topic.Tenant)
	if err != nil {
		return fmt.Errorf("topic %s: tenant: %w", topic, err)
	}
	return s.clustersAllowed(ctx, ti, p.ReplicationClusters)
}

// Topic reads a topic's record.
func (s *Store) Topic(ctx context.Context, topic topology.TopicName) (TopicPolicies, error) {
	topic, err := checkTopic(topic)
	if err != nil {
		return TopicPolicies{}, err
	}
	p, _, err := getRecord[TopicPolicies](ctx, s, s.key(topicParts(topic)...))
	return p, err
}

// Topics lists the topics of tenant/ns that have a record, sorted by name.
func (s *Store) Topics(ctx context.Context, tenant, ns string) ([]topology.TopicName, error) {
	prefix := meta.Prefix(s.key(kindTopics, tenant, ns))
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	kvs, _, err := s.st.List(ctx, prefix)
	if err != nil {
		return nil, fail("list", prefix, err)
	}
	out := []topology.TopicName{}
	for _, kv := range kvs {
		t, ok := parseTopicKey(tenant, ns, kv.Key[len(prefix):])
		if ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// parseTopicKey turns "<domain>/<local>" (escaped) into a topic name.
func parseTopicKey(tenant, ns, rest string) (topology.TopicName, bool) {
	segs, ok := unescapeSegments(rest)
	if !ok || len(segs) != 2 {
		return topology.TopicName{}, false
	}
	t, err := topology.ParseTopicName(segs[0] + "://" + tenant + "/" + ns + "/" + segs[1])
	if err != nil {
		return topology.TopicName{}, false
	}
	return t, true
}

// UpdateTopic applies mutate to a topic's record (see Store on retries).
// Partitions may grow, never shrink.
func (s *Store) UpdateTopic(ctx context.Context, topic topology.TopicName, mutate func(*TopicPolicies) error) (TopicPolicies, Receipt, error) {
	topic, err := checkTopic(topic)
	if err != nil {
		return TopicPolicies{}, Receipt{}, err
	}
	return update(ctx, s, s.key(topicParts(topic)...), TopicPolicies.Clone, mutate,
		func(ctx context.Context, old, next *TopicPolicies) error {
			next.normalize()
			if err := next.validate(); err != nil {
				return err
			}
			if next.Partitions < old.Partitions {
				return fmt.Errorf("%w: partitions can only grow (%d -> %d)", ErrInvalidPolicies, old.Partitions, next.Partitions)
			}
			return s.topicClustersAllowed(ctx, topic, next)
		})
}

// DeleteTopic removes a topic's record.
func (s *Store) DeleteTopic(ctx context.Context, topic topology.TopicName) (Receipt, error) {
	topic, err := checkTopic(topic)
	if err != nil {
		return Receipt{}, err
	}
	key := s.key(topicParts(topic)...)
	_, modRev, err := getRecord[TopicPolicies](ctx, s, key)
	if err != nil {
		return Receipt{}, err
	}
	return s.remove(ctx, key, modRev)
}
