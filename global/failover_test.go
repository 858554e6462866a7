package global

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestAutoFailoverNeedsAMajorityAndSomewhereToGo(t *testing.T) {
	policy := func(clusters []string, active string, fallback []string, delay int) Policies {
		p := Policies{ReplicationClusters: clusters, ActiveRegion: active}
		p.SetFallbackRegions(fallback)
		p.SetAutoFailover(&AutoFailover{DelaySeconds: delay})
		return p
	}
	three := []string{"r1", "r2", "r3"}
	for _, tc := range []struct {
		name string
		p    Policies
		want error
	}{
		{"three regions, a fallback", policy(three, "r1", []string{"r2"}, 30), nil},
		{"two regions: no majority", policy([]string{"r1", "r2"}, "r1", []string{"r2"}, 30), ErrInvalidPolicies},
		{"no active region", policy(three, "", nil, 30), ErrInvalidPolicies},
		{"no fallback", policy(three, "r1", nil, 30), ErrInvalidPolicies},
		{"no delay", policy(three, "r1", []string{"r2"}, 0), ErrInvalidPolicies},
	} {
		p := tc.p
		p.normalize()
		err := p.validate()
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	p := policy(three, "r1", []string{"r2"}, 30)
	if a, ok := p.AutoFailover(); !ok || a.Delay() != 30*time.Second {
		t.Errorf("AutoFailover() = %+v, %v", a, ok)
	}
	p.SetAutoFailover(nil)
	if _, ok := p.AutoFailover(); ok {
		t.Error("SetAutoFailover(nil) left it on")
	}
}

// testFailoverSwitch: the switch is refused while a session of the region
// it replaces is left, and once none is, it moves the active region,
// rotates the fallback list and records itself; a second switch from the
// same region is refused.
func testFailoverSwitch(t *testing.T, e env) {
	ctx := ctxT(t)
	setupTenant(t, e, "acme", "r1", "r2", "r3")
	p := Policies{ReplicationClusters: []string{"r1", "r2", "r3"}, ActiveRegion: "r1"}
	p.SetFallbackRegions([]string{"r2", "r3"})
	p.SetAutoFailover(&AutoFailover{DelaySeconds: 5})
	must(e.a.CreateNamespace(ctx, "acme", "ns", p)).ok(t)

	lease, err := e.ma.Grant(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.a.CreateFailoverSession(ctx, "r1", FailoverSession{Broker: "b1", ServiceURL: "pulsar://b1:6650"}, lease.ID()); err != nil {
		t.Fatal(err)
	}
	ss, err := e.b.FailoverSessions(ctx, "r1")
	if err != nil || len(ss) != 1 || ss[0].CreateRevision == 0 ||
		ss[0] != (FailoverSession{Broker: "b1", ServiceURL: "pulsar://b1:6650", Lease: lease.ID(), CreateRevision: ss[0].CreateRevision}) {
		t.Fatalf("FailoverSessions = %+v, %v", ss, err)
	}
	// b1 predates revocation records.
	if all, err := e.b.EverySessionRecordsRevocations(ctx); err != nil || all {
		t.Fatalf("EverySessionRecordsRevocations with b1's session = %v, %v; want false", all, err)
	}
	if rev, err := e.b.FailoverRevocation(ctx, "r1"); err != nil || rev != 0 {
		t.Fatalf("FailoverRevocation before any = %d, %v; want 0", rev, err)
	}
	view := FailoverView{Region: "r1", Broker: "b1", Active: "r1"}
	if err := e.a.WriteFailoverView(ctx, "acme", "ns", view, lease.ID()); err != nil {
		t.Fatal(err)
	}
	if got, err := e.b.FailoverViews(ctx, "acme", "ns"); err != nil || len(got) != 1 || got[0] != view {
		t.Fatalf("FailoverViews = %+v, %v; want [%+v]", got, err, view)
	}
	at := time.UnixMilli(1_700_000_000_000)
	if _, err := e.b.SwitchActiveRegion(ctx, "acme", "ns", "r1", "r2", at, 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("switch with r1's session alive: %v, want ErrConflict", err)
	}
	if got, _ := e.b.Namespace(ctx, "acme", "ns"); got.ActiveRegion != "r1" {
		t.Fatalf("a refused switch moved the active region to %s", got.ActiveRegion)
	}

	if err := e.b.RevokeFailoverSessions(ctx, "r1", at); err != nil {
		t.Fatal(err)
	}
	if ss, err := e.b.FailoverSessions(ctx, "r1"); err != nil || len(ss) != 0 {
		t.Fatalf("sessions after the revocation: %v, %v", ss, err)
	}
	// The record's revision is above the revoked session's creation.
	if rev, err := e.a.FailoverRevocation(ctx, "r1"); err != nil || rev <= ss[0].CreateRevision {
		t.Fatalf("FailoverRevocation after revoking b1's session (created at %d) = %d, %v", ss[0].CreateRevision, rev, err)
	}
	if all, err := e.b.EverySessionRecordsRevocations(ctx); err != nil || !all {
		t.Fatalf("EverySessionRecordsRevocations with no session = %v, %v; want true", all, err)
	}
	// A later revocation moves the record above the sessions it revokes.
	again, err := e.a.GrantLease(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.a.CreateFailoverSession(ctx, "r1", FailoverSession{Broker: "b2", RecordsRevocations: true}, again.ID()); err != nil {
		t.Fatal(err)
	}
	b2, err := e.b.FailoverSessions(ctx, "r1")
	if err != nil || len(b2) != 1 {
		t.Fatalf("FailoverSessions = %+v, %v", b2, err)
	}
	if err := e.b.RevokeFailoverSessions(ctx, "r1", at); err != nil {
		t.Fatal(err)
	}
	if rev, err := e.a.FailoverRevocation(ctx, "r1"); err != nil || rev <= b2[0].CreateRevision {
		t.Fatalf("FailoverRevocation after revoking b2's session (created at %d) = %d, %v", b2[0].CreateRevision, rev, err)
	}
	if got, err := e.b.FailoverViews(ctx, "acme", "ns"); err != nil || len(got) != 0 {
		t.Fatalf("views after the revocation: %v, %v", got, err)
	}
	next, err := e.b.SwitchActiveRegion(ctx, "acme", "ns", "r1", "r2", at, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := e.a.Namespace(ctx, "acme", "ns")
	if err != nil {
		t.Fatal(err)
	}
	a, ok := stored.AutoFailover()
	switch {
	case stored.ActiveRegion != "r2" || next.ActiveRegion != "r2":
		t.Errorf("active region %s, want r2", stored.ActiveRegion)
	case !slices.Equal(stored.FallbackRegions(), []string{"r3", "r1"}):
		t.Errorf("fallback %v, want [r3 r1]", stored.FallbackRegions())
	case !ok || a.LastSwitch == nil || *a.LastSwitch != (FailoverSwitch{From: "r1", To: "r2", AtMillis: at.UnixMilli(), DispatchWaitMillis: 10_000}):
		t.Errorf("recorded switch %+v", a.LastSwitch)
	case !a.LastSwitch.NotBefore().Equal(at.Add(10 * time.Second)):
		t.Errorf("NotBefore %v", a.LastSwitch.NotBefore())
	}
	if _, err := e.a.SwitchActiveRegion(ctx, "acme", "ns", "r1", "r3", at, 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second switch from r1: %v, want ErrConflict", err)
	}
}
