package meta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// campaign is the one election algorithm both stores share, written against
// the Store interface so that both behave alike. It follows etcd's
// concurrency.Election:
//
//   - A candidate creates <prefix>/<lease id as 16 hex digits> under its
//     lease. The fixed width matters: no candidate key is a prefix of
//     another, so a prefix watch on one key sees that key alone.
//   - Candidates queue in CreateRevision order; the lowest leads. Each waits
//     only for the deletion of the candidate just ahead of it and then looks
//     again, so a leader's departure wakes one waiter, not the whole herd.
//   - A candidate whose key already exists under the same lease (a retry
//     after a lost reply) keeps its place in the queue and updates its value.
//
// The leader stays leader until its key is deleted (Resign, lease revoked or
// expired) or its lease's keep-alive stops; then Leadership.Done closes. The
// last condition is conservative: the key may live one more TTL, but the
// holder can no longer be sure of it, and DESIGN §3 asks it to stop acting.
//
// spawn runs the leadership monitor in a goroutine owned by the store.
func campaign(ctx context.Context, s Store, spawn func(func(context.Context)) bool,
	prefix string, value []byte, lease Lease) (Leadership, error) {
	if lease == nil {
		return nil, errNilLease
	}
	select {
	case <-lease.Done():
		return nil, fmt.Errorf("meta: campaign under a lease that has ended: %w", ErrLeaseNotFound)
	default:
	}
	pfx := electionPrefix(prefix)
	key := fmt.Sprintf("%s%016x", pfx, uint64(lease.ID()))

	// abandon withdraws the candidacy when the caller gives up waiting, so a
	// cancelled candidate never becomes a leader nobody knows about. It looks
	// the key up afresh because the caller's write may have landed even
	// though its answer was lost to the cancellation.
	abandon := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if kv, err := s.Get(dctx, key); err == nil && kv.Lease == lease.ID() {
			_ = s.Delete(dctx, key, kv.ModRevision)
		}
	}

	modRev, err := s.Create(ctx, key, value, lease.ID())
	createRev := modRev
	if errors.Is(err, ErrExists) {
		kv, gerr := s.Get(ctx, key)
		if gerr != nil {
			return nil, gerr
		}
		if kv.Lease != lease.ID() {
			return nil, fmt.Errorf("meta: election key %s is held under another lease: %w", key, ErrExists)
		}
		createRev = kv.CreateRevision
		modRev, err = s.Update(ctx, key, value, kv.ModRevision)
	}
	if err != nil {
		if ctx.Err() != nil {
			abandon()
		}
		return nil, err
	}

	for {
		kvs, rev, err := s.List(ctx, pfx)
		if err != nil {
			if ctx.Err() != nil {
				abandon()
			}
			return nil, err
		}
		var mine, ahead *KV
		for i := range kvs {
			kv := &kvs[i]
			switch {
			case kv.Key == key:
				mine = kv
			case kv.CreateRevision < createRev && (ahead == nil || kv.CreateRevision > ahead.CreateRevision):
				ahead = kv
			}
		}
		if mine == nil || mine.CreateRevision != createRev {
			return nil, fmt.Errorf("meta: election key %s vanished while campaigning: %w", key, ErrLeaseNotFound)
		}
		if ahead == nil {
			return newLeadership(s, spawn, key, modRev, rev, lease)
		}
		if err := waitDeleted(ctx, s, ahead.Key, rev+1, lease); err != nil {
			if ctx.Err() != nil {
				abandon()
			}
			return nil, err
		}
	}
}

// waitDeleted returns once key is deleted after revision fromRev, or the watch
// fails (the caller then looks again), or ctx or the lease ends.
func waitDeleted(ctx context.Context, s Store, key string, fromRev int64, lease Lease) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := s.Watch(wctx, key, fromRev)
	for {
		select {
		case resp, ok := <-ch:
			if !ok {
				if err := ctx.Err(); err != nil {
					return err
				}
				return nil
			}
			if resp.Err != nil {
				if errors.Is(resp.Err, ErrClosed) {
					return resp.Err
				}
				return nil // compacted: look again
			}
			for _, ev := range resp.Events {
				if ev.Type == EventDelete && ev.KV.Key == key {
					return nil
				}
			}
		case <-lease.Done():
			return fmt.Errorf("meta: lease ended while campaigning: %w", ErrLeaseNotFound)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// electionPrefix is the election's key prefix, always ending in "/" so that
// election "a" never sees the candidates of election "ab".
func electionPrefix(prefix string) string {
	if strings.HasSuffix(prefix, "/") {
		return prefix
	}
	return prefix + "/"
}

// leadership is a won election. Its monitor goroutine, owned by the store,
// closes done when the key is deleted, the lease ends or the store closes.
type leadership struct {
	s        Store
	key      string
	modRev   int64
	done     chan struct{}
	doneOnce sync.Once
}

func newLeadership(s Store, spawn func(func(context.Context)) bool, key string, modRev, rev int64, lease Lease) (Leadership, error) {
	l := &leadership{s: s, key: key, modRev: modRev, done: make(chan struct{})}
	ok := spawn(func(life context.Context) {
		defer l.lose()
		// A watch error leaves the leader unsure of its key; it steps down.
		_ = waitDeleted(life, s, key, rev+1, lease)
	})
	if !ok {
		l.lose()
		return nil, ErrClosed
	}
	return l, nil
}

func (l *leadership) Key() string           { return l.key }
func (l *leadership) Done() <-chan struct{} { return l.done }
func (l *leadership) lose()                 { l.doneOnce.Do(func() { close(l.done) }) }

// Resign deletes the election key, handing leadership to the next candidate.
// A key already gone (lease ended) is not an error.
func (l *leadership) Resign(ctx context.Context) error {
	err := l.s.Delete(ctx, l.key, l.modRev)
	if err != nil && !errors.Is(err, ErrConflict) {
		return err
	}
	l.lose()
	return nil
}
