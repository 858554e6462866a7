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

// TestTopicActiveRegion shows a topic's own active region over the
// namespace's: it takes the topic out of the namespace's automatic
// failover, and it counts only while it is one of the topic's regions.
func TestTopicActiveRegion(t *testing.T) {
	ns := Policies{ReplicationClusters: []string{"r1", "r2", "r3"}, ActiveRegion: "r1"}
	ns.SetFallbackRegions([]string{"r2"})
	ns.SetAutoFailover(&AutoFailover{DelaySeconds: 30})
	tenant := TenantInfo{AllowedClusters: []string{"r1", "r2", "r3"}}
	withOwn := func(region string, clusters []string) *TopicPolicies {
		tp := &TopicPolicies{ReplicationClusters: clusters}
		tp.SetActiveRegion(region)
		return tp
	}
	for _, tc := range []struct {
		name       string
		topic      *TopicPolicies
		wantActive string
		wantAuto   bool
	}{
		{"no record: the namespace's", nil, "r1", true},
		{"no override: the namespace's", &TopicPolicies{}, "r1", true},
		{"its own, switched by hand", withOwn("r2", nil), "r2", false},
		{"its own, outside its set", withOwn("r3", []string{"r1", "r2"}), "", false},
	} {
		e := Resolve(BrokerDefaults{}, tenant, ns, tc.topic)
		if e.ActiveRegion != tc.wantActive || (e.AutoFailover != nil) != tc.wantAuto {
			t.Errorf("%s: active region %q, automatic failover %v; want %q, %v", tc.name, e.ActiveRegion, e.AutoFailover != nil, tc.wantActive, tc.wantAuto)
		}
	}
	for _, raw := range []string{`"not a name!"`, `""`, `["r1"]`} {
		tp := TopicPolicies{Extra: Extra{ExtraTopicActiveRegion: json.RawMessage(raw)}}
		if err := tp.validate(); !errors.Is(err, ErrInvalidPolicies) {
			t.Errorf("active region %s: %v, want refused", raw, err)
		}
	}
	tp := withOwn("r2", nil)
	tp.SetActiveRegion("")
	if _, set := tp.Extra[ExtraTopicActiveRegion]; set || tp.ActiveRegion() != "" {
		t.Error("SetActiveRegion(\"\") kept the region")
	}
}
