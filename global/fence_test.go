package global

import (
	"errors"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/topology"
)

func drillFence(name string) Fence {
	return Fence{Tenant: "public", Namespace: "default", Name: name, Region: "us-east", TopicPrefix: "drill-1-", TTLSeconds: 3, Holder: "test"}
}

func TestFenceRefusesBadInput(t *testing.T) {
	s := newStore(t, metatest.Memory(t), metatest.Prefix(t))
	ctx := ctxT(t)
	for _, tc := range []struct {
		name   string
		mutate func(*Fence)
		want   error
	}{
		{"empty prefix", func(f *Fence) { f.TopicPrefix = "" }, ErrInvalidPolicies},
		{"no region", func(f *Fence) { f.Region = "" }, ErrInvalidPolicies},
		{"ttl too short", func(f *Fence) { f.TTLSeconds = 1 }, ErrInvalidPolicies},
		{"ttl too long", func(f *Fence) { f.TTLSeconds = 3600 }, ErrInvalidPolicies},
		{"name with a slash", func(f *Fence) { f.Name = "a/b" }, ErrInvalidName},
		{"empty name", func(f *Fence) { f.Name = "" }, ErrInvalidName},
	} {
		f := drillFence("f")
		tc.mutate(&f)
		if _, err := s.CreateFence(ctx, f, time.Now()); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	list, _, err := s.Fences(ctx, "", "")
	if err != nil || len(list) != 0 {
		t.Fatalf("refused fences stored: %v %v", list, err)
	}
	if _, err := s.CreateFence(ctx, drillFence("f"), time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateFence(ctx, drillFence("f"), time.Now()); !errors.Is(err, ErrExists) {
		t.Fatalf("second fence of one name: %v, want ErrExists", err)
	}
	if err := s.DeleteFence(ctx, "public", "default", "f"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RenewFence(ctx, "public", "default", "f"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("renewing a removed fence: %v, want ErrNotFound", err)
	}
	if err := s.DeleteFence(ctx, "public", "default", "f"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removing a removed fence: %v, want ErrNotFound", err)
	}
}

func TestFenceCoversItsTopicsOnly(t *testing.T) {
	f := drillFence("f")
	name := func(s string) topology.TopicName {
		t.Helper()
		n, err := topology.ParseTopicName(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		region, topic string
		want          bool
	}{
		{"us-east", "persistent://public/default/drill-1-0", true},
		{"us-east", "persistent://public/default/drill-1-0-partition-3", true},
		{"eu-west", "persistent://public/default/drill-1-0", false},    // another region
		{"us-east", "persistent://public/default/orders", false},       // another topic of the namespace
		{"us-east", "persistent://public/default/drill-10", false},     // a prefix of the prefix
		{"us-east", "persistent://public/other/drill-1-0", false},      // another namespace
		{"us-east", "persistent://acme/default/drill-1-0", false},      // another tenant
		{"us-east", "non-persistent://public/default/drill-1-0", true}, // either domain
	} {
		if got := f.Covers(tc.region, name(tc.topic)); got != tc.want {
			t.Errorf("Covers(%s, %s) = %v, want %v", tc.region, tc.topic, got, tc.want)
		}
	}
}

// TestFenceLapsesWithoutRenewal: a fence whose holder stops renewing it
// (a drill killed with SIGKILL) is gone one TTL after its last renewal,
// by etcd's own lease expiry, with nobody left to remove it; while it is
// renewed it stays, however long that is.
func TestFenceLapsesWithoutRenewal(t *testing.T) {
	e := metatest.Shared(t)
	s := newStore(t, metatest.Dial(t, e.Endpoints()), metatest.Prefix(t))
	ctx := ctxT(t)
	f := drillFence("lapse")
	if _, err := s.CreateFence(ctx, f, time.Now()); err != nil {
		t.Fatal(err)
	}
	present := func() bool {
		list, _, err := s.Fences(ctx, "public", "default")
		if err != nil {
			t.Fatal(err)
		}
		return len(list) == 1
	}
	// Renewed every second for longer than two TTLs: it stays.
	var last time.Time
	for end := time.Now().Add(2*f.TTL() + time.Second); time.Now().Before(end); {
		if _, err := s.RenewFence(ctx, "public", "default", f.Name); err != nil {
			t.Fatalf("renewal: %v", err)
		}
		last = time.Now()
		if !present() {
			t.Fatal("a renewed fence lapsed")
		}
		time.Sleep(time.Second)
	}
	// The holder dies: nothing renews it any more.
	deadline := last.Add(f.TTL() + 2*time.Second) // etcd counts whole seconds and checks expiry every 500ms
	for present() {
		if time.Now().After(deadline) {
			t.Fatalf("the fence outlived its last renewal by %v, TTL %v", time.Since(last), f.TTL())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if gone := time.Since(last); gone < f.TTL()-time.Second {
		t.Fatalf("the fence lapsed %v after its last renewal, before its TTL %v", gone, f.TTL())
	}
	if _, err := s.RenewFence(ctx, "public", "default", f.Name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("renewing a lapsed fence: %v, want ErrNotFound", err)
	}
}
