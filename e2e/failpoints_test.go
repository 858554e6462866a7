//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestBookieFailpoints switches a bed bookie's failpoints through
// Process.SetFailpoints, and shows that a bookie of a region without
// RegionConfig.BookieFailpoints has no endpoint to switch.
func TestBookieFailpoints(t *testing.T) {
	bed := StartBed(t, BedConfig{Binary: meridianBin, GlobalEtcd: true, Regions: []RegionConfig{
		{Name: "fp", EtcdMembers: 1, Bookies: 1, BookieFailpoints: true},
		{Name: "plain", EtcdMembers: 1, Bookies: 1},
	}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	bk := bed.Region("fp").Bookies[0]
	for _, tc := range []struct{ spec, want string }{
		{"journal-fsync=delay:50ms; entry-corrupt=7:1", "journal-fsync=delay:50ms;entry-corrupt=7:1"},
		{"journal-write=enospc@5", "journal-write=enospc@5"},
		{"", ""},
	} {
		got, err := bk.SetFailpoints(ctx, tc.spec)
		if err != nil || got != tc.want {
			t.Fatalf("SetFailpoints(%q) = %q, %v; want %q", tc.spec, got, err, tc.want)
		}
	}
	if _, err := bk.SetFailpoints(ctx, "journal-fsync=whenever"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("a bad spec: %v, want the bookie's 400", err)
	}
	if _, err := bed.Region("plain").Bookies[0].SetFailpoints(ctx, "journal-write=enospc"); err == nil {
		t.Fatal("a bookie without a failpoint endpoint took failpoints")
	}
}
