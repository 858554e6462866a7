package autorecovery

import "errors"

// Sentinel errors of auto-recovery and of the bookie administration it
// serves to the admin API.
var (
	// ErrInvalidConfig: a Config field is out of its documented bounds.
	ErrInvalidConfig = errors.New("autorecovery: invalid configuration")
	// ErrUnknownBookie: no bookie of that id is registered, and no ledger
	// names it.
	ErrUnknownBookie = errors.New("autorecovery: unknown bookie")
	// ErrQuorumNeedsBookie: taking the bookie out would leave fewer
	// writable bookies than a ledger's ensemble (or a new ledger) needs,
	// so its data could not be moved anywhere. Add bookies first.
	ErrQuorumNeedsBookie = errors.New("autorecovery: the remaining bookies cannot hold an ensemble")
	// ErrNoSpareBookie: no registered, writable bookie outside a fragment's
	// ensemble can take a replaced bookie's place. The repair waits.
	ErrNoSpareBookie = errors.New("autorecovery: no spare bookie for a replacement")
	// ErrInvalidRackInfo: a racks-info update without a group, or for a
	// bookie not named host:port.
	ErrInvalidRackInfo = errors.New("autorecovery: invalid bookie rack info")
	// ErrPaused: recovery is paused by an operator (autorecovery disable).
	ErrPaused = errors.New("autorecovery: recovery is paused")
)
