package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// The nemesis: a schedule of random faults drawn from a seed, for the
// seeded fault run of issue 16 (TestNemesis, in nemesis_test.go). The
// schedule is pure: NemesisSchedule(seed, cfg) returns the same faults for
// the same seed and config on every machine, so a failing run's seed
// replays its faults. Running them needs the bed (build tag e2e); drawing
// them does not, so the generator's tests run in the default suite.
//
// The concurrency rule keeps the check meaningful, so that every fault
// is one the system claims to survive:
//
//   - a region has at most one fault at a time, and after a fault ends it
//     gets NemesisConfig.Settle with none, so that what was killed is back
//     and registered before the next fault there: never two bookies (E=3,
//     Qw=3, Qa=2 over four survives one), two brokers or two workers of
//     one region down at once;
//   - the global etcd counts as a region of its own ("global");
//   - the global etcd is never unreachable while a broker or a worker is
//     killed: its heal starts the process again, and a broker or worker
//     that starts while the global etcd is unreachable exits after 5 s
//     ("node: connect to the global etcd ...: did not answer a quorum
//     read"), having no configuration to serve from. The running ones
//     serve on from their watched cache (DESIGN §3); a cold start is not
//     part of that claim;
//   - at most NemesisConfig.MaxConcurrent faults run at once over all.

// FaultKind is one kind of fault the nemesis injects.
type FaultKind string

// The fault kinds. Each is healed at the end of its fault.
const (
	// BrokerKill SIGKILLs a broker; the heal starts it again.
	BrokerKill FaultKind = "broker-sigkill"
	// BrokerFreeze SIGSTOPs a broker past its ownership lease; the heal
	// SIGCONTs it.
	BrokerFreeze FaultKind = "broker-sigstop"
	// BookieKill SIGKILLs a bookie; the heal starts it again on its data.
	BookieKill FaultKind = "bookie-sigkill"
	// BookieFull arms a bookie's journal-write=enospc failpoint (a full
	// disk); the heal clears it.
	BookieFull FaultKind = "bookie-enospc"
	// BookieSlowSync arms a bookie's journal-fsync=delay failpoint; the
	// heal clears it.
	BookieSlowSync FaultKind = "bookie-slow-fsync"
	// WorkerKill SIGKILLs a replicator worker; the heal starts it again.
	WorkerKill FaultKind = "replicator-sigkill"
	// RegionCut cuts a region off from the others (Bed.CutRegion); the
	// heal restores it.
	RegionCut FaultKind = "region-cut"
	// RegionSlow shapes a region's broker links to 200 ms one way with 1%
	// loss; the heal puts back their usual shape.
	RegionSlow FaultKind = "region-slow"
	// GlobalEtcdDown cuts every region's link to the global etcd; the heal
	// restores them.
	GlobalEtcdDown FaultKind = "global-etcd-unreachable"
)

// globalSlot is the name the concurrency rule gives the global etcd.
const globalSlot = "global"

// faultSpec is what a kind needs: how long it lasts, and which process
// count its target is drawn from (none for region and global faults).
type faultSpec struct {
	kind     FaultKind
	min, max time.Duration
	targets  func(NemesisConfig) int
}

// faultSpecs lists every kind in the order the generator draws from. The
// order is part of the schedule: changing it changes every seed's faults.
func faultSpecs(cfg NemesisConfig) []faultSpec {
	brokers := func(c NemesisConfig) int { return c.Brokers }
	bookies := func(c NemesisConfig) int { return c.Bookies }
	workers := func(c NemesisConfig) int { return c.Replicators }
	return []faultSpec{
		{BrokerKill, 5 * time.Second, 30 * time.Second, brokers},
		// Stopped past the lease: the other broker must take its bundles.
		{BrokerFreeze, cfg.OwnershipTTL + 2*time.Second, cfg.OwnershipTTL + 15*time.Second, brokers},
		{BookieKill, 10 * time.Second, 60 * time.Second, bookies},
		{BookieFull, 10 * time.Second, 45 * time.Second, bookies},
		{BookieSlowSync, 15 * time.Second, 60 * time.Second, bookies},
		{WorkerKill, 5 * time.Second, 30 * time.Second, workers},
		{RegionCut, 10 * time.Second, 60 * time.Second, nil},
		{RegionSlow, 20 * time.Second, 60 * time.Second, nil},
		{GlobalEtcdDown, 10 * time.Second, 60 * time.Second, nil},
	}
}

// Slow-fsync delays are drawn from [minFsyncDelay, maxFsyncDelay].
const (
	minFsyncDelay = 20 * time.Millisecond
	maxFsyncDelay = 200 * time.Millisecond
)

// Fault is one fault of a schedule.
type Fault struct {
	Kind FaultKind
	// Region is where it strikes; "" for GlobalEtcdDown.
	Region string
	// Target is the index of the broker, bookie or worker in its region
	// (Region.Brokers, Bookies, Replicators); -1 for the region and
	// global faults.
	Target int
	// At is when it begins, from the start of the fault phase; For is how
	// long it lasts before its heal.
	At, For time.Duration
	// FsyncDelay is BookieSlowSync's delay on every journal fsync.
	FsyncDelay time.Duration
}

// End is when the fault is healed, from the start of the fault phase.
func (f Fault) End() time.Duration { return f.At + f.For }

// slot is the fault's place in the concurrency rule: its region, or the
// global etcd.
func (f Fault) slot() string {
	if f.Kind == GlobalEtcdDown {
		return globalSlot
	}
	return f.Region
}

// TargetName names the fault's target: "r1 bookie 2", "r2", "global etcd".
func (f Fault) TargetName() string {
	switch f.Kind {
	case GlobalEtcdDown:
		return "global etcd"
	case BrokerKill, BrokerFreeze:
		return fmt.Sprintf("%s broker %d", f.Region, f.Target)
	case BookieKill, BookieFull, BookieSlowSync:
		return fmt.Sprintf("%s bookie %d", f.Region, f.Target)
	case WorkerKill:
		return fmt.Sprintf("%s replicator %d", f.Region, f.Target)
	}
	return f.Region
}

func (f Fault) String() string {
	s := fmt.Sprintf("+%v for %v: %s of %s", f.At.Round(time.Second), f.For.Round(time.Second), f.Kind, f.TargetName())
	if f.Kind == BookieSlowSync {
		s += fmt.Sprintf(" (fsync +%v)", f.FsyncDelay)
	}
	return s
}

// NemesisConfig is what the schedule is drawn for.
type NemesisConfig struct {
	// Duration is the fault phase: every fault begins and is healed
	// within it.
	Duration time.Duration
	// Regions are the region names faults strike; at least one.
	Regions []string
	// Brokers, Bookies and Replicators are the process counts of each
	// region that targets are drawn from; each at least 1.
	Brokers, Bookies, Replicators int
	// OwnershipTTL is the brokers' ownership lease: a freeze lasts past
	// it.
	OwnershipTTL time.Duration
	// MaxConcurrent is how many faults may run at once over all regions
	// and the global etcd; at least 1.
	MaxConcurrent int
	// Settle is how long a region stays free of faults after one ends.
	Settle time.Duration
	// MinGap and MaxGap bound the time drawn between the starts of two
	// consecutive faults (a fault may start later, to keep the rule).
	MinGap, MaxGap time.Duration
}

// DefaultNemesisConfig is the 10-minute run of issue 16 on three regions
// of 2 brokers, 4 bookies and 2 workers, with the brokers' default 4 s
// lease: at most two faults at once, 10 s of calm after each in its
// region, a new fault every 5 to 20 s.
func DefaultNemesisConfig() NemesisConfig {
	return NemesisConfig{
		Duration: 10 * time.Minute, Regions: []string{"r1", "r2", "r3"},
		Brokers: 2, Bookies: 4, Replicators: 2, OwnershipTTL: 4 * time.Second,
		MaxConcurrent: 2, Settle: 10 * time.Second, MinGap: 5 * time.Second, MaxGap: 20 * time.Second,
	}
}

// Validate reports a config no schedule can be drawn for.
func (c NemesisConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: NemesisConfig: %s", ErrBadConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Duration <= 0:
		return bad("Duration must be positive, got %v", c.Duration)
	case len(c.Regions) == 0:
		return bad("Regions is empty")
	case slices.Contains(c.Regions, globalSlot) || slices.Contains(c.Regions, ""):
		return bad("a region may not be named %q or empty: %v", globalSlot, c.Regions)
	case c.Brokers < 1 || c.Bookies < 1 || c.Replicators < 1:
		return bad("Brokers, Bookies and Replicators must each be at least 1, got %d, %d, %d", c.Brokers, c.Bookies, c.Replicators)
	case c.OwnershipTTL <= 0:
		return bad("OwnershipTTL must be positive, got %v", c.OwnershipTTL)
	case c.MaxConcurrent < 1:
		return bad("MaxConcurrent must be at least 1, got %d", c.MaxConcurrent)
	case c.Settle < 0:
		return bad("Settle must not be negative, got %v", c.Settle)
	case c.MinGap <= 0 || c.MaxGap < c.MinGap:
		return bad("need 0 < MinGap <= MaxGap, got %v and %v", c.MinGap, c.MaxGap)
	}
	regions := map[string]bool{}
	for _, r := range c.Regions {
		if regions[r] {
			return bad("region %s is listed twice", r)
		}
		regions[r] = true
	}
	return nil
}

// nemesisStream is the PCG stream of the schedule's random source, so
// that it draws other numbers than the bed's Rand from the same seed.
const nemesisStream = 0x6e656d65736973

// NemesisSchedule draws the faults of seed under cfg, in the order they
// begin. It is a pure function of its arguments.
//
// The generator walks forward in time: it draws a gap, a kind, a slot (a
// region, or the global etcd), a duration and a target, then moves the
// start later until the concurrency rule allows the fault there, and
// stops at the first fault that would not be healed within the run.
func NemesisSchedule(seed uint64, cfg NemesisConfig) ([]Fault, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, nemesisStream))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo)+1)) }
	specs := faultSpecs(cfg)
	var faults []Fault
	at := time.Duration(0)
	for {
		at += between(cfg.MinGap, cfg.MaxGap)
		spec := specs[r.IntN(len(specs))]
		f := Fault{Kind: spec.kind, Target: -1, For: between(spec.min, spec.max)}
		if spec.kind != GlobalEtcdDown {
			f.Region = cfg.Regions[r.IntN(len(cfg.Regions))]
		}
		if spec.targets != nil {
			f.Target = r.IntN(spec.targets(cfg))
		}
		if spec.kind == BookieSlowSync {
			f.FsyncDelay = between(minFsyncDelay, maxFsyncDelay).Round(time.Millisecond)
		}
		f.At = earliestStart(faults, f, at, cfg)
		if f.End() > cfg.Duration {
			return faults, nil
		}
		faults = append(faults, f)
		at = f.At
	}
}

// earliestStart is the first time from start on when f may begin after
// the faults placed already (which all begin at or before start): no
// fault of its slot within Settle of it, no clash (see clash) running,
// and fewer than MaxConcurrent running.
func earliestStart(faults []Fault, f Fault, start time.Duration, cfg NemesisConfig) time.Duration {
	for moved := true; moved; {
		moved = false
		running := 0
		var ends []time.Duration
		for _, g := range faults {
			switch {
			case g.slot() == f.slot() && start < g.End()+cfg.Settle:
				start, moved = g.End()+cfg.Settle, true
			case clash(f, g) && start < g.End():
				start, moved = g.End(), true
			case g.At <= start && start < g.End():
				running++
				ends = append(ends, g.End())
			}
		}
		if !moved && running >= cfg.MaxConcurrent {
			start, moved = slices.Min(ends), true
		}
	}
	return start
}

// clash reports whether f and g may not overlap although they strike
// different slots: the global etcd's outage and a kill of a process that
// needs it to start again (a broker or a worker).
func clash(f, g Fault) bool {
	restarts := func(k FaultKind) bool { return k == BrokerKill || k == WorkerKill }
	return f.Kind == GlobalEtcdDown && restarts(g.Kind) || g.Kind == GlobalEtcdDown && restarts(f.Kind)
}

// CheckNemesisRule reports the first breach of the concurrency rule in
// faults (see the notes at the top of nemesis.go): two faults of one
// slot overlapping or closer than settle, a clash overlapping, or more
// than limit at once.
func CheckNemesisRule(faults []Fault, settle time.Duration, limit int) error {
	for i, f := range faults {
		running := 1
		for j, g := range faults {
			if i == j {
				continue
			}
			if g.At <= f.At && f.At < g.End() {
				running++
			}
			if j > i && g.slot() == f.slot() && g.At < f.End()+settle && f.At < g.End()+settle {
				return fmt.Errorf("%s and %s: one slot (%s) within %v", f, g, f.slot(), settle)
			}
			if j > i && clash(f, g) && g.At < f.End() && f.At < g.End() {
				return fmt.Errorf("%s and %s overlap: a killed process restarts while the global etcd is unreachable", f, g)
			}
		}
		if running > limit {
			return fmt.Errorf("%s starts with %d faults running, limit %d", f, running, limit)
		}
	}
	return nil
}

// FormatSchedule is the schedule one fault a line, for the test's log.
func FormatSchedule(faults []Fault) string {
	var b strings.Builder
	for i, f := range faults {
		fmt.Fprintf(&b, "  %2d. %s\n", i+1, f)
	}
	return b.String()
}
