package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/topology"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is the ledger client's configuration.
type Config struct {
	// Region whose bookies and ledgers the client uses. Required.
	Region string
	// AddTimeout bounds one add to one bookie. A bookie that does not ack in
	// time is treated as failed and replaced. Too short turns a slow fsync
	// into an ensemble change; too long stalls confirmation behind a dead
	// bookie. 1ms..10m.
	AddTimeout time.Duration
	// ReadTimeout bounds one read, fence or LAC request to one bookie. A
	// timeout is never taken as "entry absent"; the request is retried or
	// another replica is asked. 1ms..10m.
	ReadTimeout time.Duration
	// MetaTimeout bounds one metadata store operation. 1ms..10m.
	MetaTimeout time.Duration
	// MaxInFlightEntries bounds the adds a writer holds unconfirmed. A full
	// writer blocks Add (backpressure) until entries confirm or ctx ends.
	// 1..1<<20; memory is at most this many payloads.
	MaxInFlightEntries int
	// MaxInFlightBytes bounds the payload bytes a writer holds
	// unconfirmed: Add blocks once they reach it, so the last entry taken
	// may overshoot it by its own size. A single entry larger than this is
	// refused. 1KiB..4GiB.
	MaxInFlightBytes int64
	// ExplicitLACInterval decides when a writer sends its LAC explicitly,
	// so that tailing readers see entries that no later add carries. Adds
	// coming closer together than this are a load: a newly confirmed LAC
	// waits until this long after the last send for the next add to carry
	// it, and only then goes out explicitly. An add that came later than
	// this after the one before is taken as the writer going idle: its LAC
	// goes out as soon as it is confirmed. So below about one add per
	// interval each add costs an explicit LAC, one small RPC per ensemble
	// member (a journal write on a real bookie), and above it none do but
	// at the end of a burst. Longer means fewer explicit LACs at moderate
	// rates, but a reader can lag the last entry of a burst by this much.
	// 1ms..1m.
	ExplicitLACInterval time.Duration
	// RetryInterval is the pause before a writer retries bookies it saw
	// fail (when no spare could replace them) and re-checks whether its
	// ledger was fenced, before recovery retries a bookie that did not
	// answer, and before a tailing reader polls the LAC again after every
	// bookie failed its long-poll. 1ms..1m.
	RetryInterval time.Duration
	// LACPollWait is how long a tailing reader's LAC long-poll is held by a
	// bookie. 1ms..10m.
	LACPollWait time.Duration
	// SpeculativeLACWait is how long a tailing reader's long-poll waits on
	// one bookie before it asks the rest of the last ensemble too, as
	// BookKeeper's firstSpeculativeReadLACTimeout does. While entries come,
	// one bookie answers each poll with the next entry (one round trip per
	// entry, not one per ensemble member plus a read); a bookie that is
	// slow or frozen costs a reader this much once, after which it asks
	// whichever answered first. 1ms..10m.
	SpeculativeLACWait time.Duration
	// SpeculativeReadTimeout is how long an entry read waits on one member
	// of the entry's write quorum before it asks the next one too, as
	// BookKeeper's speculativeReadTimeout does; the first good answer wins.
	// A member that was overtaken this way, or failed a read, is asked last
	// for the next SlowBookieMemory, so a frozen or cut-off bookie costs a
	// reader this wait about once, not a ReadTimeout per entry.
	// 1ms..10m.
	SpeculativeReadTimeout time.Duration
	// SlowBookieMemory is how long a bookie that failed or was overtaken on
	// a read goes to the back of the read order (BookKeeper's
	// bookieFailureHistoryExpirationMSec). 1ms..1h.
	SlowBookieMemory time.Duration
	// RegionNumber is the region's number, which every ledger id it creates
	// carries in its high bits so that ids are unique across regions (see
	// LedgerID). It is assigned once per region in the global store
	// (global.Store.RegionNumber), and must never change: a smaller number
	// would give new ledgers ids below the region's old ones. Required;
	// 1..MaxRegionNumber.
	RegionNumber int
	// Registerer receives the client's metrics; nil registers nowhere. One
	// client per registry.
	Registerer prometheus.Registerer
	// Clock drives every timer and deadline the client's behaviour
	// depends on: retries, speculative reads and LAC polls, explicit LACs,
	// the slow-bookie memory and a new ledger's ctime. RPC deadlines
	// (AddTimeout, ReadTimeout, MetaTimeout) bound real network I/O and
	// stay on the wall clock, as does the add latency metric. The region's
	// assembly (cluster/node) sets its one clock here; tests set a fake one.
	// Required; DefaultConfig sets the wall clock.
	Clock clockwork.Clock
}

// DefaultConfig returns the configuration for region, whose number (in
// the global store) is regionNumber, with production defaults.
func DefaultConfig(region string, regionNumber int) Config {
	return Config{
		Region:              region,
		RegionNumber:        regionNumber,
		AddTimeout:          10 * time.Second,
		ReadTimeout:         10 * time.Second,
		MetaTimeout:         10 * time.Second,
		MaxInFlightEntries:  10000,
		MaxInFlightBytes:    64 << 20,
		ExplicitLACInterval: time.Millisecond,
		RetryInterval:       time.Second,
		LACPollWait:         10 * time.Second,
		SpeculativeLACWait:  20 * time.Millisecond,
		// BookKeeper's defaults.
		SpeculativeReadTimeout: 2 * time.Second,
		SlowBookieMemory:       time.Minute,
		Clock:                  clockwork.NewRealClock(),
	}
}

// Validate checks every field against its documented bounds.
func (c Config) Validate() error {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(f, args...))
	}
	if c.Region == "" {
		return bad("Region is required")
	}
	if c.Clock == nil {
		return bad("Clock is required (DefaultConfig sets the wall clock)")
	}
	if c.RegionNumber < 1 || c.RegionNumber > MaxRegionNumber {
		return bad("RegionNumber %d outside [1, %d] (it is assigned in the global store)", c.RegionNumber, MaxRegionNumber)
	}
	durs := []struct {
		name      string
		v, lo, hi time.Duration
	}{
		{"AddTimeout", c.AddTimeout, time.Millisecond, 10 * time.Minute},
		{"ReadTimeout", c.ReadTimeout, time.Millisecond, 10 * time.Minute},
		{"MetaTimeout", c.MetaTimeout, time.Millisecond, 10 * time.Minute},
		{"ExplicitLACInterval", c.ExplicitLACInterval, time.Millisecond, time.Minute},
		{"RetryInterval", c.RetryInterval, time.Millisecond, time.Minute},
		{"LACPollWait", c.LACPollWait, time.Millisecond, 10 * time.Minute},
		{"SpeculativeLACWait", c.SpeculativeLACWait, time.Millisecond, 10 * time.Minute},
		{"SpeculativeReadTimeout", c.SpeculativeReadTimeout, time.Millisecond, 10 * time.Minute},
		{"SlowBookieMemory", c.SlowBookieMemory, time.Millisecond, time.Hour},
	}
	for _, d := range durs {
		if d.v < d.lo || d.v > d.hi {
			return bad("%s %v outside [%v, %v]", d.name, d.v, d.lo, d.hi)
		}
	}
	if c.MaxInFlightEntries < 1 || c.MaxInFlightEntries > 1<<20 {
		return bad("MaxInFlightEntries %d outside [1, %d]", c.MaxInFlightEntries, 1<<20)
	}
	if c.MaxInFlightBytes < 1<<10 || c.MaxInFlightBytes > 4<<30 {
		return bad("MaxInFlightBytes %d outside [1KiB, 4GiB]", c.MaxInFlightBytes)
	}
	return nil
}

// Client creates, writes, reads and recovers a region's ledgers. It owns one
// goroutine, the bookie directory's watch, stopped by Close. Writers and
// readers it returns must be closed before it.
type Client struct {
	cfg     Config
	store   meta.Store
	bookies Bookies
	dir     *Directory
	log     *slog.Logger

	rndMu sync.Mutex
	rnd   *rand.Rand

	cancel context.CancelFunc
	wg     sync.WaitGroup

	statsMu sync.Mutex
	stats   ClientStats
	m       *metrics

	slow  slowBookies   // read order: who failed or lagged recently goes last
	tails sharedReaders // the Readers OpenTail shares
}

// ClientStats counts events across all of a client's ledgers.
type ClientStats struct {
	// ChecksumErrors counts reads that failed their checksum and were
	// retried on another replica.
	ChecksumErrors int64
	// ReadRetries counts reads that moved on to another replica, after an
	// error or a SpeculativeReadTimeout.
	ReadRetries int64
}

// New starts a client. logger and rnd must be non-nil; rnd drives placement
// and replica choice and is used under the client's lock.
func New(cfg Config, store meta.Store, bookies Bookies, logger *slog.Logger, rnd *rand.Rand) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil || bookies == nil || logger == nil || rnd == nil {
		return nil, fmt.Errorf("%w: store, bookies, logger and rnd are required", ErrInvalidConfig)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		m:       m,
		cfg:     cfg,
		store:   store,
		bookies: bookies,
		log:     logger,
		rnd:     rnd,
		cancel:  cancel,
		slow:    slowBookies{memory: cfg.SlowBookieMemory, clock: cfg.Clock},
	}
	c.dir = newDirectory(store, cfg.Region, cfg.RetryInterval, c.log)
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		c.dir.run(ctx)
	}()
	go func() {
		defer c.wg.Done()
		c.dir.runRacks(ctx)
	}()
	return c, nil
}

// Directory returns the client's live view of the region's bookies.
func (c *Client) Directory() *Directory { return c.dir }

// Stats returns a snapshot of the client's counters.
func (c *Client) Stats() ClientStats {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	return c.stats
}

func (c *Client) count(f func(*ClientStats)) {
	c.statsMu.Lock()
	f(&c.stats)
	c.statsMu.Unlock()
}

// Close stops the directory watch and waits for it.
func (c *Client) Close() error {
	c.cancel()
	c.wg.Wait()
	return nil
}

func (c *Client) metaCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.MetaTimeout)
}

func (c *Client) place(groups Groups, size int) ([]string, error) {
	c.rndMu.Lock()
	defer c.rndMu.Unlock()
	ens, err := groups.Place(c.dir.Snapshot(), size, c.rnd)
	switch {
	case errors.Is(err, topology.ErrNotEnoughBookies) && !groups.IsZero():
		return nil, fmt.Errorf("%w in %s: %v", ErrNotEnoughBookies, groups, err)
	case errors.Is(err, topology.ErrNotEnoughBookies):
		return nil, fmt.Errorf("%w: %v", ErrNotEnoughBookies, err)
	}
	return ens, err
}

// replace chooses a spare for ensemble[slot] in the ledger's groups.
func (c *Client) replace(groups Groups, ensemble []string, slot int, exclude []string) (string, bool) {
	c.rndMu.Lock()
	defer c.rndMu.Unlock()
	candidates := c.dir.Spares(groups, slices.Concat(exclude, ensemble))
	id, err := topology.ReplaceBookie(ensemble, slot, candidates, exclude, c.rnd)
	return id, err == nil
}

// Create makes a new ledger with ensemble size e, write quorum qw and ack
// quorum qa (e >= qw >= qa >= 1) on bookies of groups (every bookie when
// zero) chosen by rack-aware placement, records it OPEN in the store, and
// returns its writer. The groups are kept in the metadata, so that every
// ensemble change stays in them. custom is stored with the metadata as is.
func (c *Client) Create(ctx context.Context, e, qw, qa int, groups Groups, custom map[string]string) (*Writer, error) {
	q := Quorum{Ensemble: e, Write: qw, Ack: qa}
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if err := c.dir.waitReady(ctx); err != nil {
		return nil, err
	}
	ens, err := c.place(groups, e)
	if err != nil {
		return nil, err
	}
	mctx, cancel := c.metaCtx(ctx)
	defer cancel()
	counter, err := meta.NextID(mctx, c.store, ledgerIDCounterKey(c.cfg.Region))
	if err != nil {
		return nil, fmt.Errorf("ledger id: %w", err)
	}
	id, err := LedgerID(c.cfg.RegionNumber, counter)
	if err != nil {
		return nil, err
	}
	md := &Metadata{
		V: metadataVersion, ID: id,
		EnsembleSize: e, WriteQuorum: qw, AckQuorum: qa,
		State: StateOpen, LastEntry: -1, Length: 0,
		Fragments:    []Fragment{{FirstEntry: 0, Ensemble: ens}},
		CTime:        c.cfg.Clock.Now().UnixMilli(),
		BookieGroups: groups,
		Custom:       custom,
		Password:     newPassword(),
	}
	b, err := encodeMetadata(md)
	if err != nil {
		return nil, err
	}
	rev, err := c.store.Create(mctx, LedgerKey(c.cfg.Region, id), b, meta.NoLease)
	if err != nil {
		return nil, fmt.Errorf("create ledger %d: %w", id, err)
	}
	c.log.Debug("ledger created", "ledger", id, "ensemble", ens)
	return newWriter(c, versioned{md: md, modRev: rev}), nil
}

// Metadata reads a ledger's current metadata.
func (c *Client) Metadata(ctx context.Context, id int64) (*Metadata, error) {
	mctx, cancel := c.metaCtx(ctx)
	defer cancel()
	v, err := readMetadata(mctx, c.store, c.cfg.Region, id)
	if err != nil {
		return nil, err
	}
	return v.md, nil
}

// Delete removes a closed ledger's metadata; bookies reclaim its space
// lazily. Deleting an open ledger is refused: close or recover it first.
func (c *Client) Delete(ctx context.Context, id int64) error {
	mctx, cancel := c.metaCtx(ctx)
	defer cancel()
	v, err := readMetadata(mctx, c.store, c.cfg.Region, id)
	if err != nil {
		return err
	}
	if v.md.State != StateClosed {
		return fmt.Errorf("delete ledger %d: state %s: %w", id, v.md.State, ErrLedgerOpen)
	}
	if err := c.store.Delete(mctx, LedgerKey(c.cfg.Region, id), v.modRev); err != nil {
		return fmt.Errorf("delete ledger %d: %w", id, err)
	}
	return nil
}
