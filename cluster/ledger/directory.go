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

// RackInfo is an operator's group, rack and hostname for one bookie
// address (Pulsar's racks-info), under
// /meridian/regions/<region>/bookie-racks/<address>.
type RackInfo = bkproto.RackInfo

// Groups is a ledger's bookie affinity: the bookie groups its ensembles are
// placed in (topology.Groups). An alias, so that the managed ledger names
// it without importing topology.
type Groups = topology.Groups

// Directory is the client's view of a region's live bookies, kept current by
// a watch on the bookies prefix, and of the operator's rack infos, kept by a
// watch on theirs. Its two goroutines (run, runRacks) own the watches; the
// maps are a cache read under mu by placement and by the bkproto adapter,
// which finds a bookie's address here.
type Directory struct {
	store meta.Store
	log   *slog.Logger
	retry time.Duration

	mu      sync.Mutex
	bookies watched[Registration] // by bookie id
	racks   watched[RackInfo]     // by bookie address
	changed chan struct{}         // closed (and replaced) on every change
	ready   chan struct{}         // closed once both first listings are in
	isReady bool
}

// watched is the values under one watched prefix, by the escaped last
// segment of their keys, so that a delete event (which carries no value)
// finds its entry.
type watched[T any] struct {
	prefix string
	decode func(id string, value []byte) (T, error)
	what   string // names a value in a log line
	values map[string]T
	listed bool // the first listing is in
}

func newDirectory(store meta.Store, region string, retry time.Duration, log *slog.Logger) *Directory {
	return &Directory{
		store: store,
		log:   log,
		retry: retry,
		bookies: watched[Registration]{prefix: BookiesPrefix(region), what: "bookie registration",
			values: make(map[string]Registration),
			decode: func(id string, value []byte) (Registration, error) {
				r, err := bkproto.ParseRegistration(value)
				r.ID = id
				return r, err
			}},
		racks: watched[RackInfo]{prefix: bkproto.RackInfoPrefix(region), what: "bookie rack info",
			values: make(map[string]RackInfo),
			decode: func(_ string, value []byte) (RackInfo, error) { return bkproto.ParseRackInfo(value) }},
		changed: make(chan struct{}),
		ready:   make(chan struct{}),
	}
}

// Snapshot returns the registered bookies in placement's terms. A bookie
// whose address an operator gave a rack info is in that group, and on that
// rack when it names one (over the rack the bookie registered with); any
// other is in topology.DefaultGroup.
func (d *Directory) Snapshot() []topology.Bookie {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]topology.Bookie, 0, len(d.bookies.values))
	for _, r := range d.bookies.values {
		b := topology.Bookie{ID: r.ID, Rack: r.Rack, Group: topology.DefaultGroup, ReadOnly: r.ReadOnly}
		if info, ok := d.racks.values[r.Address]; ok {
			b.Group = info.Group
			if info.Rack != "" {
				b.Rack = info.Rack
			}
		}
		out = append(out, b)
	}
	return out
}

// Spares returns the bookies an ensemble change of a ledger in groups may
// choose its one replacement from, besides those in exclude: Snapshot
// narrowed to the groups (topology.Groups.Narrow).
func (d *Directory) Spares(groups Groups, exclude []string) []topology.Bookie {
	return groups.Narrow(d.Snapshot(), 1, exclude)
}

// Lookup returns a registered bookie's record.
func (d *Directory) Lookup(id string) (Registration, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.bookies.values[id]
	return r, ok
}

// Changed returns a channel closed at the next change of the bookie set.
func (d *Directory) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

// waitReady blocks until the first listings are in.
func (d *Directory) waitReady(ctx context.Context) error {
	select {
	case <-d.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run keeps the bookie set up to date (meta.ListWatch) until ctx is done.
func (d *Directory) run(ctx context.Context) { watch(ctx, d, &d.bookies) }

// runRacks keeps the rack infos up to date until ctx is done.
func (d *Directory) runRacks(ctx context.Context) { watch(ctx, d, &d.racks) }

func watch[T any](ctx context.Context, d *Directory, w *watched[T]) {
	meta.ListWatch(ctx, d.store, w.prefix, d.retry, d.log,
		func(kvs []meta.KV) {
			d.mu.Lock()
			defer d.mu.Unlock()
			w.values = make(map[string]T, len(kvs))
			for _, kv := range kvs {
				w.put(kv, d.log)
			}
			w.listed = true
			d.notifyLocked()
		},
		func(evs []meta.Event) {
			d.mu.Lock()
			defer d.mu.Unlock()
			for _, ev := range evs {
				switch ev.Type {
				case meta.EventPut:
					w.put(ev.KV, d.log)
				case meta.EventDelete:
					delete(w.values, w.idOf(ev.KV.Key))
				}
			}
			d.notifyLocked()
		})
}

// put decodes kv into values; a value that does not decode is left out.
func (w *watched[T]) put(kv meta.KV, log *slog.Logger) {
	id := w.idOf(kv.Key)
	v, err := w.decode(id, kv.Value)
	if err != nil {
		log.Warn("ignoring bad "+w.what, "key", kv.Key, "err", err)
		return
	}
	w.values[id] = v
}

// idOf is the id a key names: its escaped last segment.
func (w *watched[T]) idOf(key string) string {
	seg := strings.TrimPrefix(key, w.prefix)
	if id, err := url.PathUnescape(seg); err == nil {
		return id
	}
	return seg
}

func (d *Directory) notifyLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
	if !d.isReady && d.bookies.listed && d.racks.listed {
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
