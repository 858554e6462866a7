package autorecovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// Mark is a ledger's under-replication mark, the value at
// bkproto.UnderReplicatedKey, written by the auditor and deleted by the
// worker that finished the repair:
//
//	{"v":1,"bookies":["b3"],"since":<unix ms>,"reason":"lost bookie b3","lastError":"...","errorAt":<unix ms>}
//
// Every write is a CAS on the mark's revision, so the auditor adding a
// bookie and a worker deleting the mark it repaired never lose each
// other's change: the worker's delete fails, it reads the mark again and
// repairs the new bookie too.
type Mark struct {
	// Bookies are the bookies to replace in every final fragment of the
	// ledger that names them: lost, decommissioning, or lacking copies.
	Bookies []string `json:"bookies"`
	// Since is when the ledger was first marked, in Unix milliseconds.
	Since int64 `json:"since"`
	// Reason says why, for people.
	Reason string `json:"reason"`
	// LastError is why the last repair attempt stopped short (no good copy
	// of an entry left, no spare bookie, ...), and ErrorAt when. A ledger
	// that cannot be repaired stays marked and says so here: it is never
	// skipped silently.
	LastError string `json:"lastError,omitempty"`
	ErrorAt   int64  `json:"errorAt,omitempty"`
	// EntryLost says the last attempt found an entry with no good copy
	// left: the ledger has lost data, and only an operator can help.
	EntryLost bool `json:"entryLost,omitempty"`
}

// markVersion is the "v" of a Mark.
const markVersion = 1

// storedMark is a mark as read, with its ledger and revision.
type storedMark struct {
	Ledger   int64
	Mark     Mark
	Revision int64
}

// markLedger marks ledger id under-replicated for bookies, or adds them to
// its mark; it reports whether it changed anything.
func markLedger(ctx context.Context, store meta.Store, region string, id int64, bookies []string, reason string, now time.Time) (bool, error) {
	key := bkproto.UnderReplicatedKey(region, id)
	for {
		kv, err := store.Get(ctx, key)
		if errors.Is(err, meta.ErrNotFound) {
			v, err := meta.EncodeJSON(markVersion, Mark{Bookies: sortedSet(bookies), Since: now.UnixMilli(), Reason: reason})
			if err != nil {
				return false, err
			}
			_, err = store.Create(ctx, key, v, meta.NoLease)
			if errors.Is(err, meta.ErrExists) {
				continue // a worker's error note or another auditor's mark
			}
			return err == nil, err
		}
		if err != nil {
			return false, err
		}
		var m Mark
		if _, err := meta.DecodeJSON(kv.Value, markVersion, &m); err != nil {
			return false, fmt.Errorf("under-replication mark of ledger %d: %w", id, err)
		}
		merged := sortedSet(append(slices.Clone(m.Bookies), bookies...))
		if slices.Equal(merged, m.Bookies) {
			return false, nil
		}
		m.Bookies = merged
		m.Reason = reason
		v, err := meta.EncodeJSON(markVersion, m)
		if err != nil {
			return false, err
		}
		if _, err = store.Update(ctx, key, v, kv.ModRevision); errors.Is(err, meta.ErrConflict) {
			continue
		}
		return err == nil, err
	}
}

// listMarks returns every under-replication mark of region, by ledger id.
func listMarks(ctx context.Context, store meta.Store, region string) ([]storedMark, error) {
	prefix := bkproto.UnderReplicatedPrefix(region)
	kvs, _, err := store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list under-replicated ledgers: %w", err)
	}
	out := make([]storedMark, 0, len(kvs))
	for _, kv := range kvs {
		id, ok := bkproto.ParseIDKey(prefix, kv.Key)
		if !ok {
			continue
		}
		var m Mark
		if _, err := meta.DecodeJSON(kv.Value, markVersion, &m); err != nil {
			continue
		}
		out = append(out, storedMark{Ledger: id, Mark: m, Revision: kv.ModRevision})
	}
	slices.SortFunc(out, func(a, b storedMark) int { return cmp.Compare(a.Ledger, b.Ledger) })
	return out, nil
}

// readMark reads ledger id's mark; ok is false when it has none.
func readMark(ctx context.Context, store meta.Store, region string, id int64) (storedMark, bool, error) {
	kv, err := store.Get(ctx, bkproto.UnderReplicatedKey(region, id))
	if errors.Is(err, meta.ErrNotFound) {
		return storedMark{}, false, nil
	}
	if err != nil {
		return storedMark{}, false, err
	}
	var m Mark
	if _, err := meta.DecodeJSON(kv.Value, markVersion, &m); err != nil {
		return storedMark{}, false, fmt.Errorf("under-replication mark of ledger %d: %w", id, err)
	}
	return storedMark{Ledger: id, Mark: m, Revision: kv.ModRevision}, true, nil
}

// noteError records on ledger id's mark why its repair stopped short.
func noteError(ctx context.Context, store meta.Store, region string, sm storedMark, cause error, now time.Time) (storedMark, error) {
	sm.Mark.LastError, sm.Mark.ErrorAt = cause.Error(), now.UnixMilli()
	sm.Mark.EntryLost = errors.Is(cause, ledger.ErrNoGoodCopy)
	v, err := meta.EncodeJSON(markVersion, sm.Mark)
	if err != nil {
		return sm, err
	}
	rev, err := store.Update(ctx, bkproto.UnderReplicatedKey(region, sm.Ledger), v, sm.Revision)
	if err != nil {
		return sm, err
	}
	sm.Revision = rev
	return sm, nil
}

func sortedSet(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
