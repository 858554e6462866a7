package mledger

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// WithoutCreate makes OpenExternalCursor open only a cursor that exists,
// returning ErrNoCursor otherwise. The replicator opens its cursors so:
// the topic's owner creates them (CreateExternalCursor), at the position
// that only it can choose (the topic's start for a topic it just created,
// its end for a region added later), and a writer that created a missing
// cursor itself would pick a position of its own.
func WithoutCreate() ExternalCursorOption {
	return func(c *ExternalCursor) { c.noCreate = true }
}

// CreateExternalCursor creates the cursor name of topic at start unless it
// exists, and never moves an existing one: creating a cursor that is
// already there is not an error, and leaves it as it is. created reports
// whether this call made it.
func CreateExternalCursor(ctx context.Context, store meta.Store, region, topic, name string, start Position) (created bool, err error) {
	b, err := encodeCursor(cursorValue{MarkDelete: start})
	if err != nil {
		return false, err
	}
	_, err = store.Create(ctx, CursorKey(region, topic, name), b, meta.NoLease)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, meta.ErrExists):
		return false, nil
	default:
		return false, fmt.Errorf("create cursor %s of %s: %w", name, topic, err)
	}
}

// ExternalCursorNames lists the cursors of topic whose names start with
// namePrefix (the replicator's meridian.repl.), straight from the store.
func ExternalCursorNames(ctx context.Context, store meta.Store, region, topic, namePrefix string) ([]string, error) {
	prefix := cursorPrefix(region, topic)
	// Escaping a name prefix gives the prefix of the escaped names.
	kvs, _, err := store.List(ctx, prefix+url.PathEscape(namePrefix))
	if err != nil {
		return nil, fmt.Errorf("list cursors of %s: %w", topic, err)
	}
	var names []string
	for _, kv := range kvs {
		if strings.Contains(strings.TrimPrefix(kv.Key, prefix), "/") {
			continue
		}
		if name, err := meta.Name(kv.Key); err == nil && strings.HasPrefix(name, namePrefix) {
			names = append(names, name)
		}
	}
	return names, nil
}
