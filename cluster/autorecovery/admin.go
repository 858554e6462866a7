package autorecovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/topology"
)

// Admin is one region's bookie administration, which the admin REST API
// serves: the bookies and their states, decommissioning, marking a bookie
// lost, the under-replicated ledgers, and the pause switch. It reads and
// writes the metadata store only; the auditor and the workers, wherever
// they run, act on what it writes. Safe for concurrent use.
type Admin struct {
	store  meta.Store
	region string
	lc     *ledger.Client
}

// NewAdmin returns the bookie administration of region, on its store and
// ledger client.
func NewAdmin(store meta.Store, region string, lc *ledger.Client) *Admin {
	return &Admin{store: store, region: region, lc: lc}
}

// The states `meridian admin bookies list` shows (BookieInfo.State).
const (
	StateWritable = "writable"
	// StateReadOnly: registered but refusing adds (its disk is full).
	StateReadOnly = "read-only"
	// StateDecommissioning and StateLost are an operator's
	// (bkproto.BookieState); a bookie that ledgers name, is not
	// registered, and has ledgers marked for it is lost too.
	StateDecommissioning = bkproto.StateDecommissioning
	StateLost            = bkproto.StateLost
	// StateUnregistered: ledgers name the bookie but it is not
	// registered, and no ledger is marked for it yet: it is restarting,
	// or within the recovery delay.
	StateUnregistered = "unregistered"
)

// BookieInfo is one bookie as `meridian admin bookies list` shows it.
type BookieInfo struct {
	ID      string `json:"id"`
	Address string `json:"address,omitempty"`
	Rack    string `json:"rack"`
	State   string `json:"state"`
	// Ledgers is how many ledgers' metadata name the bookie.
	Ledgers int `json:"ledgers"`
	// UnderReplicated is how many under-replicated ledgers are marked
	// for it.
	UnderReplicated int `json:"underReplicated"`
}

// region is what the admin reads of the region at once.
type region struct {
	registered map[string]bkproto.Registration
	states     map[string]string
	racks      map[string]bkproto.RackInfo // bookie address -> the operator's rack info
	ledgers    []ledger.Snapshot
	named      map[string]int // bookie -> ledgers naming it
	marks      []storedMark
	marked     map[string]int // bookie -> marks naming it
}

// readBookies reads the region's bookies: their registrations, the
// operators' states and rack infos. read adds the ledgers and the marks.
func (a *Admin) readBookies(ctx context.Context) (*region, error) {
	kvs, _, err := a.store.List(ctx, bkproto.BookiesPrefix(a.region))
	if err != nil {
		return nil, fmt.Errorf("list bookies: %w", err)
	}
	r := &region{registered: make(map[string]bkproto.Registration), racks: make(map[string]bkproto.RackInfo),
		named: make(map[string]int), marked: make(map[string]int)}
	for _, kv := range kvs {
		reg, err := bkproto.ParseRegistration(kv.Value)
		id, nerr := meta.Name(kv.Key)
		if err == nil && nerr == nil {
			reg.ID = id
			r.registered[id] = reg
		}
	}
	if r.states, err = BookieStates(ctx, a.store, a.region); err != nil {
		return nil, err
	}
	if kvs, _, err = a.store.List(ctx, bkproto.RackInfoPrefix(a.region)); err != nil {
		return nil, fmt.Errorf("list bookie rack infos: %w", err)
	}
	for _, kv := range kvs {
		address, err := url.PathUnescape(strings.TrimPrefix(kv.Key, bkproto.RackInfoPrefix(a.region)))
		info, perr := bkproto.ParseRackInfo(kv.Value)
		if err == nil && perr == nil { // the ledger client ignores a bad one too, and logs it
			r.racks[address] = info
		}
	}
	return r, nil
}

func (a *Admin) read(ctx context.Context) (*region, error) {
	r, err := a.readBookies(ctx)
	if err != nil {
		return nil, err
	}
	if r.ledgers, _, err = a.lc.Ledgers(ctx); err != nil {
		return nil, err
	}
	for _, l := range r.ledgers {
		for _, b := range members(l.Metadata) {
			r.named[b]++
		}
	}
	if r.marks, err = listMarks(ctx, a.store, a.region); err != nil {
		return nil, err
	}
	for _, sm := range r.marks {
		for _, b := range sm.Mark.Bookies {
			r.marked[b]++
		}
	}
	return r, nil
}

func (r *region) info(id string) BookieInfo {
	reg, registered := r.registered[id]
	bi := BookieInfo{ID: id, Address: reg.Address, Rack: reg.Rack, Ledgers: r.named[id], UnderReplicated: r.marked[id]}
	switch {
	case r.states[id] != "":
		bi.State = r.states[id]
	case registered && reg.ReadOnly:
		bi.State = StateReadOnly
	case registered:
		bi.State = StateWritable
	case r.marked[id] > 0:
		bi.State = StateLost
	default:
		bi.State = StateUnregistered
	}
	return bi
}

// candidates are the registered bookies in placement's terms
// (topology.Bookie), each in the group its rack info names, as the ledger
// client's directory places them. A bookie an operator gave a state
// (decommissioning, lost) takes no new ensemble member, so it counts as
// read-only.
func (r *region) candidates() []topology.Bookie {
	out := make([]topology.Bookie, 0, len(r.registered))
	for id, reg := range r.registered {
		group := topology.DefaultGroup
		if info, ok := r.racks[reg.Address]; ok {
			group = info.Group
		}
		out = append(out, topology.Bookie{ID: id, Rack: reg.Rack, Group: group, ReadOnly: reg.ReadOnly || r.states[id] != ""})
	}
	return out
}

func (r *region) known(id string) bool {
	_, ok := r.registered[id]
	return ok || r.named[id] > 0 || r.states[id] != ""
}

// Bookies lists every bookie that is registered, named by a ledger, or
// given a state by an operator, sorted by id.
func (a *Admin) Bookies(ctx context.Context) ([]BookieInfo, error) {
	r, err := a.read(ctx)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool)
	for id := range r.registered {
		ids[id] = true
	}
	for id := range r.named {
		ids[id] = true
	}
	for id := range r.states {
		ids[id] = true
	}
	out := make([]BookieInfo, 0, len(ids))
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		out = append(out, r.info(id))
	}
	return out, nil
}

// Capacity is the largest ensemble that placement could give a new ledger
// in groups now (topology.Groups.Capacity over the registered bookies,
// those an operator is decommissioning or marked lost left out): the
// largest E a persistence policy may ask for.
func (a *Admin) Capacity(ctx context.Context, groups topology.Groups) (int, error) {
	r, err := a.readBookies(ctx)
	if err != nil {
		return 0, err
	}
	return groups.Capacity(r.candidates(), nil), nil
}

// Registered returns the registered bookies, sorted by id: Pulsar's
// /admin/v2/bookies/all and racks-info are made of them.
func (a *Admin) Registered(ctx context.Context) ([]bkproto.Registration, error) {
	r, err := a.read(ctx)
	if err != nil {
		return nil, err
	}
	out := slices.Collect(maps.Values(r.registered))
	slices.SortFunc(out, func(x, y bkproto.Registration) int { return cmp.Compare(x.ID, y.ID) })
	return out, nil
}

// Decommission is the progress of a bookie's decommissioning.
type Decommission struct {
	Bookie string `json:"bookie"`
	State  string `json:"state"`
	// Ledgers is how many ledgers' metadata still name the bookie.
	Ledgers int `json:"ledgers"`
	// UnderReplicated is how many of them are marked for repair.
	UnderReplicated int `json:"underReplicated"`
	// Done says no ledger names the bookie any more: it can be stopped
	// and removed (its data is not needed).
	Done    bool   `json:"done"`
	Message string `json:"message"`
}

func (r *region) progress(id string) Decommission {
	bi := r.info(id)
	d := Decommission{Bookie: id, State: bi.State, Ledgers: bi.Ledgers, UnderReplicated: bi.UnderReplicated, Done: bi.Ledgers == 0}
	switch {
	case d.Done:
		d.Message = fmt.Sprintf("bookie %s holds no ledger any more: it can be stopped and removed", id)
	case bi.State != StateDecommissioning:
		d.Message = fmt.Sprintf("bookie %s is %s, not being decommissioned; %d ledgers name it", id, bi.State, bi.Ledgers)
	default:
		d.Message = fmt.Sprintf("bookie %s is read-only; %d ledgers still name it (%d marked for repair); an open ledger's writer moves off it at its next add, and the ledger is repaired once it rolls over or closes",
			id, bi.Ledgers, bi.UnderReplicated)
	}
	return d
}

// Decommission starts draining bookie id: it turns read-only (writers move
// their ensembles off it), and auto-recovery copies everything it holds to
// other bookies. It is refused for a bookie unknown to the region
// (ErrUnknownBookie) and for one whose leaving would leave some ledgers
// fewer writable bookies than their ensembles (ErrQuorumNeedsBookie,
// shortfalls). It returns the progress; asking again is harmless.
func (a *Admin) Decommission(ctx context.Context, id string) (Decommission, error) {
	r, err := a.read(ctx)
	if err != nil {
		return Decommission{}, err
	}
	if !r.known(id) {
		return Decommission{}, fmt.Errorf("%w: no bookie %q is registered in region %s or named by a ledger", ErrUnknownBookie, id, a.region)
	}
	if r.states[id] == StateDecommissioning {
		return r.progress(id), nil
	}
	if short := r.shortfalls(id); len(short) > 0 {
		return Decommission{}, fmt.Errorf("%w: without %s, %s: start another bookie first (in the groups named, through set-bookie-rack --group)",
			ErrQuorumNeedsBookie, id, strings.Join(short, "; "))
	}
	if err := a.setState(ctx, id, bkproto.StateDecommissioning); err != nil {
		return Decommission{}, err
	}
	r.states[id] = StateDecommissioning
	return r.progress(id), nil
}

// shortfalls says, for each bookie affinity of the region's ledgers, where
// the bookies placement could give its ledgers without bookie id
// (topology.Groups.Capacity) would be fewer than their largest ensemble:
// a ledger is re-replicated, and its ensemble changed, only within the
// groups its metadata names. Ledgers without groups place on every bookie,
// and the region keeps at least one writable bookie for new ledgers, even
// with no ledger at all. A ledger in groups counts when id is in those
// groups or in the ledger: the leaving of a bookie in another group takes
// nothing from it.
func (r *region) shortfalls(id string) []string {
	type demand struct{ ledgers, need int }
	candidates := r.candidates()
	inGroups := func(g topology.Groups) bool {
		return slices.ContainsFunc(g.Narrow(candidates, math.MaxInt, nil), func(b topology.Bookie) bool { return b.ID == id })
	}
	demands := map[topology.Groups]*demand{{}: {need: 1}}
	for _, l := range r.ledgers {
		g := l.Metadata.BookieGroups
		if !g.IsZero() && !inGroups(g) && !slices.Contains(members(l.Metadata), id) {
			continue
		}
		d := demands[g]
		if d == nil {
			d = &demand{}
			demands[g] = d
		}
		d.ledgers++
		d.need = max(d.need, l.Metadata.EnsembleSize)
	}
	var out []string
	for _, g := range slices.SortedFunc(maps.Keys(demands), func(x, y topology.Groups) int {
		return cmp.Or(cmp.Compare(x.Primary, y.Primary), cmp.Compare(x.Secondary, y.Secondary))
	}) {
		d := demands[g]
		have := g.Capacity(candidates, []string{id})
		switch {
		case have >= d.need:
		case g.IsZero() && d.ledgers == 0:
			out = append(out, "the region has no writable bookie left for new ledgers")
		case g.IsZero():
			out = append(out, fmt.Sprintf("the region has %d writable bookies, and its %d ledgers without bookie groups need ensembles of %d",
				have, d.ledgers, d.need))
		default:
			out = append(out, fmt.Sprintf("in %s: %d writable bookies, and %d ledgers placed there need ensembles of %d",
				g, have, d.ledgers, d.need))
		}
	}
	return out
}

// DecommissionStatus returns the progress of a bookie's decommissioning.
func (a *Admin) DecommissionStatus(ctx context.Context, id string) (Decommission, error) {
	r, err := a.read(ctx)
	if err != nil {
		return Decommission{}, err
	}
	if !r.known(id) {
		return Decommission{}, fmt.Errorf("%w: no bookie %q in region %s", ErrUnknownBookie, id, a.region)
	}
	return r.progress(id), nil
}

// MarkLost tells auto-recovery that bookie id is gone for good: its
// ledgers are re-replicated at once, without the recovery delay.
func (a *Admin) MarkLost(ctx context.Context, id string) error {
	r, err := a.read(ctx)
	if err != nil {
		return err
	}
	if !r.known(id) {
		return fmt.Errorf("%w: no bookie %q in region %s", ErrUnknownBookie, id, a.region)
	}
	return a.setState(ctx, id, bkproto.StateLost)
}

// ClearState cancels a decommissioning or a lost mark: the bookie takes
// adds again (if registered), and ledgers already repaired stay where they
// are now.
func (a *Admin) ClearState(ctx context.Context, id string) error {
	return a.remove(ctx, bkproto.BookieStateKey(a.region, id), fmt.Errorf("%w: bookie %q has no state set", ErrUnknownBookie, id))
}

func (a *Admin) setState(ctx context.Context, id, state string) error {
	v := bkproto.BookieState{State: state, Since: time.Now().UnixMilli()}.Marshal()
	return a.put(ctx, bkproto.BookieStateKey(a.region, id), v)
}

// remove deletes key, or returns missing when there is none.
func (a *Admin) remove(ctx context.Context, key string, missing error) error {
	kv, err := a.store.Get(ctx, key)
	if errors.Is(err, meta.ErrNotFound) {
		return missing
	}
	if err != nil {
		return err
	}
	return a.store.Delete(ctx, key, kv.ModRevision)
}

// put creates key with v, or replaces its value, by CAS: an operator's
// setting, whose last writer wins.
func (a *Admin) put(ctx context.Context, key string, v []byte) error {
	for {
		kv, err := a.store.Get(ctx, key)
		if errors.Is(err, meta.ErrNotFound) {
			if _, err = a.store.Create(ctx, key, v, meta.NoLease); errors.Is(err, meta.ErrExists) {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		if _, err = a.store.Update(ctx, key, v, kv.ModRevision); errors.Is(err, meta.ErrConflict) {
			continue
		}
		return err
	}
}

// UnderReplicatedLedger is one marked ledger as `meridian admin bookies
// under-replicated` shows it.
type UnderReplicatedLedger struct {
	Ledger  int64    `json:"ledger"`
	Bookies []string `json:"bookies"`
	Since   int64    `json:"since"`
	Reason  string   `json:"reason"`
	// State is the ledger's (OPEN, IN_RECOVERY, CLOSED; "" once deleted).
	State string `json:"state"`
	// Worker is who holds the ledger's claim, repairing it now.
	Worker    string `json:"worker,omitempty"`
	LastError string `json:"lastError,omitempty"`
	ErrorAt   int64  `json:"errorAt,omitempty"`
	EntryLost bool   `json:"entryLost,omitempty"`
}

// UnderReplicated lists the marked ledgers, by id.
func (a *Admin) UnderReplicated(ctx context.Context) ([]UnderReplicatedLedger, error) {
	r, err := a.read(ctx)
	if err != nil {
		return nil, err
	}
	claims, _, err := a.store.List(ctx, bkproto.ClaimsPrefix(a.region))
	if err != nil {
		return nil, err
	}
	holder := make(map[int64]string)
	for _, kv := range claims {
		if id, ok := bkproto.ParseIDKey(bkproto.ClaimsPrefix(a.region), kv.Key); ok {
			var c claimValue
			if _, err := meta.DecodeJSON(kv.Value, 1, &c); err == nil {
				holder[id] = c.Worker
			}
		}
	}
	state := make(map[int64]string, len(r.ledgers))
	for _, l := range r.ledgers {
		state[l.Metadata.ID] = string(l.Metadata.State)
	}
	out := make([]UnderReplicatedLedger, 0, len(r.marks))
	for _, sm := range r.marks {
		out = append(out, UnderReplicatedLedger{
			Ledger: sm.Ledger, Bookies: sm.Mark.Bookies, Since: sm.Mark.Since, Reason: sm.Mark.Reason,
			State: state[sm.Ledger], Worker: holder[sm.Ledger],
			LastError: sm.Mark.LastError, ErrorAt: sm.Mark.ErrorAt, EntryLost: sm.Mark.EntryLost,
		})
	}
	return out, nil
}

// SetPaused pauses (true) or resumes auto-recovery of the region,
// BookKeeper's `autorecovery disable|enable`: while paused the auditor
// marks nothing and the workers take no ledger (one being copied stops
// after its current slot).
func (a *Admin) SetPaused(ctx context.Context, paused bool) error {
	key := bkproto.RecoveryDisabledKey(a.region)
	if paused {
		v, err := meta.EncodeJSON(1, struct {
			Since int64 `json:"since"`
		}{time.Now().UnixMilli()})
		if err != nil {
			return err
		}
		if _, err := a.store.Create(ctx, key, v, meta.NoLease); err != nil && !errors.Is(err, meta.ErrExists) {
			return err
		}
		return nil
	}
	kv, err := a.store.Get(ctx, key)
	if errors.Is(err, meta.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := a.store.Delete(ctx, key, kv.ModRevision); err != nil && !errors.Is(err, meta.ErrConflict) {
		return err
	}
	return nil
}

// Paused reports whether auto-recovery of the region is paused.
func (a *Admin) Paused(ctx context.Context) (bool, error) { return Paused(ctx, a.store, a.region) }

// BookieRack is one bookie's place as Pulsar's racks-info shows it
// (BookieInfo).
type BookieRack struct {
	Rack     string `json:"rack"`
	Hostname string `json:"hostname"`
}

// Racks is Pulsar's racks-info: bookie group -> bookie address -> its
// place. Every rack info an operator set is there, in its group, whether or
// not its bookie runs; every registered bookie without one is in
// topology.DefaultGroup, on the rack it registered with and named by its
// id. A rack info that names no rack shows the bookie's registered one, as
// the ledger client places it (ledger.Directory.Snapshot).
func (a *Admin) Racks(ctx context.Context) (map[string]map[string]BookieRack, error) {
	r, err := a.readBookies(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]BookieRack{}
	put := func(group, address string, r BookieRack) {
		if out[group] == nil {
			out[group] = map[string]BookieRack{}
		}
		out[group][address] = r
	}
	for address, info := range r.racks {
		put(info.Group, address, BookieRack{Rack: info.Rack, Hostname: info.Hostname})
	}
	for _, reg := range r.registered {
		info, ok := r.racks[reg.Address]
		switch {
		case !ok:
			put(topology.DefaultGroup, reg.Address, BookieRack{Rack: reg.Rack, Hostname: reg.ID})
		case info.Rack == "":
			put(info.Group, reg.Address, BookieRack{Rack: reg.Rack, Hostname: info.Hostname})
		}
	}
	return out, nil
}

// SetRack puts the bookie at address (host:port) in group, on rack, as
// `pulsar-admin bookies set-bookie-rack` does. New ledgers are placed by
// it at once; ledgers already placed keep their ensembles.
func (a *Admin) SetRack(ctx context.Context, address, group string, r BookieRack) error {
	if group == "" {
		return fmt.Errorf("%w: a bookie group is required", ErrInvalidRackInfo)
	}
	if host, port, err := net.SplitHostPort(address); err != nil || host == "" || port == "" {
		return fmt.Errorf("%w: bookie %q is not an address host:port", ErrInvalidRackInfo, address)
	}
	v := bkproto.RackInfo{Group: group, Rack: r.Rack, Hostname: r.Hostname}.Marshal()
	return a.put(ctx, bkproto.RackInfoKey(a.region, address), v)
}

// DeleteRack removes what SetRack set for the bookie at address: it goes
// back to topology.DefaultGroup and its registered rack.
func (a *Admin) DeleteRack(ctx context.Context, address string) error {
	return a.remove(ctx, bkproto.RackInfoKey(a.region, address), fmt.Errorf("%w: Bookie address not found: %s", ErrUnknownBookie, address))
}
