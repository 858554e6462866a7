package admin

import (
	"context"
	"errors"
	"net/http"

	"github.com/meridian-mq/meridian/cluster/autorecovery"
	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/broker/schema"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Sentinel errors of the admin API itself; the errors of the layers below
// keep their own sentinels and are mapped in statusTable.
var (
	// ErrBadRequest: a body that is not the JSON the endpoint takes, or a
	// path or query parameter that does not parse. Nothing was changed.
	ErrBadRequest = errors.New("admin: bad request")
	// ErrNotFound: the topic, subscription, message or schema asked for
	// does not exist.
	ErrNotFound = errors.New("admin: not found")
	// ErrConflict: what a create asked for already exists.
	ErrConflict = errors.New("admin: already exists")
	// ErrPrecondition: the request is well-formed but the state does not
	// allow it (a topic with connected clients, a namespace with topics, a
	// partition count that would shrink). Change the state and retry.
	ErrPrecondition = errors.New("admin: precondition failed")
	// ErrMethodNotAllowed: the operation does not apply to this kind of
	// topic (Pulsar's 405: replicated subscriptions on a non-persistent
	// topic).
	ErrMethodNotAllowed = errors.New("admin: not allowed on this topic")
	// ErrForbidden: the authenticated role may not do this.
	ErrForbidden = errors.New("admin: forbidden")
	// ErrNotReady: the broker has not loaded the global configuration yet.
	ErrNotReady = errors.New("admin: broker not ready")
	// ErrNotImplemented: an endpoint pulsaradmin has and Meridian does not
	// implement.
	ErrNotImplemented = errors.New("admin: not implemented")
	// ErrInvalidConfig: a Config field is out of bounds.
	ErrInvalidConfig = errors.New("admin: invalid config")
)

// statusTable is the one mapping from errors to HTTP statuses, with
// Pulsar's choices: invalid names and policy values are 412 (Pulsar's
// PRECONDITION_FAILED), a replication cluster outside the tenant's allowed
// clusters is 403, a non-empty tenant or namespace is 409, as Pulsar
// answers them. The first entry that matches (errors.Is) wins, so the more
// specific errors come first.
var statusTable = []struct {
	err    error
	status int
}{
	{ErrBadRequest, http.StatusBadRequest},
	{ErrNotFound, http.StatusNotFound},
	{ErrConflict, http.StatusConflict},
	{ErrPrecondition, http.StatusPreconditionFailed},
	{ErrMethodNotAllowed, http.StatusMethodNotAllowed},
	{ErrForbidden, http.StatusForbidden},
	{ErrNotReady, http.StatusServiceUnavailable},
	{ErrNotImplemented, http.StatusNotImplemented},

	{auth.ErrUnauthenticated, http.StatusUnauthorized},

	// The refusals first: they may wrap ErrNotFound ("allowed cluster x:
	// not found"), and what was refused is the request, not a lookup.
	{global.ErrTooManyPartitions, http.StatusNotAcceptable}, // Pulsar's NOT_ACCEPTABLE
	{global.ErrInvalidName, http.StatusPreconditionFailed},
	{global.ErrInvalidCluster, http.StatusPreconditionFailed},
	{global.ErrInvalidTenant, http.StatusPreconditionFailed},
	{global.ErrInvalidPolicies, http.StatusPreconditionFailed},
	{global.ErrClusterInUse, http.StatusPreconditionFailed},
	{global.ErrNotAllowedCluster, http.StatusForbidden},
	{global.ErrTenantNotEmpty, http.StatusConflict},
	{global.ErrNamespaceNotEmpty, http.StatusConflict},
	{global.ErrNotFound, http.StatusNotFound},
	{global.ErrExists, http.StatusConflict},
	{global.ErrConflict, http.StatusConflict},
	{global.ErrUnavailable, http.StatusServiceUnavailable},
	{global.ErrCacheClosed, http.StatusServiceUnavailable},
	{global.ErrCorrupt, http.StatusInternalServerError},

	{schema.ErrNotFound, http.StatusNotFound},
	{schema.ErrIncompatible, http.StatusConflict},
	{schema.ErrInvalidSchema, http.StatusUnprocessableEntity},
	{schema.ErrInvalidStrategy, http.StatusBadRequest},
	{schema.ErrInvalidVersion, http.StatusBadRequest},
	{schema.ErrInvalidTopic, http.StatusPreconditionFailed},
	{schema.ErrConflict, http.StatusConflict},
	{schema.ErrCorrupt, http.StatusInternalServerError},

	{topology.ErrInvalidTopicName, http.StatusPreconditionFailed},

	{autorecovery.ErrUnknownBookie, http.StatusNotFound},
	{autorecovery.ErrQuorumNeedsBookie, http.StatusPreconditionFailed},
	{autorecovery.ErrInvalidRackInfo, http.StatusPreconditionFailed},

	{loadmgr.ErrUnknownBroker, http.StatusPreconditionFailed},
	{loadmgr.ErrNoBrokerAvailable, http.StatusServiceUnavailable},

	{wire.ErrTopicNotFound, http.StatusNotFound},
	{wire.ErrSubscriptionNotFound, http.StatusNotFound},
	{wire.ErrConsumerNotFound, http.StatusNotFound},
	{wire.ErrInvalidTopicName, http.StatusPreconditionFailed},
	{wire.ErrNotAllowed, http.StatusPreconditionFailed},
	{wire.ErrConsumerBusy, http.StatusPreconditionFailed},
	{wire.ErrProducerBusy, http.StatusConflict},
	{wire.ErrTopicTerminated, http.StatusPreconditionFailed},
	{wire.ErrIncompatibleSchema, http.StatusConflict},
	{wire.ErrAuthentication, http.StatusUnauthorized},
	{wire.ErrAuthorization, http.StatusForbidden},
	{wire.ErrTooManyRequests, http.StatusTooManyRequests},
	{wire.ErrServiceNotReady, http.StatusServiceUnavailable},
	{wire.ErrMetadata, http.StatusInternalServerError},
	{wire.ErrPersistence, http.StatusInternalServerError},

	{context.DeadlineExceeded, http.StatusServiceUnavailable},
	{context.Canceled, http.StatusServiceUnavailable},
}

// statusOf returns the HTTP status for err: its statusTable entry, else 500.
func statusOf(err error) int {
	for _, e := range statusTable {
		if errors.Is(err, e.err) {
			return e.status
		}
	}
	return http.StatusInternalServerError
}

// pulsarReason is an error whose text is the reason Pulsar gives for it,
// word for word, because pulsaradmin's users (and its tests) compare
// reasons; it is classified by kind, one of the sentinels above.
type pulsarReason struct {
	kind   error
	reason string
}

func (e pulsarReason) Error() string { return e.reason }
func (e pulsarReason) Unwrap() error { return e.kind }
