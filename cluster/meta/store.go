// Package meta is Meridian's metadata store: a small, etcd-shaped interface
// (get, range, create-if-absent, compare-and-swap on ModRevision (alone, or
// guarded by a second key's ModRevision in the same transaction), moving a key
// to another lease, prefix watch, leases and elections) in store.go, with two
// implementations: one over etcd (go.etcd.io/etcd/client/v3, etcd.go) and one
// in memory for unit tests (memory.go, whose lease expiry runs on an injected
// clockwork.Clock).
// Both campaign in elections by the one algorithm of election.go.
//
// Every write to shared state is conditional. Keys are created only when absent
// (CreateRevision == 0) and changed or deleted only at the ModRevision the
// writer last read. A failed condition returns ErrConflict (or ErrExists), and
// by DESIGN §3 the caller treats that as "someone else owns this now": it stops
// writing instead of re-reading and retrying over the winner.
//
// Around the interface:
//   - Key, GlobalKey and RegionKey build DESIGN §3's keys from escaped name
//     segments; EncodeJSON and DecodeJSON read and write versioned values
//     (keys.go).
//   - NextID hands out unique, increasing ids from a counter key
//     (sequence.go).
//   - RevokeStale removes a previous run's lease after a restart (stale.go).
//   - ListWatch keeps a view of a prefix current: it lists, watches from the
//     listing's revision, and lists again after a watch error (listwatch.go).
//   - Instrument wraps a Store so that each operation's latency and errors
//     are measured (metrics.go).
//   - StartEmbed launches an embedded etcd member (see Embed), used by the
//     tests, `meridian etcd`, `meridian standalone` and `meridian dev`. The
//     member compacts its history, caps its database and defragments itself
//     on a schedule; EmbedConfig, in embed.go, says how, and what an operator
//     does about a NOSPACE alarm.
//   - etcd logs through zap; zaplog.go hands those records to the slog
//     logger of the client or of the embedded member.
//
// Which to use: Dial (or NewEtcd) in every process and every integration
// test; NewMemory only in unit tests, where its manual clock and Expire hook
// reach failures that a real server makes slow to produce.
//
// Its locks are ordered with the rest of the process's in docs/lock-order.md.
package meta

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// KV is one key as read from the store.
type KV struct {
	Key   string
	Value []byte
	// CreateRevision is the store revision at which the key was created.
	CreateRevision int64
	// ModRevision is the store revision of the key's last change. It is the
	// version that Update and Delete compare against.
	ModRevision int64
	// Lease is the lease the key is attached to, or NoLease.
	Lease LeaseID
}

// LeaseID names a lease. Keys attached to a lease are deleted when it expires
// or is revoked.
type LeaseID int64

// NoLease attaches nothing.
const NoLease LeaseID = 0

// EventType says what happened to a key in a watch.
type EventType int

const (
	// EventPut is a creation or an update.
	EventPut EventType = iota + 1
	// EventDelete is a deletion, including one caused by lease expiry.
	EventDelete
)

// Event is one change seen by a watch. For EventDelete only KV.Key and
// KV.ModRevision (the revision of the deletion) are set, as etcd reports it.
type Event struct {
	Type EventType
	KV   KV
}

// WatchResponse is one batch of events, all at the same store revision, or a
// terminal error. After an error (for example ErrCompacted: the requested start
// revision is gone) the channel is closed and the watcher must re-read with
// List and watch again from the revision List returned.
type WatchResponse struct {
	Events   []Event
	Revision int64
	Err      error
}

// Store is the metadata store. Implementations are safe for concurrent use.
type Store interface {
	// Get returns the key, or ErrNotFound.
	Get(ctx context.Context, key string) (KV, error)
	// List returns every key under prefix, in key order, and the store
	// revision the read was made at (the revision to watch from, plus one).
	List(ctx context.Context, prefix string) ([]KV, int64, error)
	// Create writes key only if it does not exist (CreateRevision == 0),
	// attached to lease unless it is NoLease. It returns the new ModRevision,
	// or ErrExists.
	Create(ctx context.Context, key string, value []byte, lease LeaseID) (int64, error)
	// Update replaces key's value only if its ModRevision is still modRev,
	// keeping its lease. It returns the new ModRevision, or ErrConflict when
	// the key changed or is gone.
	Update(ctx context.Context, key string, value []byte, modRev int64) (int64, error)
	// UpdateGuarded is Update(key, value, modRev) that also requires
	// guardKey to still be at ModRevision guardRev, in one transaction;
	// either condition failing is ErrConflict and writes nothing. It is how
	// a holder of a task key (a lease-backed claim) writes state that only
	// the holder may write: once the claim was lost and the key re-created
	// by another holder, its ModRevision differs, and the old holder's
	// write is refused even if the state key itself did not change.
	UpdateGuarded(ctx context.Context, key string, value []byte, modRev int64, guardKey string, guardRev int64) (int64, error)
	// UpdateIfNone is Update(key, value, modRev) that also requires that no
	// key exists under prefix, in one transaction; either condition
	// failing is ErrConflict and writes nothing. It is how a region takes
	// over a namespace only once every session of the region it replaces
	// has ended (cluster/broker's failover): a session created meanwhile
	// refuses the write.
	UpdateIfNone(ctx context.Context, key string, value []byte, modRev int64, prefix string) (int64, error)
	// MoveToLease replaces key's value and attaches it to lease (NoLease:
	// to none) only if its ModRevision is still modRev, in one transaction.
	// It returns the new ModRevision, ErrConflict when the key changed or is
	// gone, or ErrLeaseNotFound when lease does not exist (then nothing is
	// written). It is how a bundle changes hands without a moment of being
	// unowned: the key goes from the old owner's session lease to the new
	// owner's in one step, so it lives and dies with the new owner from then
	// on, and a change by anyone else since modRev refuses the move.
	MoveToLease(ctx context.Context, key string, value []byte, modRev int64, lease LeaseID) (int64, error)
	// Delete removes key only if its ModRevision is still modRev, or returns
	// ErrConflict.
	Delete(ctx context.Context, key string, modRev int64) error
	// Watch streams the changes under prefix from revision fromRev (0 means
	// "from now": every change after Watch returns). The channel is closed
	// when ctx is done or after a WatchResponse carrying Err. When the store
	// is closed the channel is closed too; its final ErrClosed response is
	// delivered only if the reader is there to take it, because Close never
	// waits on a reader. A watch served by a member cut off from its leader
	// ends with an error, but one whose member is merely unreachable does
	// not: the client reconnects and resumes where it was. Losing contact
	// shows reliably only in leases (Lease.Done), which is what ownership
	// must hang on.
	Watch(ctx context.Context, prefix string, fromRev int64) <-chan WatchResponse
	// Grant creates a lease with the given time to live and keeps it alive in
	// the background until it is revoked, ctx is done, or the store cannot
	// renew it in time; then Lease.Done is closed.
	Grant(ctx context.Context, ttl time.Duration) (Lease, error)
	// Revoke ends a lease by id, deleting its keys. It is how a restarted
	// process removes the leases of its previous run (DESIGN §3). Revoking a
	// lease that no longer exists is not an error.
	Revoke(ctx context.Context, id LeaseID) error
	// TimeToLive reports, as the server sees it, at most how long lease id
	// has left (remaining) and the TTL it was granted with. A holder that
	// keeps its lease alive renews it every third of its TTL, so remaining
	// below half of granted means the holder has missed renewals: it is
	// frozen, or cut off from the store. ErrLeaseNotFound once the lease
	// has ended.
	TimeToLive(ctx context.Context, id LeaseID) (remaining, granted time.Duration, err error)
	// Campaign blocks until this caller leads the election named by prefix,
	// announcing value under lease, or until ctx is done. Leadership is lost
	// when the lease ends or Resign is called.
	Campaign(ctx context.Context, prefix string, value []byte, lease Lease) (Leadership, error)
	// Close releases the store's resources. Leases it keeps alive stop being
	// renewed.
	Close() error
}

// Lease is a live lease kept alive by the store.
type Lease interface {
	ID() LeaseID
	// Done is closed when the lease has ended: revoked, expired, or no longer
	// renewable. Whatever was held under it must be treated as lost.
	Done() <-chan struct{}
	// Revoke ends the lease now and deletes its keys.
	Revoke(ctx context.Context) error
}

// Leadership is won from Campaign.
type Leadership interface {
	// Key is the election key this leader holds.
	Key() string
	// Done is closed when leadership is lost.
	Done() <-chan struct{}
	// Resign gives up leadership; the next candidate takes over.
	Resign(ctx context.Context) error
}

// revisionAt is one condition of a conditional write: key must exist at
// ModRevision rev.
type revisionAt struct {
	key string
	rev int64
}

// conflict is the ErrConflict of a conditional write whose conditions
// were conds (the store does not say which one failed).
func conflict(conds []revisionAt) error {
	parts := make([]string, len(conds))
	for i, c := range conds {
		parts[i] = fmt.Sprintf("%s at revision %d", c.key, c.rev)
	}
	return fmt.Errorf("%w: %s", ErrConflict, strings.Join(parts, ", guarded by "))
}
