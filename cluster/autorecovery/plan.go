package autorecovery

import (
	"slices"

	"github.com/meridian-mq/meridian/cluster/ledger"
)

// slotRepair is one ensemble slot of one fragment whose entries go to a
// replacement bookie, which then takes the slot by CAS.
type slotRepair struct {
	Fragment int
	Slot     int
	Bookie   string // the bookie replaced
}

// plan returns what md needs for the bookies in replace: every slot of a
// final fragment (ledger.Metadata.FragmentEntries) that one of them holds,
// in fragment and slot order. waiting says some fragment that is not final
// (an open ledger's last, or any while the ledger is in recovery) names one
// of them too: the mark must stay, and the ledger be looked at again, once
// its writer has moved on or it is closed.
func plan(md *ledger.Metadata, replace []string) (repairs []slotRepair, waiting bool) {
	inRecovery := md.State == ledger.StateInRecovery
	for i, f := range md.Fragments {
		_, _, final := md.FragmentEntries(i)
		for slot, b := range f.Ensemble {
			if !slices.Contains(replace, b) {
				continue
			}
			if !final || inRecovery {
				waiting = true
				continue
			}
			repairs = append(repairs, slotRepair{Fragment: i, Slot: slot, Bookie: b})
		}
	}
	return repairs, waiting
}
