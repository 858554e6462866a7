package global

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/meridian-mq/meridian/topology"
)

// The records below are what Pulsar users see through the admin API, so
// their JSON field names are Pulsar's (as pulsar-client-go's pulsaradmin
// package spells them): a Policies marshalled here unmarshals into
// pulsaradmin's utils.Policies and back. In etcd each record is stored with a
// leading "v":1 (meta.EncodeJSON), which pulsaradmin ignores. Fields Pulsar
// has and Meridian does not enforce yet are kept, as their JSON, in the
// Extra map of Policies and TopicPolicies (see Extra); unknown fields in
// input are dropped.

// recordVersion is the "v" of every record this binary writes and the
// newest it reads.
const recordVersion = 1

// validName applies Pulsar's rule for tenant, namespace and cluster names
// (topology.ValidName).
func validName(kind, name string) error {
	if !topology.ValidName(name) {
		if len(name) > topology.MaxNameLength {
			return fmt.Errorf("%w: %s name of %d bytes (at most %d)", ErrInvalidName, kind, len(name), topology.MaxNameLength)
		}
		return fmt.Errorf("%w: %s %q (use letters, digits, '_', '-', '=', ':', '.')", ErrInvalidName, kind, name)
	}
	return nil
}

// ClusterData is a region's entry in the cluster registry
// (/meridian/global/clusters/<region>): where its brokers answer, and how
// the other regions' replicators connect to them. It matches pulsaradmin's
// utils.ClusterData, plus Pulsar's tlsAllowInsecureConnection, which
// pulsaradmin does not carry.
type ClusterData struct {
	ServiceURL          string `json:"serviceUrl"`
	ServiceURLTLS       string `json:"serviceUrlTls"`
	BrokerServiceURL    string `json:"brokerServiceUrl"`
	BrokerServiceURLTLS string `json:"brokerServiceUrlTls"`

	// AuthenticationPlugin is the client authentication a replicator uses
	// towards this region, by Pulsar's class name
	// ("org.apache.pulsar.client.impl.auth.AuthenticationToken") or short
	// name ("token"); empty for none.
	AuthenticationPlugin string `json:"authenticationPlugin,omitempty"`
	// AuthenticationParameters are the plugin's parameters as Pulsar writes
	// them: for a token, "token:<jwt>" or {"token":"<jwt>"}. They are a
	// credential.
	AuthenticationParameters string `json:"authenticationParameters,omitempty"`
	// BrokerClientTLSEnabled makes replicators connect to
	// BrokerServiceURLTLS (pulsar+ssl) rather than BrokerServiceURL.
	BrokerClientTLSEnabled bool `json:"brokerClientTlsEnabled,omitempty"`
	// BrokerClientTrustCertsFilePath is a PEM file of the CAs a replicator
	// trusts for this region's TLS certificates; empty for the system's.
	BrokerClientTrustCertsFilePath string `json:"brokerClientTrustCertsFilePath,omitempty"`
	// TLSAllowInsecureConnection makes replicators accept any certificate
	// from this region: for tests only.
	TLSAllowInsecureConnection bool `json:"tlsAllowInsecureConnection,omitempty"`

	// MaintainedByRegion marks a record the region's first broker created:
	// while it is set, the region's leader keeps the broker service URLs
	// listing every live broker of the region, and the service URLs naming
	// one of them. An update through the admin API drops it
	// (pulsar-admin sends no such field), and the record is the operator's
	// from then on, never rewritten; one that sets it hands the record back.
	MaintainedByRegion bool `json:"maintainedByRegion,omitempty"`

	// Migration is the region's cluster migration (Pulsar's PIP-188,
	// POST /admin/v2/clusters/{cluster}/migrate): where its clients go once
	// it is migrated. Nil when it was never set. The cluster record's own
	// update keeps it.
	Migration *ClusterMigration `json:"migration,omitempty"`
}

// ClusterMigration is Pulsar's ClusterPolicies: whether the cluster is
// migrated and the cluster its clients move to.
type ClusterMigration struct {
	Migrated           bool       `json:"migrated"`
	MigratedClusterURL ClusterURL `json:"migratedClusterUrl"`
}

// ClusterURL is Pulsar's ClusterUrl: a cluster's web and broker service
// URLs, each of which may list several hosts.
type ClusterURL struct {
	ServiceURL          string `json:"serviceUrl,omitempty"`
	ServiceURLTLS       string `json:"serviceUrlTls,omitempty"`
	BrokerServiceURL    string `json:"brokerServiceUrl,omitempty"`
	BrokerServiceURLTLS string `json:"brokerServiceUrlTls,omitempty"`
}

// Empty reports a ClusterURL with no URL set.
func (u ClusterURL) Empty() bool { return u == ClusterURL{} }

// Validate checks each set URL's scheme as ClusterData.Validate does, and
// that a migration's target has a broker service URL, the one a client can
// be sent to (CommandTopicMigrated carries no web URL).
func (m ClusterMigration) Validate() error {
	u := m.MigratedClusterURL
	if err := validServiceURLs(u.ServiceURL, u.ServiceURLTLS, u.BrokerServiceURL, u.BrokerServiceURLTLS); err != nil {
		return fmt.Errorf("migratedClusterUrl: %w", err)
	}
	// Clients are sent these as they are: each must list hosts only.
	for _, b := range []string{u.BrokerServiceURL, u.BrokerServiceURLTLS} {
		if _, _, ok := ServiceHosts(b); b != "" && !ok {
			return fmt.Errorf("%w: migratedClusterUrl: broker service URL %q is not scheme://host:port[,host:port...]", ErrInvalidCluster, b)
		}
	}
	if m.Migrated && u.BrokerServiceURL == "" && u.BrokerServiceURLTLS == "" {
		return fmt.Errorf("%w: a migrated cluster's migratedClusterUrl needs brokerServiceUrl or brokerServiceUrlTls, where its clients go", ErrInvalidCluster)
	}
	return nil
}

// ServiceHosts splits a service URL that lists one or several hosts
// ("pulsar://a:6650,b:6650", as Pulsar's may) into its scheme and hosts.
// ok is false unless raw is scheme://host[,host...] with no path.
func ServiceHosts(raw string) (scheme string, hosts []string, ok bool) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" {
		return "", nil, false
	}
	hosts = strings.Split(strings.TrimSuffix(rest, "/"), ",")
	for _, h := range hosts {
		if h == "" || strings.ContainsAny(h, "/?#") {
			return "", nil, false
		}
	}
	return scheme, hosts, true
}

// OneHost is the URL of one of the hosts raw lists, the i-th (modulo
// their count): where a single broker must be named, as in a LOOKUP
// redirect, whose URL a client dials as it is. raw is returned as it is
// when it does not parse.
func OneHost(raw string, i uint64) string {
	scheme, hosts, ok := ServiceHosts(raw)
	if !ok {
		return raw
	}
	return scheme + "://" + hosts[i%uint64(len(hosts))]
}

// Validate checks that at least one URL is set and that each set URL has its
// scheme: http for serviceUrl, https for serviceUrlTls, pulsar for
// brokerServiceUrl, pulsar+ssl for brokerServiceUrlTls. A service URL may
// list several hosts ("pulsar://a:6650,b:6650"), as Pulsar's do. It also
// refuses authentication parameters without a plugin, and TLS for
// replicators without the pulsar+ssl URL they would connect to.
func (c ClusterData) Validate() error {
	if c.ServiceURL == "" && c.ServiceURLTLS == "" && c.BrokerServiceURL == "" && c.BrokerServiceURLTLS == "" {
		return fmt.Errorf("%w: set at least one of serviceUrl, serviceUrlTls, brokerServiceUrl, brokerServiceUrlTls", ErrInvalidCluster)
	}
	if err := validServiceURLs(c.ServiceURL, c.ServiceURLTLS, c.BrokerServiceURL, c.BrokerServiceURLTLS); err != nil {
		return err
	}
	if c.Migration != nil {
		if err := c.Migration.Validate(); err != nil {
			return err
		}
	}
	if c.AuthenticationParameters != "" && c.AuthenticationPlugin == "" {
		return fmt.Errorf("%w: authenticationParameters are set but authenticationPlugin is not: name the plugin they are for", ErrInvalidCluster)
	}
	if c.BrokerClientTLSEnabled && c.BrokerServiceURLTLS == "" {
		return fmt.Errorf("%w: brokerClientTlsEnabled needs brokerServiceUrlTls (pulsar+ssl://host:port)", ErrInvalidCluster)
	}
	return nil
}

// validServiceURLs checks that each set URL has its scheme: http for the
// service URL, https for its TLS one, pulsar for the broker service URL,
// pulsar+ssl for its TLS one; each may list several hosts.
func validServiceURLs(service, serviceTLS, broker, brokerTLS string) error {
	for _, f := range []struct{ field, value, scheme string }{
		{"serviceUrl", service, "http"},
		{"serviceUrlTls", serviceTLS, "https"},
		{"brokerServiceUrl", broker, "pulsar"},
		{"brokerServiceUrlTls", brokerTLS, "pulsar+ssl"},
	} {
		if f.value == "" {
			continue
		}
		u, err := url.Parse(f.value)
		if err != nil || u.Scheme != f.scheme || u.Host == "" {
			return fmt.Errorf("%w: %s %q is not %s://host:port", ErrInvalidCluster, f.field, f.value, f.scheme)
		}
	}
	return nil
}

// TenantInfo is a tenant (/meridian/global/tenants/<tenant>): who administers
// it and which clusters its namespaces may use. It matches pulsaradmin's
// utils.TenantData.
type TenantInfo struct {
	AdminRoles      []string `json:"adminRoles"`
	AllowedClusters []string `json:"allowedClusters"`
}

// normalize sorts and de-duplicates both lists (Pulsar keeps them as sets),
// and makes them non-nil so that they marshal as [] rather than null.
func (t *TenantInfo) normalize() {
	t.AdminRoles = setOf(t.AdminRoles)
	t.AllowedClusters = setOf(t.AllowedClusters)
}

// validate checks the record on its own; that the allowed clusters exist is
// checked against the store.
func (t TenantInfo) validate() error {
	for _, r := range t.AdminRoles {
		if r == "" {
			return fmt.Errorf("%w: empty admin role", ErrInvalidTenant)
		}
	}
	for _, c := range t.AllowedClusters {
		if err := validName("cluster", c); err != nil {
			return fmt.Errorf("%w: allowed cluster: %w", ErrInvalidTenant, err)
		}
	}
	return nil
}

// Clone returns a deep copy.
func (t TenantInfo) Clone() TenantInfo {
	return TenantInfo{AdminRoles: slices.Clone(t.AdminRoles), AllowedClusters: slices.Clone(t.AllowedClusters)}
}

// AuthAction is a permission a role holds on a namespace or topic.
type AuthAction string

// The actions Pulsar knows.
const (
	ActionProduce   AuthAction = "produce"
	ActionConsume   AuthAction = "consume"
	ActionFunctions AuthAction = "functions"
	ActionPackages  AuthAction = "packages"
	ActionSinks     AuthAction = "sinks"
	ActionSources   AuthAction = "sources"
)

func (a AuthAction) valid() bool {
	switch a {
	case ActionProduce, ActionConsume, ActionFunctions, ActionPackages, ActionSinks, ActionSources:
		return true
	}
	return false
}

// AuthPolicies are a namespace's grants: per role on the whole namespace
// (namespace_auth), per topic and role (destination_auth, keyed by the full
// topic name), and which roles may use each subscription
// (subscription_auth_roles).
type AuthPolicies struct {
	NamespaceAuth         map[string][]AuthAction            `json:"namespace_auth"`
	DestinationAuth       map[string]map[string][]AuthAction `json:"destination_auth"`
	SubscriptionAuthRoles map[string][]string                `json:"subscription_auth_roles"`
}

func (a *AuthPolicies) normalize() {
	if a.NamespaceAuth == nil {
		a.NamespaceAuth = map[string][]AuthAction{}
	}
	if a.DestinationAuth == nil {
		a.DestinationAuth = map[string]map[string][]AuthAction{}
	}
	if a.SubscriptionAuthRoles == nil {
		a.SubscriptionAuthRoles = map[string][]string{}
	}
	for role, acts := range a.NamespaceAuth {
		a.NamespaceAuth[role] = setOf(acts)
	}
	for topic, roles := range a.DestinationAuth {
		for role, acts := range roles {
			roles[role] = setOf(acts)
		}
		a.DestinationAuth[topic] = roles
	}
	for sub, roles := range a.SubscriptionAuthRoles {
		a.SubscriptionAuthRoles[sub] = setOf(roles)
	}
}

func (a AuthPolicies) validate() error {
	check := func(where string, role string, acts []AuthAction) error {
		if role == "" {
			return fmt.Errorf("%w: %s: empty role", ErrInvalidPolicies, where)
		}
		for _, act := range acts {
			if !act.valid() {
				return fmt.Errorf("%w: %s: role %q: unknown action %q (want produce, consume, functions, packages, sinks or sources)",
					ErrInvalidPolicies, where, role, act)
			}
		}
		return nil
	}
	for role, acts := range a.NamespaceAuth {
		if err := check("namespace_auth", role, acts); err != nil {
			return err
		}
	}
	for topic, roles := range a.DestinationAuth {
		if _, err := topology.ParseTopicName(topic); err != nil {
			return fmt.Errorf("%w: destination_auth: %w", ErrInvalidPolicies, err)
		}
		for role, acts := range roles {
			if err := check("destination_auth["+topic+"]", role, acts); err != nil {
				return err
			}
		}
	}
	for sub, roles := range a.SubscriptionAuthRoles {
		if sub == "" || slices.Contains(roles, "") {
			return fmt.Errorf("%w: subscription_auth_roles: empty subscription or role", ErrInvalidPolicies)
		}
	}
	return nil
}

// Clone returns a deep copy.
func (a AuthPolicies) Clone() AuthPolicies {
	out := AuthPolicies{
		NamespaceAuth:         cloneMapOfSlices(a.NamespaceAuth),
		SubscriptionAuthRoles: cloneMapOfSlices(a.SubscriptionAuthRoles),
	}
	if a.DestinationAuth != nil {
		out.DestinationAuth = make(map[string]map[string][]AuthAction, len(a.DestinationAuth))
		for k, v := range a.DestinationAuth {
			out.DestinationAuth[k] = cloneMapOfSlices(v)
		}
	}
	return out
}

// RetentionPolicies keep acknowledged messages for a time and a size
// (Pulsar: both 0 means none kept; -1 means unlimited).
type RetentionPolicies struct {
	RetentionTimeInMinutes int   `json:"retentionTimeInMinutes"`
	RetentionSizeInMB      int64 `json:"retentionSizeInMB"`
}

func (r RetentionPolicies) validate() error {
	// Pulsar refuses a retention that is unlimited in one dimension and
	// zero in the other: the zero would make the unlimited one meaningless.
	if r.RetentionTimeInMinutes < -1 || r.RetentionSizeInMB < -1 ||
		(r.RetentionTimeInMinutes == 0 && r.RetentionSizeInMB == -1) ||
		(r.RetentionTimeInMinutes == -1 && r.RetentionSizeInMB == 0) {
		return fmt.Errorf("%w: retention %d min / %d MB (each -1, 0 or positive, and not -1 with 0)",
			ErrInvalidPolicies, r.RetentionTimeInMinutes, r.RetentionSizeInMB)
	}
	return nil
}

// BacklogQuotaType is what a backlog quota limits.
type BacklogQuotaType string

// Pulsar's backlog quota types.
const (
	DestinationStorage BacklogQuotaType = "destination_storage"
	MessageAge         BacklogQuotaType = "message_age"
)

// BacklogPolicy is what a broker does when a backlog quota is exceeded.
type BacklogPolicy string

// Pulsar's backlog quota policies.
const (
	ProducerRequestHold     BacklogPolicy = "producer_request_hold"
	ProducerException       BacklogPolicy = "producer_exception"
	ConsumerBacklogEviction BacklogPolicy = "consumer_backlog_eviction"
)

// BacklogQuota limits a backlog by size (bytes) or age (seconds); -1 is no
// limit.
type BacklogQuota struct {
	LimitTime int64         `json:"limitTime"`
	LimitSize int64         `json:"limitSize"`
	Policy    BacklogPolicy `json:"policy"`
}

func validBacklogQuotas(m map[BacklogQuotaType]BacklogQuota) error {
	for typ, q := range m {
		switch typ {
		case DestinationStorage, MessageAge:
		default:
			return fmt.Errorf("%w: backlog quota type %q (want destination_storage or message_age)", ErrInvalidPolicies, typ)
		}
		switch q.Policy {
		case ProducerRequestHold, ProducerException, ConsumerBacklogEviction:
		default:
			return fmt.Errorf("%w: backlog quota policy %q (want producer_request_hold, producer_exception or consumer_backlog_eviction)",
				ErrInvalidPolicies, q.Policy)
		}
		if q.LimitSize < -1 || q.LimitTime < -1 {
			return fmt.Errorf("%w: backlog quota %s limits must be -1 or more", ErrInvalidPolicies, typ)
		}
	}
	return nil
}

// TopicType is the kind of topic auto-creation makes.
type TopicType string

// Pulsar's topic types.
const (
	Partitioned    TopicType = "partitioned"
	NonPartitioned TopicType = "non-partitioned"
)

// AutoTopicCreation is a namespace's override of the broker's
// allowAutoTopicCreation settings (Pulsar's autoTopicCreationOverride).
type AutoTopicCreation struct {
	Allow bool      `json:"allowAutoTopicCreation"`
	Type  TopicType `json:"topicType"`
	// Partitions is the partition count of an auto-created partitioned
	// topic; only for Type Partitioned.
	Partitions *int `json:"defaultNumPartitions,omitempty"`
}

func (a AutoTopicCreation) validate() error {
	if !a.Allow && a.Type == "" && a.Partitions == nil {
		return nil // "no auto-creation" needs no type, as in Pulsar
	}
	switch a.Type {
	case NonPartitioned:
		if a.Partitions != nil {
			return fmt.Errorf("%w: autoTopicCreationOverride: defaultNumPartitions is only for partitioned topics", ErrInvalidPolicies)
		}
	case Partitioned:
		if a.Partitions == nil || *a.Partitions < 1 {
			return fmt.Errorf("%w: autoTopicCreationOverride: a partitioned type needs defaultNumPartitions >= 1", ErrInvalidPolicies)
		}
	default:
		return fmt.Errorf("%w: autoTopicCreationOverride: topicType %q (want partitioned or non-partitioned)", ErrInvalidPolicies, a.Type)
	}
	return nil
}

// SchemaCompatibilityStrategy is how a new schema must relate to the
// existing ones. SchemaUndefined defers to the broker default.
type SchemaCompatibilityStrategy string

// Pulsar's strategies.
const (
	SchemaUndefined          SchemaCompatibilityStrategy = "UNDEFINED"
	SchemaAlwaysIncompatible SchemaCompatibilityStrategy = "ALWAYS_INCOMPATIBLE"
	SchemaAlwaysCompatible   SchemaCompatibilityStrategy = "ALWAYS_COMPATIBLE"
	SchemaBackward           SchemaCompatibilityStrategy = "BACKWARD"
	SchemaForward            SchemaCompatibilityStrategy = "FORWARD"
	SchemaFull               SchemaCompatibilityStrategy = "FULL"
	SchemaBackwardTransitive SchemaCompatibilityStrategy = "BACKWARD_TRANSITIVE"
	SchemaForwardTransitive  SchemaCompatibilityStrategy = "FORWARD_TRANSITIVE"
	SchemaFullTransitive     SchemaCompatibilityStrategy = "FULL_TRANSITIVE"
)

func (s SchemaCompatibilityStrategy) valid() bool {
	switch s {
	case SchemaUndefined, SchemaAlwaysIncompatible, SchemaAlwaysCompatible, SchemaBackward, SchemaForward,
		SchemaFull, SchemaBackwardTransitive, SchemaForwardTransitive, SchemaFullTransitive:
		return true
	}
	return false
}

// BundlesData are a namespace's bundle boundaries, in Pulsar's form:
// NumBundles+1 ascending hex boundaries from 0x00000000 to 0xffffffff.
type BundlesData struct {
	Boundaries []string `json:"boundaries"`
	NumBundles int      `json:"numBundles"`
}

// EvenBundlesData is n equal bundles (topology.EvenBundles) in Pulsar's form.
func EvenBundlesData(n int) (BundlesData, error) {
	bs, err := topology.EvenBundles(n)
	if err != nil {
		return BundlesData{}, fmt.Errorf("%w: %w", ErrInvalidPolicies, err)
	}
	d := BundlesData{NumBundles: n, Boundaries: make([]string, 0, n+1)}
	for _, b := range bs {
		d.Boundaries = append(d.Boundaries, fmt.Sprintf("0x%08x", b.Lower))
	}
	d.Boundaries = append(d.Boundaries, fmt.Sprintf("0x%08x", bs[n-1].Upper))
	return d, nil
}

// Bundles returns the bundles the boundaries describe, checking that they
// are ascending and cover the whole hash space.
func (d BundlesData) Bundles() ([]topology.Bundle, error) {
	bad := func(why string) ([]topology.Bundle, error) {
		return nil, fmt.Errorf("%w: bundles %v: %s", ErrInvalidPolicies, d.Boundaries, why)
	}
	if d.NumBundles < 1 || len(d.Boundaries) != d.NumBundles+1 {
		return bad(fmt.Sprintf("numBundles %d needs numBundles+1 boundaries", d.NumBundles))
	}
	bounds := make([]uint32, len(d.Boundaries))
	for i, s := range d.Boundaries {
		v, err := strconv.ParseUint(s, 0, 32)
		if err != nil {
			return bad(fmt.Sprintf("boundary %q is not a 32-bit number", s))
		}
		bounds[i] = uint32(v)
		if i > 0 && bounds[i] <= bounds[i-1] {
			return bad("boundaries must ascend")
		}
	}
	if bounds[0] != 0 || bounds[len(bounds)-1] != 0xffffffff {
		return bad("boundaries must run from 0x00000000 to 0xffffffff")
	}
	out := make([]topology.Bundle, d.NumBundles)
	for i := range out {
		out[i] = topology.Bundle{Lower: bounds[i], Upper: bounds[i+1]}
	}
	return out, nil
}

// Policies are a namespace's policies (/meridian/global/namespaces/<t>/<ns>),
// a subset of Pulsar's with the same JSON names, plus Meridian's active
// region. Pointer fields are "not set here": resolution falls through to the
// broker defaults (see Resolve).
type Policies struct {
	Bundles *BundlesData `json:"bundles,omitempty"`
	// ReplicationClusters are the regions that replicate every topic of the
	// namespace to each other (DESIGN §6), within the tenant's allowed
	// clusters.
	ReplicationClusters []string                          `json:"replication_clusters"`
	RetentionPolicies   *RetentionPolicies                `json:"retention_policies,omitempty"`
	BacklogQuotaMap     map[BacklogQuotaType]BacklogQuota `json:"backlog_quota_map"`
	MessageTTLInSeconds *int                              `json:"message_ttl_in_seconds,omitempty"`
	// DeduplicationEnabled keeps Pulsar's camel case.
	DeduplicationEnabled        *bool                       `json:"deduplicationEnabled,omitempty"`
	AutoTopicCreationOverride   *AutoTopicCreation          `json:"autoTopicCreationOverride,omitempty"`
	AuthPolicies                AuthPolicies                `json:"auth_policies"`
	SchemaCompatibilityStrategy SchemaCompatibilityStrategy `json:"schema_compatibility_strategy"`
	// ActiveRegion is the region that answers lookups for the namespace
	// (DESIGN §6, failover without client changes); empty means each region
	// serves its own clients. It must be one of ReplicationClusters. The
	// regions that take over from it, in order, are in Extra under
	// ExtraFallbackRegions (see FallbackRegions).
	ActiveRegion string `json:"active_region,omitempty"`
	// Extra holds the Pulsar policies Meridian stores and returns but does
	// not enforce (offload thresholds, rates, …), and the limits on
	// producers and consumers, which it does.
	Extra Extra `json:"extra,omitempty"`
}

// Extra is a set of Pulsar policies that Meridian stores, versions and
// returns through the admin API, and whose effect the broker mostly does
// not implement (the limits on producers, consumers, subscriptions and
// unacked messages it does; see Resolve):
// each key is the policy's Pulsar name and each value its JSON,
// in the shape pulsaradmin's utils types give it. Keeping them here, in
// the same record and under the same conditional update as the enforced
// policies, means a tool that sets them reads back what it wrote and a
// later Meridian that enforces one finds it already stored; keeping them
// as JSON rather than as typed fields means adding one is a line in the
// admin API's table, not a schema change. The store checks only that each
// value is one well-formed JSON value; shapes are checked by the admin API.
type Extra map[string]json.RawMessage

func (e Extra) validate() error {
	for k, v := range e {
		if k == "" {
			return fmt.Errorf("%w: extra: empty policy name", ErrInvalidPolicies)
		}
		if !json.Valid(v) {
			return fmt.Errorf("%w: extra: policy %q is not valid JSON", ErrInvalidPolicies, k)
		}
	}
	return nil
}

// The Extra keys of the limits the broker enforces, by Pulsar's names: a
// namespace's, and the topic policy that overrides it, or a topic's alone.
// 0 is no limit.
const (
	ExtraMaxProducersPerTopic             = "max_producers_per_topic"
	ExtraMaxConsumersPerTopic             = "max_consumers_per_topic"
	ExtraMaxConsumersPerSubscription      = "max_consumers_per_subscription"
	ExtraTopicMaxProducers                = "maxProducerPerTopic"
	ExtraTopicMaxConsumers                = "maxConsumerPerTopic"
	ExtraTopicMaxConsumersPerSubscription = "maxConsumersPerSubscription"
	// A namespace's limit alone: its topics, a partitioned topic counting
	// its partitions.
	ExtraMaxTopicsPerNamespace = "max_topics_per_namespace"
	// The unacked-message limits of a Shared or Key_Shared consumer and
	// subscription, and whether a producer must have a schema: a
	// namespace's, and the topic policy that overrides it.
	ExtraMaxUnackedPerConsumer         = "max_unacked_messages_per_consumer"
	ExtraMaxUnackedPerSubscription     = "max_unacked_messages_per_subscription"
	ExtraSchemaValidationEnforced      = "schema_validation_enforced"
	ExtraTopicMaxUnackedOnConsumer     = "maxUnackedMessagesOnConsumer"
	ExtraTopicMaxUnackedOnSubscription = "maxUnackedMessagesOnSubscription"
	ExtraTopicSchemaValidationEnforced = "schemaValidationEnforced"
	// Topic policies only.
	ExtraTopicMaxSubscriptions      = "maxSubscriptionsPerTopic"
	ExtraTopicDedupSnapshotInterval = "deduplicationSnapshotIntervalSeconds"
)

// The Extra keys of the auto-subscription-creation overrides, a
// namespace's and the topic's that wins over it: each an
// AutoSubscriptionCreationOverride.
const (
	ExtraAutoSubscriptionCreation      = "autoSubscriptionCreationOverride"
	ExtraTopicAutoSubscriptionCreation = "autoSubscriptionCreation"
)

// ExtraFallbackRegions is the Extra key of the regions that take over from
// the namespace's active region, in order: a JSON list of region names,
// each one of the replication clusters, none the active region, none
// twice, and only while an active region is set.
//
// It lives in Extra, not in a field of its own, so that brokers that
// predate it keep it: a binary decodes the "v":1 record into Policies, and
// an unknown field would be dropped by the next update such a broker
// writes (of the TTL, say), while an unknown Extra key is carried through
// it unchanged. Bumping the record to "v":2 instead would make every
// older broker refuse the namespace (meta.DecodeJSON reads only the
// versions it knows) for as long as a rolling upgrade lasts.
const ExtraFallbackRegions = "meridianFallbackRegions"

// FallbackRegions returns the regions that take over from the active
// region, in order (nil: none). A stored value that is not a list of
// names reads as none; validate refuses to store one.
func (p Policies) FallbackRegions() []string {
	regions, _ := p.fallbackRegions()
	return regions
}

func (p Policies) fallbackRegions() ([]string, error) {
	raw, set := p.Extra[ExtraFallbackRegions]
	if !set {
		return nil, nil
	}
	var regions []string
	if err := json.Unmarshal(raw, &regions); err != nil {
		return nil, fmt.Errorf("%w: %s is not a list of region names: %v", ErrInvalidPolicies, ExtraFallbackRegions, err)
	}
	return regions, nil
}

// SetFallbackRegions stores regions as the fallback list; none removes it.
func (p *Policies) SetFallbackRegions(regions []string) {
	if len(regions) == 0 {
		delete(p.Extra, ExtraFallbackRegions)
		return
	}
	p.Extra.put(ExtraFallbackRegions, regions)
}

// validateActiveRegion checks the active region and its fallback list
// against the replication clusters.
func (p Policies) validateActiveRegion() error {
	if p.ActiveRegion != "" && !slices.Contains(p.ReplicationClusters, p.ActiveRegion) {
		return fmt.Errorf("%w: active region %q is not one of the replication clusters %v", ErrNotAllowedCluster, p.ActiveRegion, p.ReplicationClusters)
	}
	fallback, err := p.fallbackRegions()
	if err != nil || len(fallback) == 0 {
		return err
	}
	if p.ActiveRegion == "" {
		return fmt.Errorf("%w: fallback regions %v without an active region", ErrInvalidPolicies, fallback)
	}
	for i, r := range fallback {
		switch {
		case r == p.ActiveRegion:
			return fmt.Errorf("%w: fallback region %q is the active region", ErrInvalidPolicies, r)
		case slices.Contains(fallback[:i], r):
			return fmt.Errorf("%w: fallback region %q is named twice", ErrInvalidPolicies, r)
		case !slices.Contains(p.ReplicationClusters, r):
			return fmt.Errorf("%w: fallback region %q is not one of the replication clusters %v", ErrNotAllowedCluster, r, p.ReplicationClusters)
		}
	}
	return nil
}

// AutoSubscriptionCreationOverride is Pulsar's body of that name: whether
// a consumer's subscribe creates a durable subscription that does not
// exist. A body without the field disallows, as Pulsar reads it.
type AutoSubscriptionCreationOverride struct {
	Allow bool `json:"allowAutoSubscriptionCreation"`
}

// limit reads key as a count limit: ok is false when it is unset or not a
// JSON integer of at least zero (the admin API stores no other).
func (e Extra) limit(key string) (n int, ok bool) {
	v, set := e[key]
	if !set || json.Unmarshal(v, &n) != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// allowAutoSubscriptionCreation reads key as an
// AutoSubscriptionCreationOverride: ok is false when it is unset or not a
// JSON object.
func (e Extra) allowAutoSubscriptionCreation(key string) (allow, ok bool) {
	var o AutoSubscriptionCreationOverride
	if v, set := e[key]; !set || json.Unmarshal(v, &o) != nil {
		return false, false
	}
	return o.Allow, true
}

// Clone returns a deep copy.
// put stores v's JSON under key, making e when it is nil. v is one of
// Meridian's own plain values (strings, lists of them, structs of plain
// fields), which always marshal.
func (e *Extra) put(key string, v any) {
	raw, _ := json.Marshal(v)
	if *e == nil {
		*e = Extra{}
	}
	(*e)[key] = raw
}

func (e Extra) Clone() Extra {
	if e == nil {
		return nil
	}
	out := make(Extra, len(e))
	for k, v := range e {
		out[k] = bytes.Clone(v)
	}
	return out
}

// normalize fills what Pulsar always shows (empty maps and lists, the
// UNDEFINED strategy) and sorts the sets, so that two equal policies encode
// alike.
func (p *Policies) normalize() {
	p.ReplicationClusters = setOf(p.ReplicationClusters)
	if p.BacklogQuotaMap == nil {
		p.BacklogQuotaMap = map[BacklogQuotaType]BacklogQuota{}
	}
	if p.SchemaCompatibilityStrategy == "" {
		p.SchemaCompatibilityStrategy = SchemaUndefined
	}
	p.AuthPolicies.normalize()
}

// validate checks the policies on their own; which clusters exist and are
// allowed is checked against the store.
func (p Policies) validate() error {
	if p.Bundles != nil {
		if _, err := p.Bundles.Bundles(); err != nil {
			return err
		}
	}
	if err := validOverridable(p.ReplicationClusters, p.RetentionPolicies, p.BacklogQuotaMap, p.MessageTTLInSeconds); err != nil {
		return err
	}
	if p.AutoTopicCreationOverride != nil {
		if err := p.AutoTopicCreationOverride.validate(); err != nil {
			return err
		}
	}
	if !p.SchemaCompatibilityStrategy.valid() {
		return fmt.Errorf("%w: schema_compatibility_strategy %q", ErrInvalidPolicies, p.SchemaCompatibilityStrategy)
	}
	if err := p.Extra.validate(); err != nil {
		return err
	}
	if err := p.validateActiveRegion(); err != nil {
		return err
	}
	if err := p.validateAutoFailover(); err != nil {
		return err
	}
	return p.AuthPolicies.validate()
}

// Clone returns a deep copy.
func (p Policies) Clone() Policies {
	out := p
	if p.Bundles != nil {
		b := *p.Bundles
		b.Boundaries = slices.Clone(b.Boundaries)
		out.Bundles = &b
	}
	out.ReplicationClusters = slices.Clone(p.ReplicationClusters)
	out.RetentionPolicies = clonePtr(p.RetentionPolicies)
	out.BacklogQuotaMap = maps.Clone(p.BacklogQuotaMap)
	out.MessageTTLInSeconds = clonePtr(p.MessageTTLInSeconds)
	out.DeduplicationEnabled = clonePtr(p.DeduplicationEnabled)
	if p.AutoTopicCreationOverride != nil {
		a := *p.AutoTopicCreationOverride
		a.Partitions = clonePtr(a.Partitions)
		out.AutoTopicCreationOverride = &a
	}
	out.AuthPolicies = p.AuthPolicies.Clone()
	out.Extra = p.Extra.Clone()
	return out
}

// TopicPolicies is a topic's record (/meridian/global/topics/<t>/<ns>/<domain>/<topic>):
// its partitioned-topic metadata and its topic-level overrides of the
// namespace policies. A nil field (or an empty strategy) does not override.
// Topic permissions are not here: Pulsar keeps them in the namespace's
// auth_policies.destination_auth, and so does Meridian.
type TopicPolicies struct {
	// Partitions is the partition count of a partitioned topic, 0 for a
	// record that only carries policies (a non-partitioned topic). It never
	// decreases, as in Pulsar.
	Partitions int `json:"partitions"`
	// Created is when a partitioned topic was created, in unix
	// milliseconds (0 for other records, and for those written before it
	// was kept). Its partitions are created when first used, so until then
	// this is the topic's creation time.
	Created int64 `json:"created,omitempty"`
	// ReplicationClusters overrides the namespace's when non-nil (an empty,
	// non-nil list means "replicate nowhere"; it is stored as null or []).
	ReplicationClusters         []string                          `json:"replication_clusters"`
	RetentionPolicies           *RetentionPolicies                `json:"retention_policies,omitempty"`
	BacklogQuotaMap             map[BacklogQuotaType]BacklogQuota `json:"backlog_quota_map,omitempty"`
	MessageTTLInSeconds         *int                              `json:"message_ttl_in_seconds,omitempty"`
	DeduplicationEnabled        *bool                             `json:"deduplicationEnabled,omitempty"`
	SchemaCompatibilityStrategy SchemaCompatibilityStrategy       `json:"schema_compatibility_strategy,omitempty"`
	// Extra holds the topic-level Pulsar policies Meridian stores and
	// returns but does not enforce, and the topic's properties.
	Extra Extra `json:"extra,omitempty"`
}

func (p *TopicPolicies) normalize() {
	if p.ReplicationClusters != nil {
		p.ReplicationClusters = setOf(p.ReplicationClusters)
	}
	if p.SchemaCompatibilityStrategy == SchemaUndefined {
		p.SchemaCompatibilityStrategy = ""
	}
}

// validOverridable checks the policies a topic may override, which
// namespaces and topics validate alike.
func validOverridable(clusters []string, retention *RetentionPolicies, backlog map[BacklogQuotaType]BacklogQuota, ttl *int) error {
	if err := validClusterNames("replication_clusters", clusters); err != nil {
		return err
	}
	if retention != nil {
		if err := retention.validate(); err != nil {
			return err
		}
	}
	if err := validBacklogQuotas(backlog); err != nil {
		return err
	}
	if ttl != nil && *ttl < 0 {
		return fmt.Errorf("%w: message_ttl_in_seconds %d is negative", ErrInvalidPolicies, *ttl)
	}
	return nil
}

func (p TopicPolicies) validate() error {
	if p.Partitions < 0 {
		return fmt.Errorf("%w: partitions %d is negative", ErrInvalidPolicies, p.Partitions)
	}
	if err := validOverridable(p.ReplicationClusters, p.RetentionPolicies, p.BacklogQuotaMap, p.MessageTTLInSeconds); err != nil {
		return err
	}
	if p.SchemaCompatibilityStrategy != "" && !p.SchemaCompatibilityStrategy.valid() {
		return fmt.Errorf("%w: schema_compatibility_strategy %q", ErrInvalidPolicies, p.SchemaCompatibilityStrategy)
	}
	if raw, set := p.Extra[ExtraTopicActiveRegion]; set {
		var region string
		if err := json.Unmarshal(raw, &region); err != nil || region == "" {
			return fmt.Errorf("%w: %s is not a region name: %s", ErrInvalidPolicies, ExtraTopicActiveRegion, raw)
		}
		if err := validClusterNames(ExtraTopicActiveRegion, []string{region}); err != nil {
			return err
		}
	}
	return p.Extra.validate()
}

// ExtraTopicActiveRegion is the Extra key of a topic's own active region,
// a JSON string, which overrides the namespace's for the topic and its
// partitions: lookups of it anywhere go to that region, and its clients
// elsewhere are moved there. It is switched by hand only: a namespace's
// automatic failover neither watches nor gates such a topic (Resolve).
// Drills use it to move their own topics and nothing else. It lives in
// Extra for the reason ExtraFallbackRegions does: a broker that predates
// it carries it through the updates it writes. Such a broker does not
// follow it, so it answers that topic's lookups with the namespace's
// active region until it is upgraded.
const ExtraTopicActiveRegion = "meridianActiveRegion"

// ActiveRegion returns the topic's own active region, "" when it has none
// (or a stored value that validate would refuse).
func (p TopicPolicies) ActiveRegion() string {
	var region string
	if raw, set := p.Extra[ExtraTopicActiveRegion]; set && json.Unmarshal(raw, &region) == nil {
		return region
	}
	return ""
}

// SetActiveRegion stores the topic's own active region; "" removes it.
func (p *TopicPolicies) SetActiveRegion(region string) {
	if region == "" {
		delete(p.Extra, ExtraTopicActiveRegion)
		return
	}
	p.Extra.put(ExtraTopicActiveRegion, region)
}

// Clone returns a deep copy.
func (p TopicPolicies) Clone() TopicPolicies {
	out := p
	out.ReplicationClusters = slices.Clone(p.ReplicationClusters)
	out.RetentionPolicies = clonePtr(p.RetentionPolicies)
	out.BacklogQuotaMap = maps.Clone(p.BacklogQuotaMap)
	out.MessageTTLInSeconds = clonePtr(p.MessageTTLInSeconds)
	out.DeduplicationEnabled = clonePtr(p.DeduplicationEnabled)
	out.Extra = p.Extra.Clone()
	return out
}

func validClusterNames(field string, names []string) error {
	for _, c := range names {
		if err := validName("cluster", c); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidPolicies, field, err)
		}
	}
	return nil
}

// setOf returns s sorted and without duplicates, never nil.
func setOf[T ~string](s []T) []T {
	out := slices.Clone(s)
	if out == nil {
		out = []T{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneMapOfSlices[K comparable, V any](m map[K][]V) map[K][]V {
	if m == nil {
		return nil
	}
	out := make(map[K][]V, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}
