package e2e

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestNemesisScheduleReplays(t *testing.T) {
	cfg := DefaultNemesisConfig()
	a, err := NemesisSchedule(42, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NemesisSchedule(42, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) == 0 || !slices.Equal(a, b) {
		t.Fatalf("seed 42 drew two schedules:\n%s---\n%s", FormatSchedule(a), FormatSchedule(b))
	}
}

func TestNemesisScheduleSeedsDiffer(t *testing.T) {
	cfg := DefaultNemesisConfig()
	seen := map[string]uint64{}
	for seed := uint64(1); seed <= 50; seed++ {
		s, err := NemesisSchedule(seed, cfg)
		if err != nil {
			t.Fatal(err)
		}
		text := FormatSchedule(s)
		if other, dup := seen[text]; dup {
			t.Fatalf("seeds %d and %d drew the same schedule:\n%s", other, seed, text)
		}
		seen[text] = seed
	}
}

// TestNemesisScheduleRule checks, over many seeds and configs, that every
// schedule keeps the concurrency rule, heals every fault within the run,
// freezes brokers past their lease, and aims at processes that exist; and
// that over the seeds every kind of fault is drawn.
func TestNemesisScheduleRule(t *testing.T) {
	tight := DefaultNemesisConfig()
	tight.MaxConcurrent, tight.MinGap, tight.MaxGap, tight.Settle = 3, time.Second, 2*time.Second, 2*time.Second
	single := DefaultNemesisConfig()
	single.Regions, single.MaxConcurrent, single.Duration = []string{"only"}, 1, 3*time.Minute
	for name, cfg := range map[string]NemesisConfig{"default": DefaultNemesisConfig(), "tight": tight, "single": single} {
		kinds := map[FaultKind]bool{}
		for seed := uint64(0); seed < 300; seed++ {
			faults, err := NemesisSchedule(seed, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckNemesisRule(faults, cfg.Settle, cfg.MaxConcurrent); err != nil {
				t.Fatalf("%s seed %d: %v\n%s", name, seed, err, FormatSchedule(faults))
			}
			for i, f := range faults {
				kinds[f.Kind] = true
				switch {
				case f.At <= 0 || f.End() > cfg.Duration:
					t.Fatalf("%s seed %d: %s is not within the %v run", name, seed, f, cfg.Duration)
				case i > 0 && f.At < faults[i-1].At:
					t.Fatalf("%s seed %d: %s begins before the fault listed before it", name, seed, f)
				case f.Kind == BrokerFreeze && f.For <= cfg.OwnershipTTL:
					t.Fatalf("%s seed %d: %s does not outlast the %v lease", name, seed, f, cfg.OwnershipTTL)
				case f.Kind == BookieSlowSync && (f.FsyncDelay < minFsyncDelay || f.FsyncDelay > maxFsyncDelay):
					t.Fatalf("%s seed %d: %s: delay out of range", name, seed, f)
				case (f.Kind == GlobalEtcdDown) != (f.Region == ""):
					t.Fatalf("%s seed %d: %s: region %q", name, seed, f, f.Region)
				case f.Region != "" && !slices.Contains(cfg.Regions, f.Region):
					t.Fatalf("%s seed %d: %s: no such region", name, seed, f)
				}
				limit := map[FaultKind]int{BrokerKill: cfg.Brokers, BrokerFreeze: cfg.Brokers, BookieKill: cfg.Bookies,
					BookieFull: cfg.Bookies, BookieSlowSync: cfg.Bookies, WorkerKill: cfg.Replicators}
				if n, has := limit[f.Kind]; has && (f.Target < 0 || f.Target >= n) || !has && f.Target != -1 {
					t.Fatalf("%s seed %d: %s: target %d", name, seed, f, f.Target)
				}
			}
		}
		if len(kinds) != len(faultSpecs(cfg)) {
			t.Errorf("%s: 300 seeds drew only the kinds %v", name, kinds)
		}
	}
}

// TestNemesisRuleCatches shows CheckNemesisRule failing schedules that
// break the rule, so that the test above can fail.
func TestNemesisRuleCatches(t *testing.T) {
	bookie := func(region string, at, d time.Duration) Fault {
		return Fault{Kind: BookieKill, Region: region, At: at, For: d}
	}
	for name, faults := range map[string][]Fault{
		"one region twice": {bookie("r1", 10*time.Second, 20*time.Second), bookie("r1", 20*time.Second, 5*time.Second)},
		"within settle":    {bookie("r1", 10*time.Second, 20*time.Second), bookie("r1", 35*time.Second, 5*time.Second)},
		"three at once": {bookie("r1", 10*time.Second, 20*time.Second), bookie("r2", 11*time.Second, 20*time.Second),
			bookie("r3", 12*time.Second, 20*time.Second)},
		"restart in a global outage": {{Kind: GlobalEtcdDown, Target: -1, At: 10 * time.Second, For: time.Minute},
			{Kind: WorkerKill, Region: "r2", At: 50 * time.Second, For: 30 * time.Second}},
	} {
		if err := CheckNemesisRule(faults, 10*time.Second, 2); err == nil {
			t.Errorf("%s: no breach found in\n%s", name, FormatSchedule(faults))
		}
	}
	ok := []Fault{bookie("r1", 10*time.Second, 20*time.Second), bookie("r1", 40*time.Second, 5*time.Second),
		{Kind: GlobalEtcdDown, Target: -1, At: 12 * time.Second, For: time.Minute}}
	if err := CheckNemesisRule(ok, 10*time.Second, 2); err != nil {
		t.Errorf("a schedule within the rule: %v", err)
	}
}

func TestNemesisConfigValidate(t *testing.T) {
	for name, change := range map[string]func(*NemesisConfig){
		"no duration":   func(c *NemesisConfig) { c.Duration = 0 },
		"no regions":    func(c *NemesisConfig) { c.Regions = nil },
		"global region": func(c *NemesisConfig) { c.Regions = []string{"r1", "global"} },
		"twice":         func(c *NemesisConfig) { c.Regions = []string{"r1", "r1"} },
		"no bookies":    func(c *NemesisConfig) { c.Bookies = 0 },
		"no lease":      func(c *NemesisConfig) { c.OwnershipTTL = 0 },
		"no concurrent": func(c *NemesisConfig) { c.MaxConcurrent = 0 },
		"gaps":          func(c *NemesisConfig) { c.MinGap, c.MaxGap = 5*time.Second, time.Second },
	} {
		cfg := DefaultNemesisConfig()
		change(&cfg)
		if _, err := NemesisSchedule(1, cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: %v, want ErrBadConfig", name, err)
		}
	}
	if err := DefaultNemesisConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}
