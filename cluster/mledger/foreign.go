package mledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// watchForeign keeps ml.foreign up to date with the mark-delete positions
// of the topic's cursors owned by other processes (ForeignCursorPrefixes),
// so that retention never deletes what they still need. It watches only
// the keys of those names (one watch per prefix), not the writes of the
// cursors owned here. It never writes.
func (ml *ManagedLedger) watchForeign() {
	defer ml.wg.Done()
	var wg sync.WaitGroup
	for _, p := range ml.cfg.ForeignCursorPrefixes {
		wg.Go(func() { ml.watchForeignPrefix(p) })
	}
	wg.Wait()
}

// watchForeignPrefix lists the foreign cursors whose names start with
// namePrefix and keeps them up to date (meta.ListWatch).
func (ml *ManagedLedger) watchForeignPrefix(namePrefix string) {
	ctx := ml.runCtx
	prefix := cursorPrefix(ml.cfg.Region, ml.topic)
	// Escaping a name prefix gives the prefix of the escaped names: escaping
	// works byte by byte on whole characters.
	keyPrefix := prefix + url.PathEscape(namePrefix)
	snapshot := func(kvs []meta.KV) {
		seen := map[string]Position{}
		for _, kv := range kvs {
			if name, p, ok := ml.foreignCursor(prefix, kv); ok {
				seen[name] = p
			}
		}
		ml.mu.Lock()
		defer ml.mu.Unlock()
		for name := range ml.foreign {
			if strings.HasPrefix(name, namePrefix) {
				delete(ml.foreign, name)
			}
		}
		maps.Copy(ml.foreign, seen)
	}
	events := func(evs []meta.Event) {
		ml.mu.Lock()
		defer ml.mu.Unlock()
		for _, ev := range evs {
			name, p, ok := ml.foreignCursor(prefix, ev.KV)
			switch {
			case !ok:
			case ev.Type == meta.EventDelete:
				delete(ml.foreign, name)
			default:
				ml.foreign[name] = p
			}
		}
	}
	meta.ListWatch(ctx, ml.f.store, keyPrefix, time.Second, ml.log, snapshot, events)
}

// foreignCursor decodes a cursor record if it belongs to another process.
func (ml *ManagedLedger) foreignCursor(prefix string, kv meta.KV) (string, Position, bool) {
	rest := strings.TrimPrefix(kv.Key, prefix)
	if strings.Contains(rest, "/") {
		return "", Position{}, false
	}
	name, err := meta.Name(kv.Key)
	if err != nil || !ml.cfg.foreign(name) {
		return "", Position{}, false
	}
	if kv.Value == nil {
		return name, Position{}, true // a deletion
	}
	v, err := decodeCursor(kv.Value)
	if err != nil {
		// Unreadable: pin everything rather than let retention guess.
		ml.log.Warn("foreign cursor unreadable; holding retention", "cursor", name, "err", err)
		return name, Position{}, true
	}
	return name, v.MarkDelete, true
}

// ForeignCursors returns the mark-delete positions of the cursors owned by
// other processes, as last seen through the watch.
func (ml *ManagedLedger) ForeignCursors() map[string]Position {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	out := make(map[string]Position, len(ml.foreign))
	for k, v := range ml.foreign {
		out[k] = v
	}
	return out
}

// ExternalCursor is a durable cursor written by a process that does not
// own the topic: the replicator's meridian.repl.<remote>. It holds only a
// mark-delete position; every MarkDelete is one CAS write, and a failed CAS
// means another worker took the task (ErrOwnershipLost). The topic's owner
// sees it through its watch.
//
// Guarded. A worker holds its task through a key under its lease
// (/meridian/regions/<r>/replicators/<task>). Opened WithGuard on that key
// and the revision the worker created it at, every write is also
// conditional on the key being unchanged (meta.Store.UpdateGuarded). A
// worker frozen past its lease, whose task key was deleted and created
// again by the next holder, therefore has its late write refused with
// ErrOwnershipLost, even if the cursor itself has not moved since, and the
// new holder keeps writing.
//
// An ExternalCursor is used by one goroutine at a time.
type ExternalCursor struct {
	store  meta.Store
	key    string
	name   string
	guard  *cursorGuard
	modRev int64
	val    cursorValue
	lost   bool
	// noCreate: open only a cursor that exists (WithoutCreate).
	noCreate bool
}

// cursorGuard is the key (and its revision) an ExternalCursor's writes
// are conditional on.
type cursorGuard struct {
	key string
	rev int64
}

// ExternalCursorOption changes how OpenExternalCursor opens a cursor.
type ExternalCursorOption func(*ExternalCursor)

// WithGuard makes every write of the cursor conditional on key still being
// at ModRevision rev: the worker's task key, as it created it.
func WithGuard(key string, rev int64) ExternalCursorOption {
	return func(c *ExternalCursor) { c.guard = &cursorGuard{key: key, rev: rev} }
}

// OpenExternalCursor opens (or creates, at start) the cursor name of topic
// for writing from outside the topic's owner. With WithGuard it first
// checks that the guard still holds (ErrOwnershipLost otherwise). Creating
// the cursor is not itself guarded (the store has no guarded create), but
// it happens only when the cursor does not exist, so a stale worker can at
// most create it at its start position, exactly as the new holder would;
// a holder that finds it created meanwhile reads it instead.
func OpenExternalCursor(ctx context.Context, store meta.Store, region, topic, name string, start Position, opts ...ExternalCursorOption) (*ExternalCursor, error) {
	c := &ExternalCursor{store: store, key: CursorKey(region, topic, name), name: name}
	for _, o := range opts {
		o(c)
	}
	if g := c.guard; g != nil {
		kv, err := store.Get(ctx, g.key)
		switch {
		case errors.Is(err, meta.ErrNotFound) || (err == nil && kv.ModRevision != g.rev):
			return nil, fmt.Errorf("%w: cursor %s: guard %s is no longer at revision %d", ErrOwnershipLost, name, g.key, g.rev)
		case err != nil:
			return nil, fmt.Errorf("open cursor %s: read guard: %w", name, err)
		}
	}
	for created := false; ; {
		kv, err := store.Get(ctx, c.key)
		switch {
		case errors.Is(err, meta.ErrNotFound) && c.noCreate:
			return nil, fmt.Errorf("%w: %s of %s", ErrNoCursor, name, topic)
		case errors.Is(err, meta.ErrNotFound) && !created:
			c.val = cursorValue{MarkDelete: start}
			b, err := encodeCursor(c.val)
			if err != nil {
				return nil, err
			}
			c.modRev, err = store.Create(ctx, c.key, b, meta.NoLease)
			if errors.Is(err, meta.ErrExists) {
				created = true // by someone else: read theirs
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("create cursor %s: %w", name, err)
			}
		case err == nil:
			if c.val, err = decodeCursor(kv.Value); err != nil {
				return nil, err
			}
			c.modRev = kv.ModRevision
		default:
			return nil, fmt.Errorf("open cursor %s: %w", name, err)
		}
		return c, nil
	}
}

// MarkDeletePosition returns the last position written.
func (c *ExternalCursor) MarkDeletePosition() Position { return c.val.MarkDelete }

// MarkDelete records p as consumed. It refuses to move backwards. A
// conflict (the cursor written by another, or the guard changed) is
// ErrOwnershipLost, for good: the cursor writes nothing more.
func (c *ExternalCursor) MarkDelete(ctx context.Context, p Position) error {
	if c.lost {
		return fmt.Errorf("%w: cursor %s", ErrOwnershipLost, c.name)
	}
	if p.Less(c.val.MarkDelete) {
		return fmt.Errorf("%w: %v is before the mark-delete position %v", ErrInvalidPosition, p, c.val.MarkDelete)
	}
	next := cursorValue{MarkDelete: p, Properties: c.val.Properties}
	b, err := encodeCursor(next)
	if err != nil {
		return err
	}
	var rev int64
	if g := c.guard; g != nil {
		rev, err = c.store.UpdateGuarded(ctx, c.key, b, c.modRev, g.key, g.rev)
	} else {
		rev, err = c.store.Update(ctx, c.key, b, c.modRev)
	}
	if errors.Is(err, meta.ErrConflict) {
		c.lost = true
		return fmt.Errorf("%w: cursor %s: %w", ErrOwnershipLost, c.name, err)
	}
	if err != nil {
		return err
	}
	c.modRev, c.val = rev, next
	return nil
}

// DeleteExternalCursor deletes the cursor name of topic, written from
// outside the topic's owner: a region removed from a topic's replication
// frees what its meridian.repl.<remote> cursor held. The owner's watch
// sees the deletion and stops pinning retention for it. A cursor that does
// not exist is not an error. The deletion is a CAS on the revision read
// just before: a cursor written in between (its task's worker has not
// stopped yet) is ErrConflict, and the caller stops that worker first.
func DeleteExternalCursor(ctx context.Context, store meta.Store, region, topic, name string) error {
	key := CursorKey(region, topic, name)
	kv, err := store.Get(ctx, key)
	if errors.Is(err, meta.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete cursor %s: %w", name, err)
	}
	if err := store.Delete(ctx, key, kv.ModRevision); err != nil {
		if errors.Is(err, meta.ErrConflict) {
			// Deleted meanwhile (the topic's owner and the worker both
			// delete a removed region's cursor) is what was asked.
			if _, gerr := store.Get(ctx, key); errors.Is(gerr, meta.ErrNotFound) {
				return nil
			}
		}
		return fmt.Errorf("delete cursor %s: %w", name, err)
	}
	return nil
}
