package global

import "errors"

// Sentinel errors. Every error a Store or Cache call returns wraps one of
// these (or a context error), so that the admin API can map them onto HTTP
// status codes with errors.Is: ErrNotFound → 404, ErrExists and ErrConflict →
// 409, ErrInvalid… and ErrNotAllowedCluster → 412 or 400 as Pulsar does,
// the ...InUse/...NotEmpty errors → 409, ErrUnavailable → 503.
var (
	// ErrNotFound: the cluster, tenant, namespace or topic record does not
	// exist.
	ErrNotFound = errors.New("global: not found")
	// ErrExists: a create found the record already there.
	ErrExists = errors.New("global: already exists")
	// ErrConflict: a concurrent writer changed the record more times than
	// Config.MaxUpdateAttempts allowed this update to re-apply itself, or
	// a delete lost a race. Retry the request.
	ErrConflict = errors.New("global: concurrent modification")
	// ErrInvalidName: a cluster, tenant, namespace or topic name Pulsar would
	// refuse (allowed characters: letters, digits, '_', '-', '=', ':', '.').
	ErrInvalidName = errors.New("global: invalid name")
	// ErrInvalidCluster: cluster data with no usable service URL, or a URL
	// with the wrong scheme.
	ErrInvalidCluster = errors.New("global: invalid cluster data")
	// ErrInvalidTenant: tenant info that cannot be stored (no allowed
	// cluster, an unknown cluster, an empty role).
	ErrInvalidTenant = errors.New("global: invalid tenant info")
	// ErrInvalidPolicies: a namespace or topic policy out of range (a
	// negative TTL, an unknown backlog quota type or retention policy, an
	// unknown auth action, bundles that do not cover the hash space, ...).
	ErrInvalidPolicies = errors.New("global: invalid policies")
	// ErrClusterInUse: a cluster that a tenant allows or a namespace or
	// topic replicates to cannot be deleted, and a tenant cannot stop
	// allowing a cluster one of its namespaces replicates to. Remove the
	// references first.
	ErrClusterInUse = errors.New("global: cluster in use")
	// ErrNotAllowedCluster: a replication cluster (or the active region) is
	// not among the tenant's allowed clusters, or does not exist.
	ErrNotAllowedCluster = errors.New("global: cluster not allowed")
	// ErrTenantNotEmpty: a tenant that still has namespaces cannot be
	// deleted (Pulsar's rule). Delete its namespaces first.
	ErrTenantNotEmpty = errors.New("global: tenant has namespaces")
	// ErrNamespaceNotEmpty: a namespace that still has topic records
	// (partitioned-topic metadata or topic policies) cannot be deleted.
	ErrNamespaceNotEmpty = errors.New("global: namespace has topics")
	// ErrUnavailable: the global metadata store did not answer (unreachable,
	// no quorum, closed). Reads from a Cache still answer with the last
	// known state; writes must be retried once the store is back.
	ErrUnavailable = errors.New("global: configuration store unavailable")
	// ErrCorrupt: a stored value could not be decoded (a newer format than
	// this binary reads, or bytes that are not a record). Upgrade the binary
	// that reads it; never overwrite it with an older format.
	ErrCorrupt = errors.New("global: undecodable record")
	// ErrTooManyPartitions: a partition count above the broker's
	// maxNumPartitionsPerPartitionedTopic (BrokerDefaults.MaxNumPartitions).
	// Ask for fewer, or raise the setting.
	ErrTooManyPartitions = errors.New("global: too many partitions")
	// ErrCacheClosed: the Cache was closed.
	ErrCacheClosed = errors.New("global: cache closed")
)
