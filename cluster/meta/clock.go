package meta

import "time"

// Clock schedules the in-memory store's lease expiries: a lease whose
// keep-alive has stopped expires one TTL later, exactly as an etcd server
// would let it lapse (and Now tells how much of that TTL is left). Tests inject a manual clock to expire
// leases without sleeping; production code never needs one, because the etcd
// store leaves expiry to the server.
type Clock interface {
	// AfterFunc calls f in its own goroutine once d has elapsed. stop cancels
	// the call and reports whether it did so before f started.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
	// Now is the clock's current time.
	Now() time.Time
}

// SystemClock returns the wall clock.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

func (systemClock) Now() time.Time { return time.Now() }
