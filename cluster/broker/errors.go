package broker

import "errors"

var (
	// ErrServerClosed: Serve was called on, or returned from, a closed Server.
	ErrServerClosed = errors.New("broker: server closed")
	// ErrCloseIncomplete: a Close's context ended before everything it
	// closes had finished.
	ErrCloseIncomplete = errors.New("broker: close did not finish in time")
	// ErrInvalidConfig: a Config field is out of its documented bounds.
	ErrInvalidConfig = errors.New("broker: invalid config")
	// ErrNoLeader: no broker of the region leads yet (the election is
	// under way, or every broker is cut off from etcd). Retry.
	ErrNoLeader = errors.New("broker: no region leader")
	// ErrBundleNotFound: the bundle named is not one of its namespace's
	// bundles (never was, or was split).
	ErrBundleNotFound = errors.New("broker: bundle not found")
)

var (
	// ErrNoBrokerAvailable: no live broker of the region, other than those
	// excluded, takes bundles (none registered, or all draining).
	ErrNoBrokerAvailable = errors.New("broker: no broker available")
	// ErrUnknownBroker: a broker named in a request (an unload's
	// destination) is not a live broker of the region.
	ErrUnknownBroker = errors.New("broker: unknown broker")
)
