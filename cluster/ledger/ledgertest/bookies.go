// Package ledgertest provides an in-memory set of bookies for testing the
// ledger client and the packages above it, with the faults that matter to
// BookKeeper semantics: partitions between particular clients and bookies
// (calls that hang until their deadline, as a dropped connection does),
// crashed and restarted bookies (their fsynced state survives), injected
// errors, read-only bookies, corrupt replicas, and per-call latency, so that
// adds are still in flight while a recoverer fences.
//
// A request travels for a delay, is applied at the bookie if the bookie is
// reachable when it arrives (even if the caller has given up meanwhile, as
// on a real network), and its answer travels back for another delay.
package ledgertest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// Op names a bookie operation, for delays and injected errors.
type Op int

// The operations of ledger.Bookie.
const (
	OpAdd Op = iota
	OpRead
	OpReadLAC
	OpWaitEntry
	OpFence
	OpWriteLAC
)

// DelayFunc returns the one-way latency of one message between client and
// bookie: the request (back false) or its answer (back true) of op on entry
// (-1 for operations on a whole ledger). It is called under the cluster's
// lock and must not call back into the Cluster. A function of its arguments
// alone (plus a per-key counter) keeps a seeded test reproducible whatever
// order goroutines run in.
type DelayFunc func(client, bookie string, op Op, entry int64, back bool) time.Duration

// Cluster is a set of in-memory bookies shared by any number of named
// clients. All of its state sits under mu; it starts no goroutine of its own.
type Cluster struct {
	mu      sync.RWMutex
	bookies map[string]*bookie
	cut     map[link]bool // unreachable client -> bookie links
	refused map[link]bool // client -> bookie links whose connections are refused
	delay   DelayFunc
}

type link struct{ client, bookie string }

type bookie struct {
	down     bool
	readOnly bool
	ledgers  map[int64]*ledgerState
	inject   map[Op][]error
	corrupt  map[[2]int64]bool // (ledger, entry) whose reads fail the checksum
}

type ledgerState struct {
	entries map[int64][]byte
	lac     int64
	fenced  bool
	// key is the master key bound by the first add or fence that carried
	// one, as a real bookie binds it.
	key []byte
	// lacChanged is closed and replaced whenever lac rises, waking
	// long-polls.
	lacChanged chan struct{}
}

// NewCluster returns a cluster with bookies of the given ids, all up.
func NewCluster(ids ...string) *Cluster {
	c := &Cluster{bookies: make(map[string]*bookie), cut: make(map[link]bool), refused: make(map[link]bool)}
	for _, id := range ids {
		c.AddBookie(id)
	}
	return c
}

// AddBookie adds an empty, running bookie. It does not register it in the
// metadata store; see Register.
func (c *Cluster) AddBookie(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.bookies[id]; !ok {
		c.bookies[id] = &bookie{ledgers: make(map[int64]*ledgerState), inject: make(map[Op][]error), corrupt: make(map[[2]int64]bool)}
	}
}

// SetDelay installs a latency model (nil: no latency).
func (c *Cluster) SetDelay(f DelayFunc) {
	c.mu.Lock()
	c.delay = f
	c.mu.Unlock()
}

// Partition makes bookie unreachable from client: calls hang until their
// context ends, as over a dropped network path.
func (c *Cluster) Partition(client, bookie string) {
	c.mu.Lock()
	c.cut[link{client, bookie}] = true
	c.mu.Unlock()
}

// Refuse makes bookie refuse client's calls at once with
// ErrBookieUnavailable, as a reset connection does.
func (c *Cluster) Refuse(client, bookie string) {
	c.mu.Lock()
	c.refused[link{client, bookie}] = true
	c.mu.Unlock()
}

// Heal undoes Partition and Refuse.
func (c *Cluster) Heal(client, bookie string) {
	c.mu.Lock()
	delete(c.cut, link{client, bookie})
	delete(c.refused, link{client, bookie})
	c.mu.Unlock()
}

// HealAll undoes every partition and refusal.
func (c *Cluster) HealAll() {
	c.mu.Lock()
	clear(c.cut)
	clear(c.refused)
	c.mu.Unlock()
}

// SetDown crashes (true) or restarts (false) a bookie. A down bookie refuses
// connections at once with ErrBookieUnavailable; requests in flight to it
// are lost. Everything it had acknowledged (entries, fences, LACs) survives
// the restart, since a bookie acks only after fsync.
func (c *Cluster) SetDown(id string, down bool) {
	c.mu.Lock()
	c.bookies[id].down = down
	c.mu.Unlock()
}

// SetReadOnly makes a bookie refuse adds with ErrBookieReadOnly.
func (c *Cluster) SetReadOnly(id string, ro bool) {
	c.mu.Lock()
	c.bookies[id].readOnly = ro
	c.mu.Unlock()
}

// InjectError makes the bookie's next calls of op fail with errs, one each.
func (c *Cluster) InjectError(id string, op Op, errs ...error) {
	c.mu.Lock()
	b := c.bookies[id]
	b.inject[op] = append(b.inject[op], errs...)
	c.mu.Unlock()
}

// Corrupt makes reads of one entry from one bookie fail their checksum.
func (c *Cluster) Corrupt(id string, ledgerID, entryID int64) {
	c.mu.Lock()
	c.bookies[id].corrupt[[2]int64{ledgerID, entryID}] = true
	c.mu.Unlock()
}

// Has reports whether a bookie stores an entry.
func (c *Cluster) Has(id string, ledgerID, entryID int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.bookies[id].ledgers[ledgerID]
	if l == nil {
		return false
	}
	_, ok := l.entries[entryID]
	return ok
}

// Fenced reports whether a bookie has fenced a ledger.
func (c *Cluster) Fenced(id string, ledgerID int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.bookies[id].ledgers[ledgerID]
	return l != nil && l.fenced
}

// LAC returns the LAC a bookie holds for a ledger (-1: none).
func (c *Cluster) LAC(id string, ledgerID int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.bookies[id].ledgers[ledgerID]
	if l == nil {
		return -1
	}
	return l.lac
}

// Client returns the view of the cluster that the named client has.
func (c *Cluster) Client(name string) ledger.Bookies { return &clientView{c: c, name: name} }

type clientView struct {
	c    *Cluster
	name string
}

func (v *clientView) Bookie(ctx context.Context, id string) (ledger.Bookie, error) {
	v.c.mu.RLock()
	_, ok := v.c.bookies[id]
	v.c.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: unknown bookie %s", ledger.ErrBookieUnavailable, id)
	}
	return &bookieView{c: v.c, client: v.name, id: id}, nil
}

type bookieView struct {
	c      *Cluster
	client string
	id     string
}

// call carries one request: out to the bookie, apply, back to the client.
func (v *bookieView) call(ctx context.Context, op Op, entry int64, apply func(b *bookie) error) error {
	c := v.c
	c.mu.Lock()
	if c.delay != nil {
		if d := c.delay(v.client, v.id, op, entry, false); d > 0 {
			// The request is on the wire: it arrives even if ctx ends.
			c.mu.Unlock()
			time.Sleep(d)
			c.mu.Lock()
		}
	}
	b := c.bookies[v.id]
	if c.cut[link{v.client, v.id}] {
		c.mu.Unlock()
		<-ctx.Done()
		return fmt.Errorf("%w: %s: %v", ledger.ErrBookieUnavailable, v.id, ctx.Err())
	}
	if b.down || c.refused[link{v.client, v.id}] {
		c.mu.Unlock()
		return fmt.Errorf("%w: %s refused the connection", ledger.ErrBookieUnavailable, v.id)
	}
	var err error
	if errs := b.inject[op]; len(errs) > 0 {
		err = errs[0]
		b.inject[op] = errs[1:]
	} else {
		err = apply(b)
	}
	var back time.Duration
	if c.delay != nil {
		back = c.delay(v.client, v.id, op, entry, true)
	}
	c.mu.Unlock()
	if back > 0 {
		t := time.NewTimer(back)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: %v", ledger.ErrBookieUnavailable, v.id, ctx.Err())
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %s: %v", ledger.ErrBookieUnavailable, v.id, ctx.Err())
	}
	return err
}

func (b *bookie) ledger(id int64) *ledgerState {
	l := b.ledgers[id]
	if l == nil {
		l = &ledgerState{entries: make(map[int64][]byte), lac: -1, lacChanged: make(chan struct{})}
		b.ledgers[id] = l
	}
	return l
}

func (l *ledgerState) raiseLAC(lac int64) {
	if lac > l.lac {
		l.lac = lac
		close(l.lacChanged)
		l.lacChanged = make(chan struct{})
	}
}

// admit applies a real bookie's master key rule: a ledger's first key
// stays, and a request without it is refused once there is one.
func (l *ledgerState) admit(key []byte) error {
	if len(l.key) == 0 {
		l.key = slices.Clone(key)
		return nil
	}
	if !bytes.Equal(l.key, key) {
		return fmt.Errorf("%w: master key does not match the ledger's", ledger.ErrUnauthorized)
	}
	return nil
}

func (v *bookieView) AddEntry(ctx context.Context, req ledger.AddRequest) error {
	return v.call(ctx, OpAdd, req.EntryID, func(b *bookie) error {
		if b.readOnly {
			return ledger.ErrBookieReadOnly
		}
		l := b.ledger(req.LedgerID)
		if len(l.key) > 0 && !bytes.Equal(l.key, req.MasterKey) {
			return fmt.Errorf("%w: master key does not match the ledger's", ledger.ErrUnauthorized)
		}
		if l.fenced && !req.Recovery {
			return ledger.ErrBookieFenced
		}
		l.admit(req.MasterKey)
		if _, ok := l.entries[req.EntryID]; !ok {
			l.entries[req.EntryID] = slices.Clone(req.Payload)
		}
		l.raiseLAC(req.LAC)
		return nil
	})
}

func (v *bookieView) ReadEntry(ctx context.Context, ledgerID, entryID int64) (ledger.BookieEntry, error) {
	return v.read(ctx, ledgerID, entryID, false, nil)
}

func (v *bookieView) FencingRead(ctx context.Context, ledgerID, entryID int64, masterKey []byte) (ledger.BookieEntry, error) {
	return v.read(ctx, ledgerID, entryID, true, masterKey)
}

func (v *bookieView) read(ctx context.Context, ledgerID, entryID int64, fence bool, key []byte) (ledger.BookieEntry, error) {
	var out ledger.BookieEntry
	err := v.call(ctx, OpRead, entryID, func(b *bookie) error {
		if fence {
			l := b.ledger(ledgerID)
			if err := l.admit(key); err != nil {
				return err
			}
			l.fenced = true
		}
		var err error
		out, err = b.read(ledgerID, entryID)
		return err
	})
	return out, err
}

// read answers a read of one entry, with the bookie's LAC even when it
// fails.
func (b *bookie) read(ledgerID, entryID int64) (ledger.BookieEntry, error) {
	l := b.ledgers[ledgerID]
	if l == nil {
		return ledger.BookieEntry{EntryID: entryID, LAC: -1}, ledger.ErrNoSuchLedger
	}
	out := ledger.BookieEntry{EntryID: entryID, LAC: l.lac}
	data, ok := l.entries[entryID]
	if !ok {
		return out, ledger.ErrNoSuchEntry
	}
	if b.corrupt[[2]int64{ledgerID, entryID}] {
		return out, ledger.ErrChecksum
	}
	out.Payload = slices.Clone(data)
	return out, nil
}

func (v *bookieView) ReadLAC(ctx context.Context, ledgerID int64) (int64, error) {
	var lac int64
	err := v.call(ctx, OpReadLAC, -1, func(b *bookie) error {
		lac = b.ledger(ledgerID).lac
		return nil
	})
	return lac, err
}

// WaitEntry holds the call while the bookie's LAC is below entryID, up to
// wait, and then reads the entry. The request's way out is the call's
// delay model; the answer comes back at once.
func (v *bookieView) WaitEntry(ctx context.Context, ledgerID, entryID int64, wait time.Duration) (ledger.BookieEntry, error) {
	var ready bool
	var changed chan struct{}
	look := func(b *bookie) error {
		l := b.ledger(ledgerID)
		ready, changed = l.lac >= entryID, l.lacChanged
		return nil
	}
	if err := v.call(ctx, OpWaitEntry, entryID, look); err != nil {
		return ledger.BookieEntry{EntryID: entryID, LAC: -1}, err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for !ready && wait > 0 {
		select {
		case <-changed:
		case <-t.C:
			wait = 0
		case <-ctx.Done():
			return ledger.BookieEntry{EntryID: entryID, LAC: -1}, fmt.Errorf("%w: %s: %v", ledger.ErrBookieUnavailable, v.id, ctx.Err())
		}
		v.c.mu.Lock()
		look(v.c.bookies[v.id])
		v.c.mu.Unlock()
	}
	v.c.mu.Lock()
	defer v.c.mu.Unlock()
	b := v.c.bookies[v.id]
	if b.down || v.c.refused[link{v.client, v.id}] {
		return ledger.BookieEntry{EntryID: entryID, LAC: -1}, fmt.Errorf("%w: %s refused the connection", ledger.ErrBookieUnavailable, v.id)
	}
	return b.read(ledgerID, entryID)
}

func (v *bookieView) Fence(ctx context.Context, ledgerID int64, masterKey []byte) (int64, error) {
	var lac int64
	err := v.call(ctx, OpFence, -1, func(b *bookie) error {
		l := b.ledger(ledgerID)
		if err := l.admit(masterKey); err != nil {
			return err
		}
		l.fenced = true
		lac = l.lac
		return nil
	})
	return lac, err
}

func (v *bookieView) WriteLAC(ctx context.Context, ledgerID, lac int64, masterKey []byte) error {
	return v.call(ctx, OpWriteLAC, -1, func(b *bookie) error {
		l := b.ledger(ledgerID)
		if err := l.admit(masterKey); err != nil {
			return err
		}
		if l.fenced {
			return ledger.ErrBookieFenced
		}
		l.raiseLAC(lac)
		return nil
	})
}

// Register writes a bookie's registration into the store, as a bookie does
// at start-up (without a lease: tests unregister explicitly).
func Register(ctx context.Context, store meta.Store, region, id, rack string, readOnly bool) error {
	b := bkproto.Registration{ID: id, Address: id + ":0", Rack: rack, ReadOnly: readOnly}.Marshal()
	_, err := store.Create(ctx, bkproto.BookieKey(region, id), b, meta.NoLease)
	return err
}

// Unregister removes a bookie's registration, as its lease expiry would.
func Unregister(ctx context.Context, store meta.Store, region, id string) error {
	kv, err := store.Get(ctx, bkproto.BookieKey(region, id))
	if err != nil {
		return err
	}
	return store.Delete(ctx, kv.Key, kv.ModRevision)
}
