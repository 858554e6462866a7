package loadmgr

import "errors"

// The sentinels keep the "broker:" prefix of their text: the load manager is
// part of the broker, and these are the words operators and clients have
// always seen.
var (
	// ErrInvalidConfig: a Config field is out of its documented bounds. The
	// broker's own config errors are this sentinel too (broker.ErrInvalidConfig).
	ErrInvalidConfig = errors.New("broker: invalid config")
	// ErrNoLeader: no broker of the region leads yet (the election is
	// under way, or every broker is cut off from etcd). Retry.
	ErrNoLeader = errors.New("broker: no region leader")
	// ErrBundleNotFound: the bundle named is not one of its namespace's
	// bundles (never was, or was split).
	ErrBundleNotFound = errors.New("broker: bundle not found")
	// ErrNoBrokerAvailable: no live broker of the region, other than those
	// excluded, takes bundles (none registered, or all draining).
	ErrNoBrokerAvailable = errors.New("broker: no broker available")
	// ErrUnknownBroker: a broker named in a request (an unload's
	// destination) is not a live broker of the region.
	ErrUnknownBroker = errors.New("broker: unknown broker")
)
