package replicator

import (
	"context"
	"errors"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/mledger"
)

// openCursor opens the task's cursor meridian.repl.<remote>, waiting until
// it exists. The replicator never creates it: the topic's owning broker
// does, when it loads the topic or sees its clusters change, at the
// position only it can choose (the topic's first entry for a topic its
// load created, its end for a region added to an existing topic, or its
// start with replicationStartAt=earliest). A cursor created here at the
// zero position, as a fallback, would race with the owner's and replicate
// the whole stored backlog to a region added with replicationStartAt=latest;
// and a topic no broker has loaded since its region was added receives no
// new messages, so waiting loses nothing. It also keeps a cursor deleted
// for a removed region from being written again.
func (t *task) openCursor(ctx context.Context) (*mledger.ExternalCursor, error) {
	w := t.w
	name := CursorPrefix + t.id.Remote
	key := mledger.CursorKey(w.cfg.Region, t.id.Topic, name)
	logged := false
	for {
		// The revision to watch from is read before the open, so that a
		// creation between the two is seen.
		_, rev, err := w.store.List(ctx, key)
		if err != nil {
			return nil, err
		}
		c, err := mledger.OpenExternalCursor(ctx, w.store, w.cfg.Region, t.id.Topic, name, mledger.Position{},
			mledger.WithGuard(t.id.key(w.cfg.Region), t.rev), mledger.WithoutCreate())
		if !errors.Is(err, mledger.ErrNoCursor) {
			return c, err
		}
		if !logged {
			t.log.Info("waiting for the topic's owner to create the replication cursor")
			logged = true
		}
		// The key is a prefix of longer cursor names too; any change under
		// it is only a reason to look again.
		if err := awaitChange(ctx, w.store, key, rev+1); err != nil {
			return nil, err
		}
	}
}

// awaitChange returns once something under prefix changes from revision
// from on, or the watch ends (then the caller looks again), or ctx ends.
func awaitChange(ctx context.Context, store meta.Store, prefix string, from int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range store.Watch(wctx, prefix, from) {
		if wr.Err != nil || len(wr.Events) > 0 {
			return nil
		}
	}
	return ctx.Err()
}
