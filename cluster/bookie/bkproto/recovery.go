package bkproto

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The metadata that auto-recovery (cluster/autorecovery) shares with the
// bookies, under /meridian/regions/<r>/autorecovery/:
//
//	auditor/<lease>           the auditor's election (meta.Store.Campaign)
//	underreplicated/<ledger>  a ledger marked under-replicated: which bookies to replace
//	claims/<ledger>           the worker repairing the ledger, under its lease
//	bookies/<bookie>          an operator's state for a bookie (BookieState)
//	disabled                  present while recovery is paused (`autorecovery disable`)
//
// The keys live here, beside LedgerKey, because a bookie reads one of them:
// its own state (a decommissioning bookie refuses writers' adds and
// registers as read-only).

// AutoRecoveryPrefix is the prefix of every auto-recovery key of region.
func AutoRecoveryPrefix(region string) string { return regionPrefix(region) + "autorecovery/" }

// AuditorElection is the election the region's auditor is chosen by.
func AuditorElection(region string) string { return AutoRecoveryPrefix(region) + "auditor" }

// UnderReplicatedPrefix is the prefix of the under-replication marks.
func UnderReplicatedPrefix(region string) string {
	return AutoRecoveryPrefix(region) + "underreplicated/"
}

// UnderReplicatedKey is the under-replication mark of one ledger.
func UnderReplicatedKey(region string, ledgerID int64) string {
	return UnderReplicatedPrefix(region) + strconv.FormatInt(ledgerID, 10)
}

// ClaimsPrefix is the prefix of the repair claims.
func ClaimsPrefix(region string) string { return AutoRecoveryPrefix(region) + "claims/" }

// ClaimKey is the claim on one ledger: whoever holds it (created under its
// lease) is the only one copying the ledger's entries to bookies that its
// metadata does not name.
func ClaimKey(region string, ledgerID int64) string {
	return ClaimsPrefix(region) + strconv.FormatInt(ledgerID, 10)
}

// BookieStatesPrefix is the prefix of the operators' bookie states.
func BookieStatesPrefix(region string) string { return AutoRecoveryPrefix(region) + "bookies/" }

// BookieStateKey is the operator's state for one bookie.
func BookieStateKey(region, bookieID string) string {
	return BookieStatesPrefix(region) + url.PathEscape(bookieID)
}

// RecoveryDisabledKey exists while an operator has paused auto-recovery.
func RecoveryDisabledKey(region string) string { return AutoRecoveryPrefix(region) + "disabled" }

// ParseIDKey returns the id a key directly under prefix ends in (a ledger
// id in decimal, as LedgerKey, UnderReplicatedKey and ClaimKey write it).
func ParseIDKey(prefix, key string) (int64, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != rest {
		return 0, false
	}
	return id, true
}

// The bookie states an operator sets (BookieState.State).
const (
	// StateDecommissioning: the bookie is being drained. It refuses adds
	// (its registration says readOnly) and auto-recovery copies everything
	// it holds elsewhere; it can be removed once no ledger names it.
	StateDecommissioning = "decommissioning"
	// StateLost: an operator says the bookie is gone for good; its ledgers
	// are re-replicated at once, without waiting for the recovery delay.
	StateLost = "lost"
)

// BookieState is the value at BookieStateKey:
//
//	{"v":1,"state":"decommissioning","since":<unix ms>}
type BookieState struct {
	V     int    `json:"v"`
	State string `json:"state"`
	Since int64  `json:"since"`
}

// Marshal encodes s with V set to the current version.
func (s BookieState) Marshal() []byte {
	s.V = 1
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a struct of strings and ints
	}
	return b
}

// ParseBookieState decodes a bookie state; an unknown version or state is
// refused rather than half-understood.
func ParseBookieState(b []byte) (BookieState, error) {
	var s BookieState
	if err := json.Unmarshal(b, &s); err != nil {
		return BookieState{}, fmt.Errorf("bkproto: bookie state: %w", err)
	}
	if s.V != 1 {
		return BookieState{}, fmt.Errorf("bkproto: bookie state version %d, want 1", s.V)
	}
	if s.State != StateDecommissioning && s.State != StateLost {
		return BookieState{}, fmt.Errorf("bkproto: bookie state %q", s.State)
	}
	return s, nil
}

// LedgerMembers reads, from a ledger's metadata value (whose format is the
// ledger client's, cluster/ledger), the two things a bookie's garbage
// collector needs: the ledger's state and whether any fragment's ensemble
// names bookieID. cluster/ledger's tests hold the two readings together.
func LedgerMembers(value []byte, bookieID string) (state string, member bool, err error) {
	var md struct {
		V         int    `json:"v"`
		State     string `json:"state"`
		Fragments []struct {
			Ensemble []string `json:"ensemble"`
		} `json:"fragments"`
	}
	if err := json.Unmarshal(value, &md); err != nil {
		return "", false, fmt.Errorf("bkproto: ledger metadata: %w", err)
	}
	if md.V != 1 || md.State == "" || len(md.Fragments) == 0 {
		return "", false, fmt.Errorf("bkproto: ledger metadata version %d, state %q, %d fragments: not understood", md.V, md.State, len(md.Fragments))
	}
	for _, f := range md.Fragments {
		if slices.Contains(f.Ensemble, bookieID) {
			return md.State, true, nil
		}
	}
	return md.State, false, nil
}
