package ledger

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/topology"
)

// Registration is a live bookie's record under
// /meridian/regions/<region>/bookies/<id>, written by the bookie under its
// lease: {"v":1,"id":"...","address":"host:port","rack":"...","readOnly":false}.
type Registration = bkproto.Registration

// Directory is the client's view of a region's live bookies, kept current by
// a watch on the bookies prefix. Its goroutine (run) owns the watch; the map
// is a cache read under mu by placement and by the bkproto adapter, which
// finds a bookie's address here.
type Directory struct {
	store  meta.Store
	prefix string
	log    *slog.Logger
	retry  time.Duration

	mu      sync.Mutex
	bookies map[string]Registration
	changed chan struct{} // closed (and replaced) on every change
	ready   chan struct{} // closed after the first complete listing
	isReady bool
}

func newDirectory(store meta.Store, region string, retry time.Duration, log *slog.Logger) *Directory {
	return &Directory{
		store:   store,
		prefix:  BookiesPrefix(region),
		log:     log,
		retry:   retry,
		bookies: make(map[string]Registration),
		changed: make(chan struct{}),
		ready:   make(chan struct{}),
	}
}

// Snapshot returns the registered bookies in placement's terms.
func (d *Directory) Snapshot() []topology.Bookie {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]topology.Bookie, 0, len(d.bookies))
	for _, r := range d.bookies {
		out = append(out, topology.Bookie{ID: r.ID, Rack: r.Rack, ReadOnly: r.ReadOnly})
	}
	return out
}

// Lookup returns a registered bookie's record.
func (d *Directory) Lookup(id string) (Registration, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.bookies[id]
	return r, ok
}

// Changed returns a channel closed at the next change of the bookie set.
func (d *Directory) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

// waitReady blocks until the first listing is in.
func (d *Directory) waitReady(ctx context.Context) error {
	select {
	case <-d.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run keeps the bookie set up to date (meta.ListWatch) until ctx is done.
func (d *Directory) run(ctx context.Context) {
	meta.ListWatch(ctx, d.store, d.prefix, d.retry, d.log, d.replace, d.apply)
}

func (d *Directory) replace(kvs []meta.KV) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bookies = make(map[string]Registration, len(kvs))
	for _, kv := range kvs {
		if r, ok := d.decode(kv); ok {
			d.bookies[r.ID] = r
		}
	}
	d.notifyLocked()
}

func (d *Directory) apply(evs []meta.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ev := range evs {
		switch ev.Type {
		case meta.EventPut:
			if r, ok := d.decode(ev.KV); ok {
				d.bookies[r.ID] = r
			}
		case meta.EventDelete:
			delete(d.bookies, d.idOf(ev.KV.Key))
		}
	}
	d.notifyLocked()
}

// decode reads one registration. The map is keyed by the key's last segment
// so that a delete event (which carries no value) finds it.
func (d *Directory) decode(kv meta.KV) (Registration, bool) {
	r, err := bkproto.ParseRegistration(kv.Value)
	if err != nil {
		d.log.Warn("ignoring bad bookie registration", "key", kv.Key, "err", err)
		return r, false
	}
	r.ID = d.idOf(kv.Key)
	return r, true
}

// idOf is the bookie id a key names: its escaped last segment.
func (d *Directory) idOf(key string) string {
	seg := strings.TrimPrefix(key, d.prefix)
	if id, err := url.PathUnescape(seg); err == nil {
		return id
	}
	return seg
}

func (d *Directory) notifyLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
	if !d.isReady {
		d.isReady = true
		close(d.ready)
	}
}

// sleepCtx waits for d on clock, or for ctx; it reports whether ctx is
// still live.
func sleepCtx(ctx context.Context, clock clockwork.Clock, d time.Duration) bool {
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true
	case <-ctx.Done():
		return false
	}
}
