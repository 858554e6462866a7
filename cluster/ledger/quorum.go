package ledger

import "fmt"

// Quorum is a ledger's replication shape: an ensemble of E bookies, each entry
// written to Qw of them and confirmed once Qa have acked it.
type Quorum struct {
	Ensemble int // E
	Write    int // Qw
	Ack      int // Qa
}

// Validate checks E >= Qw >= Qa >= 1.
func (q Quorum) Validate() error {
	if q.Ack < 1 || q.Write < q.Ack || q.Ensemble < q.Write {
		return fmt.Errorf("%w: need E >= Qw >= Qa >= 1, got E=%d Qw=%d Qa=%d",
			ErrInvalidConfig, q.Ensemble, q.Write, q.Ack)
	}
	return nil
}

// WriteSet returns the ensemble slots that store entry: (entry+k) mod E for
// k = 0..Qw-1, in that order.
func (q Quorum) WriteSet(entry int64) []int {
	out := make([]int, q.Write)
	base := int(entry % int64(q.Ensemble))
	for k := range out {
		out[k] = (base + k) % q.Ensemble
	}
	return out
}

// AbsentThreshold is how many members of an entry's write quorum must answer
// NoSuchEntry before the entry counts as never confirmed: (Qw-Qa)+1. Fewer
// could all be bookies the writer simply never reached while Qa others acked.
func (q Quorum) AbsentThreshold() int { return q.Write - q.Ack + 1 }

// FenceCovered reports whether the answered ensemble slots include at least
// (Qw-Qa)+1 members of every write quorum. Once they do, no write quorum has
// Qa unfenced members left, so the old writer can never confirm another entry.
func (q Quorum) FenceCovered(answered []bool) bool {
	need := q.AbsentThreshold()
	for start := 0; start < q.Ensemble; start++ {
		n := 0
		for k := 0; k < q.Write; k++ {
			if answered[(start+k)%q.Ensemble] {
				n++
			}
		}
		if n < need {
			return false
		}
	}
	return true
}
