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
// namePrefix, then watches from the listed revision; when the watch ends
// (compaction, lost leader) it lists again.
func (ml *ManagedLedger) watchForeignPrefix(namePrefix string) {
	ctx := ml.runCtx
	prefix := cursorPrefix(ml.cfg.Region, ml.topic)
	// Escaping a name prefix gives the prefix of the escaped names: escaping
	// works byte by byte on whole characters.
	keyPrefix := prefix + url.PathEscape(namePrefix)
	for ctx.Err() == nil {
		kvs, rev, err := ml.f.store.List(ctx, keyPrefix)
		if err != nil {
			if ctx.Err() == nil {
				ml.log.Warn("foreign cursors: list failed", "err", err)
			}
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		seen := map[string]Position{}
		for _, kv := range kvs {
			if name, p, ok := ml.foreignCursor(prefix, kv); ok {
				seen[name] = p
			}
		}
		ml.mu.Lock()
		for name := range ml.foreign {
			if strings.HasPrefix(name, namePrefix) {
				delete(ml.foreign, name)
			}
		}
		maps.Copy(ml.foreign, seen)
		ml.mu.Unlock()
		for wr := range ml.f.store.Watch(ctx, keyPrefix, rev+1) {
			if wr.Err != nil {
				break
			}
			ml.mu.Lock()
			for _, ev := range wr.Events {
				name, p, ok := ml.foreignCursor(prefix, ev.KV)
				switch {
				case !ok:
				case ev.Type == meta.EventDelete:
					delete(ml.foreign, name)
				default:
					ml.foreign[name] = p
				}
			}
			ml.mu.Unlock()
		}
	}
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
type ExternalCursor struct {
	store  meta.Store
	key    string
	name   string
	modRev int64
	val    cursorValue
	lost   bool
}

// OpenExternalCursor opens (or creates, at start) the cursor name of topic
// for writing from outside the topic's owner.
func OpenExternalCursor(ctx context.Context, store meta.Store, region, topic, name string, start Position) (*ExternalCursor, error) {
	c := &ExternalCursor{store: store, key: CursorKey(region, topic, name), name: name}
	kv, err := store.Get(ctx, c.key)
	switch {
	case errors.Is(err, meta.ErrNotFound):
		c.val = cursorValue{MarkDelete: start}
		b, err := encodeCursor(c.val)
		if err != nil {
			return nil, err
		}
		if c.modRev, err = store.Create(ctx, c.key, b, meta.NoLease); err != nil {
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

// MarkDeletePosition returns the last position written.
func (c *ExternalCursor) MarkDeletePosition() Position { return c.val.MarkDelete }

// MarkDelete records p as consumed. It refuses to move backwards.
func (c *ExternalCursor) MarkDelete(ctx context.Context, p Position) error {
	if c.lost {
		return ErrOwnershipLost
	}
	if p.Less(c.val.MarkDelete) {
		return fmt.Errorf("%w: %v is before the mark-delete position %v", ErrInvalidPosition, p, c.val.MarkDelete)
	}
	next := cursorValue{MarkDelete: p, Properties: c.val.Properties}
	b, err := encodeCursor(next)
	if err != nil {
		return err
	}
	rev, err := c.store.Update(ctx, c.key, b, c.modRev)
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
