package ledger

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/topology"
)

// State is a ledger's lifecycle state. It only moves forward:
// OPEN -> IN_RECOVERY -> CLOSED, or OPEN -> CLOSED.
type State string

const (
	// StateOpen: the creating writer may add entries and change ensembles.
	StateOpen State = "OPEN"
	// StateInRecovery: a recoverer has taken the ledger; the writer's next
	// metadata CAS fails. Only recoverers change it now.
	StateInRecovery State = "IN_RECOVERY"
	// StateClosed: LastEntry is final; the ledger is read-only forever.
	StateClosed State = "CLOSED"
)

// metadataVersion is the "v" of the JSON value this code writes and reads.
const metadataVersion = 1

// Fragment is a run of entries, from FirstEntry up to the next fragment's
// FirstEntry (or the end of the ledger), stored on one ensemble. An ensemble
// change appends a fragment; earlier fragments never change.
type Fragment struct {
	FirstEntry int64    `json:"firstEntry"`
	Ensemble   []string `json:"ensemble"`
}

// Metadata is a ledger's record in the store, at
// /meridian/regions/<region>/ledgers/<id>. Every change is a CAS on the key's
// ModRevision, so the writer, recoverers and closers are serialised by the
// store: whoever loses a CAS has lost the ledger.
type Metadata struct {
	V            int   `json:"v"`
	ID           int64 `json:"id"`
	EnsembleSize int   `json:"E"`
	WriteQuorum  int   `json:"Qw"`
	AckQuorum    int   `json:"Qa"`
	State        State `json:"state"`
	// LastEntry is the id of the last entry once CLOSED (-1: empty). While
	// OPEN or IN_RECOVERY it is -1 and means nothing.
	LastEntry int64 `json:"lastEntry"`
	// Length is the total payload bytes once closed by its writer. A ledger
	// closed by recovery has Length -1 (unknown) unless it is empty: recovery
	// reads only the tail of the ledger.
	Length    int64      `json:"length"`
	Fragments []Fragment `json:"fragments"`
	// CTime is the creation time, in Unix milliseconds.
	CTime int64 `json:"ctime"`
	// BookieGroups are the bookie groups every ensemble of the ledger is
	// placed in, its namespace's bookie affinity when it was created;
	// zero places on every bookie. Set at creation, never changed.
	BookieGroups Groups            `json:"bookieGroups,omitzero"`
	Custom       map[string]string `json:"custom,omitempty"`
	// Password is the ledger's password, random and set at creation, from
	// which every client that may write, fence or repair the ledger
	// derives its master key (MasterKey), as BookKeeper's ledger password
	// (which its metadata also keeps, for auto-recovery). Whoever can read
	// the region's etcd can read it: securing etcd (docs/operations.md)
	// is what keeps it secret. Empty on ledgers created before master
	// keys, which bookies then accept keyless requests for.
	Password []byte `json:"password,omitempty"`
}

// masterKeyDomain is hashed before the password, as BookKeeper's
// "ledger" prefix, so that the key is no other hash of the password.
const masterKeyDomain = "meridian-ledger-master-key\x00"

// MasterKey is the key every add, fence and LAC write to the ledger
// carries: SHA-256 of a fixed prefix and the ledger's password. Bookies
// bind it to the ledger at its first add or fence and refuse requests
// without it (bkproto's package comment). Nil for a ledger without a
// password.
func (m *Metadata) MasterKey() []byte { return masterKey(m.Password) }

func masterKey(password []byte) []byte {
	if len(password) == 0 {
		return nil
	}
	h := sha256.New()
	h.Write([]byte(masterKeyDomain))
	h.Write(password)
	return h.Sum(nil)
}

// passwordSize is the length of a new ledger's random password.
const passwordSize = 32

// newPassword is a new ledger's password, from crypto/rand: a
// password that could be guessed would be a master key that could be.
func newPassword() []byte {
	p := make([]byte, passwordSize)
	rand.Read(p) // never fails (crypto/rand)
	return p
}

// Quorum returns the ledger's E, Qw, Qa.
func (m *Metadata) Quorum() Quorum {
	return Quorum{Ensemble: m.EnsembleSize, Write: m.WriteQuorum, Ack: m.AckQuorum}
}

// EnsembleFor returns the ensemble that stores entry: the ensemble of the
// last fragment starting at or before it.
func (m *Metadata) EnsembleFor(entry int64) []string {
	i := len(m.Fragments) - 1
	for i > 0 && m.Fragments[i].FirstEntry > entry {
		i--
	}
	return m.Fragments[i].Ensemble
}

// LastEnsemble returns the ensemble new entries go to.
func (m *Metadata) LastEnsemble() []string {
	return m.Fragments[len(m.Fragments)-1].Ensemble
}

func (m *Metadata) clone() *Metadata {
	c := *m
	c.Password = slices.Clone(m.Password)
	c.Fragments = make([]Fragment, len(m.Fragments))
	for i, f := range m.Fragments {
		c.Fragments[i] = Fragment{FirstEntry: f.FirstEntry, Ensemble: slices.Clone(f.Ensemble)}
	}
	if m.Custom != nil {
		c.Custom = make(map[string]string, len(m.Custom))
		for k, v := range m.Custom {
			c.Custom[k] = v
		}
	}
	return &c
}

// onlyRepairs reports whether cur differs from base only by the bookies of
// fragments before base's last one: what auto-recovery changes when it
// re-replicates a fragment (cluster/autorecovery). Everything else is the
// same: state, lastEntry, length, quorum, custom data, password, every fragment's
// first entry, and the last fragment's ensemble, which stays its writer's.
// A writer that finds its ledger changed this way adopts the change and
// goes on; any other change is someone else taking the ledger.
func onlyRepairs(base, cur *Metadata) bool {
	if base.ID != cur.ID || base.Quorum() != cur.Quorum() || base.State != cur.State ||
		base.LastEntry != cur.LastEntry || base.Length != cur.Length || base.CTime != cur.CTime ||
		base.BookieGroups != cur.BookieGroups || !maps.Equal(base.Custom, cur.Custom) || !bytes.Equal(base.Password, cur.Password) ||
		len(base.Fragments) != len(cur.Fragments) {
		return false
	}
	last := len(base.Fragments) - 1
	for i, f := range base.Fragments {
		if cur.Fragments[i].FirstEntry != f.FirstEntry || len(cur.Fragments[i].Ensemble) != len(f.Ensemble) {
			return false
		}
	}
	return slices.Equal(base.Fragments[last].Ensemble, cur.Fragments[last].Ensemble)
}

// validate checks the invariants every reader relies on.
func (m *Metadata) validate() error {
	if m.V != metadataVersion {
		return fmt.Errorf("%w: ledger %d: version %d, want %d", ErrBadMetadata, m.ID, m.V, metadataVersion)
	}
	if err := m.Quorum().Validate(); err != nil {
		return fmt.Errorf("%w: ledger %d: %v", ErrBadMetadata, m.ID, err)
	}
	switch m.State {
	case StateOpen, StateInRecovery, StateClosed:
	default:
		return fmt.Errorf("%w: ledger %d: state %q", ErrBadMetadata, m.ID, m.State)
	}
	if len(m.Fragments) == 0 || m.Fragments[0].FirstEntry != 0 {
		return fmt.Errorf("%w: ledger %d: fragments must start at entry 0", ErrBadMetadata, m.ID)
	}
	for i, f := range m.Fragments {
		if len(f.Ensemble) != m.EnsembleSize {
			return fmt.Errorf("%w: ledger %d: fragment %d has %d bookies, E=%d", ErrBadMetadata, m.ID, i, len(f.Ensemble), m.EnsembleSize)
		}
		if i > 0 && f.FirstEntry < m.Fragments[i-1].FirstEntry {
			return fmt.Errorf("%w: ledger %d: fragment %d out of order", ErrBadMetadata, m.ID, i)
		}
	}
	return nil
}

func encodeMetadata(m *Metadata) ([]byte, error) { return json.Marshal(m) }

func decodeMetadata(b []byte) (*Metadata, error) {
	var m Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMetadata, err)
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Key layout (DESIGN §3). Segments are URL-path escaped.
// LedgerKey is where ledger id's metadata lives. Bookies garbage-collect
// a ledger once this key is gone, so it is bkproto's definition.
func LedgerKey(region string, id int64) string { return bkproto.LedgerKey(region, id) }

// BookiesPrefix is the prefix under which a region's bookies register.
func BookiesPrefix(region string) string { return bkproto.BookiesPrefix(region) }

// ledgerIDCounterKey is the region's ledger id counter (meta.NextID): its
// values are unique and increasing in the region, and start at 1. They are
// the low bits of a ledger id (see LedgerID).
func ledgerIDCounterKey(region string) string { return meta.RegionKey(region, "ledger-id-counter") }

// Ledger ids are unique across regions, so that a message id (ledger id,
// entry id), the only name a Pulsar client has for a message, never names
// two entries in two regions: a client that moves to another region (a
// failover) may still hold acks of the old region's ids, and an ack must
// never land on an entry the client was never given.
//
// A ledger id is laid out as
//
//	bit 63..53   0
//	bit 52..44   the region's number (1..MaxRegionNumber), assigned once
//	             per region in the global store (global.Store.RegionNumber)
//	bit 43..0    the region's ledger id counter (ledgerIDCounterKey)
//
// Why this split:
//   - pulsar-client-go carries the ledger id as MessageIdData's uint64
//     ledgerId and keeps it as an int64, which it compares to order ids
//     (its ack tracker, seeks, GetLastMessageId). The id stays positive,
//     so both readings agree and order is kept. The partition and batch
//     index travel in fields of their own, so no bit of the ledger id is
//     theirs.
//   - Ids stay below 2^53, so they survive JSON readers that hold numbers
//     as doubles (jq, JavaScript) in stats and admin output.
//   - 2^44 ledgers per region (1.7e13) last centuries at a thousand
//     rollovers a second; 511 regions is more than any deployment of
//     Pulsar's runs. A region whose counter passes 2^44 gets
//     ErrLedgerIDsExhausted rather than an id of another region.
//   - Ledgers created before region numbers existed keep their ids, which
//     are below 2^44 (region bits 0). Their region's counter goes on where
//     it stood, and every new id (region bits at least 1) is above every
//     old one, so ids still grow within a region and within each topic's
//     ledger list. An old ledger's id can still equal another region's old
//     id; the broker ignores an ack of a position it never delivered to
//     the consumer, which covers acks for those.
const (
	ledgerCounterBits = 44
	// MaxRegionNumber is the highest region number a ledger id carries:
	// the highest the global store assigns, which fits the 9 bits above
	// the counter.
	MaxRegionNumber  = topology.MaxRegionNumber
	maxLedgerCounter = 1<<ledgerCounterBits - 1
)

// LedgerID returns the ledger id of region number region's counter value
// counter, laid out as described above.
func LedgerID(region int, counter int64) (int64, error) {
	if region < 1 || region > MaxRegionNumber {
		return 0, fmt.Errorf("%w: region number %d outside [1, %d]", ErrInvalidConfig, region, MaxRegionNumber)
	}
	if counter < 1 || counter > maxLedgerCounter {
		return 0, fmt.Errorf("%w: region %d's ledger id counter is at %d, past %d", ErrLedgerIDsExhausted, region, counter, int64(maxLedgerCounter))
	}
	return int64(region)<<ledgerCounterBits | counter, nil
}

// RegionNumberOf returns the region number a ledger id carries: 0 for a
// ledger created before region numbers existed.
func RegionNumberOf(id int64) int { return int(id >> ledgerCounterBits) }

// versioned is metadata together with the ModRevision it was read or
// written at: the revision the next CAS must name.
type versioned struct {
	md     *Metadata
	modRev int64
}

func readMetadata(ctx context.Context, store meta.Store, region string, id int64) (versioned, error) {
	kv, err := store.Get(ctx, LedgerKey(region, id))
	if errors.Is(err, meta.ErrNotFound) {
		return versioned{}, fmt.Errorf("%w: %d", ErrLedgerNotFound, id)
	}
	if err != nil {
		return versioned{}, fmt.Errorf("read ledger %d: %w", id, err)
	}
	md, err := decodeMetadata(kv.Value)
	if err != nil {
		return versioned{}, err
	}
	return versioned{md: md, modRev: kv.ModRevision}, nil
}

// casMetadata writes md over the version read at modRev. It returns
// meta.ErrConflict (wrapped) when someone else changed the ledger first.
func casMetadata(ctx context.Context, store meta.Store, region string, md *Metadata, modRev int64) (versioned, error) {
	b, err := encodeMetadata(md)
	if err != nil {
		return versioned{}, err
	}
	rev, err := store.Update(ctx, LedgerKey(region, md.ID), b, modRev)
	if err != nil {
		return versioned{}, fmt.Errorf("update ledger %d: %w", md.ID, err)
	}
	return versioned{md: md, modRev: rev}, nil
}
