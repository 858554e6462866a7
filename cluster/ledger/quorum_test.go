package ledger

import (
	"errors"
	"slices"
	"testing"
)

func TestQuorumValidate(t *testing.T) {
	tests := []struct {
		q  Quorum
		ok bool
	}{
		{Quorum{1, 1, 1}, true},
		{Quorum{3, 3, 2}, true},
		{Quorum{5, 3, 2}, true},
		{Quorum{3, 2, 3}, false},
		{Quorum{2, 3, 2}, false},
		{Quorum{3, 3, 0}, false},
		{Quorum{0, 0, 0}, false},
	}
	for _, tt := range tests {
		err := tt.q.Validate()
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
			t.Errorf("%+v: err = %v, want ok=%v", tt.q, err, tt.ok)
		}
	}
}

func TestWriteSet(t *testing.T) {
	tests := []struct {
		q     Quorum
		entry int64
		want  []int
	}{
		{Quorum{1, 1, 1}, 7, []int{0}},
		{Quorum{3, 3, 2}, 0, []int{0, 1, 2}},
		{Quorum{3, 3, 2}, 4, []int{1, 2, 0}},
		{Quorum{5, 3, 2}, 3, []int{3, 4, 0}},
		{Quorum{5, 2, 2}, 9, []int{4, 0}},
		{Quorum{4, 2, 1}, 1 << 40, []int{0, 1}},
	}
	for _, tt := range tests {
		if got := tt.q.WriteSet(tt.entry); !slices.Equal(got, tt.want) {
			t.Errorf("%+v entry %d: got %v, want %v", tt.q, tt.entry, got, tt.want)
		}
	}
}

func TestFenceCovered(t *testing.T) {
	tests := []struct {
		name     string
		q        Quorum
		answered []bool
		want     bool
	}{
		{"332 two of three", Quorum{3, 3, 2}, []bool{true, false, true}, true},
		{"332 one of three", Quorum{3, 3, 2}, []bool{false, false, true}, false},
		{"331 needs all", Quorum{3, 3, 1}, []bool{true, true, false}, false},
		{"333 one suffices", Quorum{3, 3, 3}, []bool{false, true, false}, true},
		// E=5 Qw=3 Qa=2: quorums {0,1,2} {1,2,3} {2,3,4} {3,4,0} {4,0,1};
		// each needs 2 answers.
		{"532 alternating", Quorum{5, 3, 2}, []bool{true, false, true, false, true}, false},
		{"532 one gap", Quorum{5, 3, 2}, []bool{true, true, false, true, true}, true},
		{"532 adjacent three", Quorum{5, 3, 2}, []bool{true, true, true, false, false}, false},
		{"532 four of five", Quorum{5, 3, 2}, []bool{true, true, true, true, false}, true},
		{"522 needs one per pair", Quorum{5, 2, 2}, []bool{true, false, true, false, true}, true},
		{"522 gap of two", Quorum{5, 2, 2}, []bool{true, false, false, true, true}, false},
		{"111", Quorum{1, 1, 1}, []bool{true}, true},
	}
	for _, tt := range tests {
		if got := tt.q.FenceCovered(tt.answered); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
