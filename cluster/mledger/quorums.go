package mledger

import "github.com/meridian-mq/meridian/cluster/ledger"

// Quorums is a ledger's E, Qw and Qa, as the ledger client takes and checks
// them: an alias, so that cluster/broker, which reaches the bookies only
// through this package, names them without importing cluster/ledger.
type Quorums = ledger.Quorum

// OpenOption changes how Factory.Open opens one managed ledger.
type OpenOption func(*ManagedLedger)

// WithQuorums makes q, rather than Config's EnsembleSize, WriteQuorum and
// AckQuorum, the quorums of the ledgers the managed ledger creates: a
// namespace's or topic's persistence policy, as Pulsar reads it when it
// opens the managed ledger. It applies from the first ledger created.
func WithQuorums(q Quorums) OpenOption {
	return func(ml *ManagedLedger) { ml.quorums.Store(&q) }
}

// SetQuorums makes q the quorums of the ledgers created from now on, as a
// persistence policy change does on Pulsar. The ledger being written keeps
// its own, and so does one already made ahead for the next rollover.
func (ml *ManagedLedger) SetQuorums(q Quorums) { ml.quorums.Store(&q) }

// Quorums returns the quorums of the ledgers created from now on.
func (ml *ManagedLedger) Quorums() Quorums { return *ml.quorums.Load() }

// BookieGroups is a ledger's bookie affinity: the bookie groups its
// ensembles are placed in (ledger.Groups), as cluster/broker names it.
type BookieGroups = ledger.Groups

// WithBookieGroups places the ensembles of the ledgers the managed ledger
// creates in g: a namespace's bookie affinity group, as Pulsar passes it
// to its placement policy when it opens the managed ledger. It applies from
// the first ledger created.
func WithBookieGroups(g BookieGroups) OpenOption {
	return func(ml *ManagedLedger) { ml.bookieGroups.Store(&g) }
}

// SetBookieGroups places the ledgers created from now on in g, as a bookie
// affinity change does on Pulsar. Ledgers already made keep theirs, which
// their ensemble changes stay in.
func (ml *ManagedLedger) SetBookieGroups(g BookieGroups) { ml.bookieGroups.Store(&g) }

// BookieGroups returns the bookie groups of the ledgers created from now
// on; zero places on every bookie.
func (ml *ManagedLedger) BookieGroups() BookieGroups {
	if g := ml.bookieGroups.Load(); g != nil {
		return *g
	}
	return BookieGroups{}
}

// WritableBookies is how many of the region's live bookies take adds: the
// largest ensemble a new ledger can have.
func (f *Factory) WritableBookies() int {
	n := 0
	for _, b := range f.client.Directory().Snapshot() {
		if !b.ReadOnly {
			n++
		}
	}
	return n
}

// DefaultQuorums are Config's EnsembleSize, WriteQuorum and AckQuorum.
func (f *Factory) DefaultQuorums() Quorums {
	return Quorums{Ensemble: f.cfg.EnsembleSize, Write: f.cfg.WriteQuorum, Ack: f.cfg.AckQuorum}
}
