package global

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

func TestActiveRegionAndFallback(t *testing.T) {
	base := func() Policies {
		return Policies{ReplicationClusters: []string{"r1", "r2", "r3"}, ActiveRegion: "r1"}
	}
	withFallback := func(active string, fallback ...string) Policies {
		p := base()
		p.ActiveRegion = active
		p.SetFallbackRegions(fallback)
		return p
	}
	raw := base()
	raw.Extra = Extra{ExtraFallbackRegions: json.RawMessage(`{"r2":1}`)}
	for _, tc := range []struct {
		name string
		p    Policies
		want error
	}{
		{"active region alone", base(), nil},
		{"fallback in order", withFallback("r1", "r3", "r2"), nil},
		{"no active region, no fallback", withFallback(""), nil},
		{"active region outside the set", withFallback("r9"), ErrNotAllowedCluster},
		{"fallback outside the set", withFallback("r1", "r2", "r9"), ErrNotAllowedCluster},
		{"fallback names the active region", withFallback("r1", "r1"), ErrInvalidPolicies},
		{"fallback names a region twice", withFallback("r1", "r2", "r2"), ErrInvalidPolicies},
		{"fallback without an active region", withFallback("", "r2"), ErrInvalidPolicies},
		{"fallback not a list", raw, ErrInvalidPolicies},
	} {
		p := tc.p
		p.normalize()
		err := p.validate()
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := withFallback("r1", "r3", "r2").FallbackRegions(); !slices.Equal(got, []string{"r3", "r2"}) {
		t.Errorf("FallbackRegions = %v", got)
	}
	p := withFallback("r1", "r2")
	p.SetFallbackRegions(nil)
	if _, set := p.Extra[ExtraFallbackRegions]; set {
		t.Error("SetFallbackRegions(nil) kept the list")
	}
}
