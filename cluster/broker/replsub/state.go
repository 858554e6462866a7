package replsub

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Origin is where entries were first written: a region, and the
// incarnation of the topic there.
type Origin struct {
	Region      string `json:"region"`
	Incarnation int64  `json:"incarnation"`
}

func (o Origin) compare(p Origin) int {
	return cmp.Or(strings.Compare(o.Region, p.Region), cmp.Compare(o.Incarnation, p.Incarnation))
}

// Identity names an entry in every region: its origin and the offsets of
// its messages there.
type Identity struct {
	Origin
	First, Last int64
}

// Epoch orders the seeks of a subscription across regions: a State of a
// higher Epoch replaces, one of the same Epoch merges, one of a lower Epoch
// is stale. The zero Epoch is a subscription never sought.
type Epoch struct {
	N      int64  `json:"n"`
	Region string `json:"region"`
}

// Compare orders epochs by counter, then region name.
func (e Epoch) Compare(o Epoch) int {
	return cmp.Or(cmp.Compare(e.N, o.N), strings.Compare(e.Region, o.Region))
}

// Next is the epoch a seek in region takes, above e and every epoch in
// known.
func (e Epoch) Next(region string, known ...Epoch) Epoch {
	n := e.N
	for _, k := range known {
		n = max(n, k.N)
	}
	return Epoch{N: n + 1, Region: region}
}

// String is the epoch as a cursor property keeps it: "n:region".
func (e Epoch) String() string { return strconv.FormatInt(e.N, 10) + ":" + e.Region }

// ParseEpoch reads Epoch.String's form; "" is the zero Epoch.
func ParseEpoch(s string) (Epoch, error) {
	if s == "" {
		return Epoch{}, nil
	}
	n, region, ok := strings.Cut(s, ":")
	v, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || v < 0 {
		return Epoch{}, fmt.Errorf("replsub: epoch %q is not n:region", s)
	}
	return Epoch{N: v, Region: region}, nil
}

// OriginAcks is what a subscription consumed of one origin.
type OriginAcks struct {
	Origin
	Acked Ranges `json:"acked"`
}

// State is a subscription's consumed set in one region, as it travels
// (see the package doc).
type State struct {
	// Epoch is the seek this state descends from.
	Epoch Epoch `json:"epoch"`
	// TakenMillis is when the writing region took the state (Unix ms, its
	// clock): every ack made there before it is in the state. It says how
	// old the state is, as the others see it. It is left out
	// when a state is compared with the last one written.
	TakenMillis int64 `json:"takenMillis"`
	// Origins are sorted by region, then incarnation.
	Origins []OriginAcks `json:"origins"`
	// Unsubscribed marks the state of a subscription deleted in its
	// region (a tombstone): the others' states must not create it there
	// again. It carries nothing else.
	Unsubscribed bool `json:"unsubscribed,omitempty"`
}

// stateVersion is the version of the stored form (DESIGN §3: values are
// versioned).
const stateVersion = 1

type storedState struct {
	V int `json:"v"`
	State
}

// Encode is the state's stored form.
func (s State) Encode() ([]byte, error) { return json.Marshal(storedState{V: stateVersion, State: s}) }

// Decode reads a stored State, refusing versions it does not know and sets
// that are not sorted and merged.
func Decode(b []byte) (State, error) {
	var st storedState
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, fmt.Errorf("replsub: state: %w", err)
	}
	if st.V != stateVersion {
		return State{}, fmt.Errorf("replsub: state version %d, this broker reads %d", st.V, stateVersion)
	}
	for _, o := range st.Origins {
		if !o.Acked.valid() {
			return State{}, fmt.Errorf("replsub: state of origin %s/%d: ranges not sorted and merged", o.Region, o.Incarnation)
		}
	}
	return st.State, nil
}

// SameAcks reports whether s and o carry the same epoch and consumed set:
// when they do, writing s over o would tell the other regions nothing.
func (s State) SameAcks(o State) bool {
	return s.Epoch == o.Epoch && s.Unsubscribed == o.Unsubscribed && slices.EqualFunc(s.Origins, o.Origins, func(a, b OriginAcks) bool {
		return a.Origin == b.Origin && slices.Equal(a.Acked, b.Acked)
	})
}

// acked returns the set of origin o, nil when the state knows nothing of o.
func (s State) acked(o Origin) (Ranges, bool) {
	i, ok := slices.BinarySearchFunc(s.Origins, o, func(a OriginAcks, o Origin) int { return a.Origin.compare(o) })
	if !ok {
		return nil, false
	}
	return s.Origins[i].Acked, true
}

// Elsewhere is the union of the other regions' states of a subscription
// that a sync applied (those of its epoch): what they consumed, by
// origin. The broker checks each entry it reads for dispatch against it,
// so that an entry that arrives after that sync, named consumed by a
// state the sync applied before the entry was here, is acked rather than
// delivered: the next sync, an interval on, would ack it only after its
// delivery.
type Elsewhere map[Origin]Ranges

// UnionOf returns what states consumed together.
func UnionOf(states []State) Elsewhere {
	u := Elsewhere{}
	for _, st := range states {
		for _, o := range st.Origins {
			u[o.Origin] = u[o.Origin].Union(o.Acked)
		}
	}
	return u
}

// Covers reports whether every message of the entry named id was
// consumed.
func (e Elsewhere) Covers(id Identity) bool { return e[id.Origin].ContainsAll(id.First, id.Last) }
