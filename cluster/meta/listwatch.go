package meta

import (
	"context"
	"log/slog"
	"time"
)

// ListWatch keeps a view of the keys under prefix up to date: it lists
// them and hands the whole listing to snapshot, then watches from the
// listing's revision and hands each batch of changes to events. After a
// watch error (the revision compacted away, a member cut off from its
// leader) it lists again and calls snapshot with the new listing, so no
// change is missed; snapshot must therefore replace what the view held, or
// take again keys it has seen. A failed list is retried after retry. It
// returns when ctx ends.
func ListWatch(ctx context.Context, s Store, prefix string, retry time.Duration, log *slog.Logger,
	snapshot func([]KV), events func([]Event)) {
	for ctx.Err() == nil {
		kvs, rev, err := s.List(ctx, prefix)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("listing for a watch failed", "prefix", prefix, "err", err)
			select {
			case <-time.After(retry):
			case <-ctx.Done():
				return
			}
			continue
		}
		snapshot(kvs)
		for resp := range s.Watch(ctx, prefix, rev+1) {
			if resp.Err != nil {
				if ctx.Err() == nil {
					log.Info("watch ended: listing again", "prefix", prefix, "err", resp.Err)
				}
				break
			}
			events(resp.Events)
		}
	}
}
