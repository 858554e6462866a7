package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// BKProto resolves bookie ids to bkproto connections: it finds a bookie's
// address in its registration and keeps one pipelined connection per bookie,
// dialling again when the connection has died (a bookie restart, a reset).
// It is safe for concurrent use; Close closes every connection.
type BKProto struct {
	store  meta.Store
	region string
	cfg    bkproto.ConnConfig

	mu     sync.Mutex
	slots  map[string]*connSlot
	closed bool
}

// connSlot serialises dialling one bookie, so that a burst of calls to a
// bookie that just restarted dials it once.
type connSlot struct {
	mu   sync.Mutex
	conn *bkproto.Conn
	addr string
}

// NewBKProto returns a resolver for region's bookies, dialling with cfg
// (whose Dialer tests replace to inject faults).
func NewBKProto(store meta.Store, region string, cfg bkproto.ConnConfig) (*BKProto, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return &BKProto{store: store, region: region, cfg: cfg, slots: make(map[string]*connSlot)}, nil
}

// Bookie implements Bookies.
func (p *BKProto) Bookie(ctx context.Context, id string) (Bookie, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: resolver closed", ErrBookieUnavailable)
	}
	s := p.slots[id]
	if s == nil {
		s = &connSlot{}
		p.slots[id] = s
	}
	p.mu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn.Err() == nil {
		return bkBookie{s.conn}, nil
	}
	kv, err := p.store.Get(ctx, bkproto.BookieKey(p.region, id))
	if err != nil {
		return nil, fmt.Errorf("%w: bookie %s not registered: %v", ErrBookieUnavailable, id, err)
	}
	reg, err := bkproto.ParseRegistration(kv.Value)
	if err != nil {
		return nil, fmt.Errorf("%w: bookie %s: %v", ErrBookieUnavailable, id, err)
	}
	conn, err := bkproto.DialConfig(ctx, reg.Address, p.cfg)
	if err != nil {
		return nil, mapErr(err) // ErrUnauthorized when the bookie refused the credentials
	}
	if s.conn != nil {
		s.conn.Close()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		conn.Close()
		return nil, fmt.Errorf("%w: resolver closed", ErrBookieUnavailable)
	}
	s.conn, s.addr = conn, reg.Address
	p.mu.Unlock()
	return bkBookie{conn}, nil
}

// Close closes every connection and waits for their goroutines.
func (p *BKProto) Close() error {
	p.mu.Lock()
	p.closed = true
	slots := p.slots
	p.slots = nil
	p.mu.Unlock()
	for _, s := range slots {
		s.mu.Lock()
		if s.conn != nil {
			s.conn.Close()
		}
		s.mu.Unlock()
	}
	return nil
}

// bkBookie adapts one connection to Bookie.
type bkBookie struct{ c *bkproto.Conn }

// bkErrors maps bkproto's sentinels onto the client's. Anything else
// (ErrInternal, ErrConnClosed, transport errors, ctx) says nothing about
// the bookie's contents: ErrBookieUnavailable.
var bkErrors = []struct{ from, to error }{
	{bkproto.ErrFenced, ErrBookieFenced},
	{bkproto.ErrNoSuchEntry, ErrNoSuchEntry},
	{bkproto.ErrNoSuchLedger, ErrNoSuchLedger},
	{bkproto.ErrReadOnly, ErrBookieReadOnly},
	{bkproto.ErrChecksumMismatch, ErrChecksum},
	{bkproto.ErrUnauthorized, ErrUnauthorized},
}

func mapErr(err error) error {
	if err == nil {
		return nil
	}
	for _, m := range bkErrors {
		if errors.Is(err, m.from) {
			return fmt.Errorf("%w: %w", m.to, err)
		}
	}
	return fmt.Errorf("%w: %w", ErrBookieUnavailable, err)
}

func (b bkBookie) AddEntry(ctx context.Context, req AddRequest) error {
	return mapErr(b.c.AddEntry(ctx, bkproto.AddRequest{
		LedgerID: req.LedgerID, EntryID: req.EntryID, LastAddConfirmed: req.LAC,
		Recovery: req.Recovery, MasterKey: req.MasterKey, Payload: req.Payload,
	}))
}

func (b bkBookie) ReadEntry(ctx context.Context, ledgerID, entryID int64) (BookieEntry, error) {
	return b.read(ctx, bkproto.ReadRequest{LedgerID: ledgerID, EntryID: entryID})
}

func (b bkBookie) FencingRead(ctx context.Context, ledgerID, entryID int64, masterKey []byte) (BookieEntry, error) {
	return b.read(ctx, bkproto.ReadRequest{LedgerID: ledgerID, EntryID: entryID, Fence: true, MasterKey: masterKey})
}

func (b bkBookie) read(ctx context.Context, req bkproto.ReadRequest) (BookieEntry, error) {
	e, err := b.c.ReadEntry(ctx, req)
	if err != nil {
		return BookieEntry{}, mapErr(err)
	}
	return BookieEntry{EntryID: e.EntryID, LAC: e.LastAddConfirmed, Payload: e.Payload}, nil
}

func (b bkBookie) ReadLAC(ctx context.Context, ledgerID int64) (int64, error) {
	lac, err := b.c.ReadLAC(ctx, bkproto.ReadLACRequest{LedgerID: ledgerID})
	return lac, mapErr(err)
}

func (b bkBookie) WaitEntry(ctx context.Context, ledgerID, entryID int64, wait time.Duration) (BookieEntry, error) {
	e, err := b.c.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: ledgerID, EntryID: entryID, Wait: min(wait, bkproto.MaxLongPollTimeout)})
	return BookieEntry{EntryID: e.EntryID, LAC: e.LastAddConfirmed, Payload: e.Payload}, mapErr(err)
}

func (b bkBookie) Fence(ctx context.Context, ledgerID int64, masterKey []byte) (int64, error) {
	lac, err := b.c.Fence(ctx, bkproto.FenceRequest{LedgerID: ledgerID, MasterKey: masterKey})
	return lac, mapErr(err)
}

func (b bkBookie) WriteLAC(ctx context.Context, ledgerID, lac int64, masterKey []byte) error {
	return mapErr(b.c.WriteLAC(ctx, bkproto.WriteLACRequest{LedgerID: ledgerID, LastAddConfirmed: lac, MasterKey: masterKey}))
}
