package meta

import (
	"context"
	"errors"
	"fmt"
)

// RevokeStale revokes the lease attached to key, if key exists and has one,
// and returns that lease's id (NoLease when there was nothing to revoke).
//
// Why: an etcd server that restarts renews every existing lease to its full
// TTL (DESIGN §3, "Leases after a crash"). A process restarted on its own
// data (standalone, or a broker or bookie with the same id) would otherwise
// see its previous run's registration and ownership keys linger for a whole
// TTL, or fail to re-create them with ErrExists. So it calls RevokeStale on
// its registration key before registering again; every key the old run held
// under that lease goes with it, in one revision.
//
// Only call it on a key that belongs to this process's identity: revoking
// the lease of a key another live process holds takes away everything that
// process holds.
func RevokeStale(ctx context.Context, s Store, key string) (LeaseID, error) {
	kv, err := s.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return NoLease, nil
	}
	if err != nil {
		return NoLease, err
	}
	if kv.Lease == NoLease {
		return NoLease, nil
	}
	if err := s.Revoke(ctx, kv.Lease); err != nil {
		return NoLease, fmt.Errorf("meta: revoke stale lease %x of %s: %w", int64(kv.Lease), key, err)
	}
	return kv.Lease, nil
}
