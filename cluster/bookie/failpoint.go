package bookie

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// FailpointsEnv is the environment variable the `meridian bookie` command
// reads failpoints from. Failpoints are off unless it (or --failpoints) is set.
const FailpointsEnv = "MERIDIAN_FAILPOINTS"

// Failpoints are faults injected into a real bookie, so that multi-process
// tests can break the actual binary the way the in-process tests break a
// FaultFS. The specification is a ';'-separated list of name=action[@n],
// where @n lets n operations succeed first:
//
//	journal-fsync=error[@n]    journal fdatasync fails with EIO (fatal)
//	journal-fsync=delay:D[@n]  each journal fdatasync first waits D (a Go
//	                           duration, at most MaxSyncDelay): a slow disk
//	journal-write=enospc[@n]   journal writes fail with ENOSPC (read-only)
//	entry-corrupt=all          every stored entry reads back with a flipped byte
//	entry-corrupt=L:E          only entry E of ledger L does
//
// A bookie started with a failpoint endpoint (Config.FailpointEndpoint)
// also switches them while it runs: see Bookie.SetFailpoints.
type Failpoints struct {
	JournalSyncAfter  int // -1: off
	JournalWriteAfter int // -1: off
	// JournalSyncDelay is added to every journal fdatasync after the
	// first JournalSyncDelayAfter; 0: off.
	JournalSyncDelay      time.Duration
	JournalSyncDelayAfter int
	CorruptAll            bool
	CorruptEntries        map[[2]int64]bool
}

// MaxSyncDelay bounds journal-fsync=delay: the journal goroutine sleeps
// through it, and a bookie's Close waits for the sleep to end.
const MaxSyncDelay = 10 * time.Second

// NoFailpoints is the empty set, as ParseFailpoints("") returns it. (The
// zero Failpoints is not empty: its counts of 0 arm both disk faults.)
func NoFailpoints() Failpoints { return Failpoints{JournalSyncAfter: -1, JournalWriteAfter: -1} }

// ParseFailpoints parses a specification; "" yields no failpoints.
func ParseFailpoints(spec string) (Failpoints, error) {
	fp := NoFailpoints()
	for item := range strings.SplitSeq(spec, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, action, ok := strings.Cut(item, "=")
		if !ok {
			return fp, fmt.Errorf("%w: %q is not name=action", ErrFailpoint, item)
		}
		after := 0
		if a, n, ok := strings.Cut(action, "@"); ok {
			v, err := strconv.Atoi(n)
			if err != nil || v < 0 {
				return fp, fmt.Errorf("%w: %q: bad count after @", ErrFailpoint, item)
			}
			action, after = a, v
		}
		switch {
		case name == "journal-fsync" && action == "error":
			fp.JournalSyncAfter = after
		case name == "journal-fsync" && strings.HasPrefix(action, "delay:"):
			d, err := time.ParseDuration(strings.TrimPrefix(action, "delay:"))
			if err != nil || d <= 0 || d > MaxSyncDelay {
				return fp, fmt.Errorf("%w: %q: want journal-fsync=delay:D, D a duration in (0, %s], e.g. delay:20ms", ErrFailpoint, item, MaxSyncDelay)
			}
			fp.JournalSyncDelay, fp.JournalSyncDelayAfter = d, after
		case name == "journal-write" && action == "enospc":
			fp.JournalWriteAfter = after
		case name == "entry-corrupt" && action == "all":
			fp.CorruptAll = true
		case name == "entry-corrupt":
			l, e, ok := strings.Cut(action, ":")
			lid, err1 := strconv.ParseInt(l, 10, 64)
			eid, err2 := strconv.ParseInt(e, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				return fp, fmt.Errorf("%w: %q: want entry-corrupt=all or entry-corrupt=LEDGER:ENTRY", ErrFailpoint, item)
			}
			if fp.CorruptEntries == nil {
				fp.CorruptEntries = make(map[[2]int64]bool)
			}
			fp.CorruptEntries[[2]int64{lid, eid}] = true
		default:
			return fp, fmt.Errorf("%w: unknown failpoint %q (known: journal-fsync=error, journal-fsync=delay:D, journal-write=enospc, entry-corrupt=all|L:E)", ErrFailpoint, item)
		}
	}
	return fp, nil
}

// String is the specification in the syntax ParseFailpoints reads, items in
// a fixed order; "" when nothing is armed.
func (fp Failpoints) String() string {
	var items []string
	at := func(after int) string {
		if after > 0 {
			return "@" + strconv.Itoa(after)
		}
		return ""
	}
	if fp.JournalSyncAfter >= 0 {
		items = append(items, "journal-fsync=error"+at(fp.JournalSyncAfter))
	}
	if fp.JournalSyncDelay > 0 {
		items = append(items, "journal-fsync=delay:"+fp.JournalSyncDelay.String()+at(fp.JournalSyncDelayAfter))
	}
	if fp.JournalWriteAfter >= 0 {
		items = append(items, "journal-write=enospc"+at(fp.JournalWriteAfter))
	}
	if fp.CorruptAll {
		items = append(items, "entry-corrupt=all")
	}
	entries := slices.SortedFunc(maps.Keys(fp.CorruptEntries), func(a, b [2]int64) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	})
	for _, le := range entries {
		items = append(items, fmt.Sprintf("entry-corrupt=%d:%d", le[0], le[1]))
	}
	return strings.Join(items, ";")
}

// arm applies the filesystem failpoints to fs.
func (fp Failpoints) arm(fs *FaultFS) {
	if fp.JournalSyncAfter >= 0 {
		fs.FailSyncs(syscall.EIO, fp.JournalSyncAfter)
	}
	if fp.JournalWriteAfter >= 0 {
		fs.FailWrites(syscall.ENOSPC, fp.JournalWriteAfter)
	}
	if fp.JournalSyncDelay > 0 {
		fs.SlowSyncs(fp.JournalSyncDelay, fp.JournalSyncDelayAfter)
	}
}

func (fp Failpoints) corrupts(ledgerID, entryID int64) bool {
	return fp.CorruptAll || fp.CorruptEntries[[2]int64{ledgerID, entryID}]
}

func (fp Failpoints) fsActive() bool {
	return fp.JournalSyncAfter >= 0 || fp.JournalWriteAfter >= 0 || fp.JournalSyncDelay > 0
}

func (fp Failpoints) corruptsAny() bool { return fp.CorruptAll || len(fp.CorruptEntries) > 0 }

// failpointSwitch holds a running bookie's failpoints and switches them.
// The hot paths pay for it only when it can arm something: the journal's
// writes and syncs go through the FaultFS (one uncontended mutex per write
// or sync, each of which carries a whole batch) only when fs is set, which
// is when failpoints were armed at start or the endpoint may arm them; a
// read loads one atomic pointer, nil unless a corruption failpoint is armed.
type failpointSwitch struct {
	// fs is the journal's FaultFS; nil when the bookie started without one,
	// and then no filesystem failpoint can be armed.
	fs *FaultFS
	// corrupt holds the armed corruption failpoints (only CorruptAll and
	// CorruptEntries are read); nil: none. Replaced whole, never mutated.
	corrupt atomic.Pointer[Failpoints]
	// mu serializes set and current, so that a reader never sees half of
	// a switch.
	mu sync.Mutex
}

// set replaces every armed failpoint with fp.
func (s *failpointSwitch) set(fp Failpoints) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fs == nil && fp.fsActive() {
		return fmt.Errorf("%w: %s needs the failpoint filesystem, which only a bookie started with a failpoint endpoint has", ErrFailpointsFixed, fp)
	}
	if s.fs != nil {
		s.fs.FailSyncs(nil, 0)
		s.fs.FailWrites(nil, 0)
		s.fs.SlowSyncs(0, 0)
		fp.arm(s.fs)
	}
	if fp.corruptsAny() {
		s.corrupt.Store(&Failpoints{CorruptAll: fp.CorruptAll, CorruptEntries: maps.Clone(fp.CorruptEntries)})
	} else {
		s.corrupt.Store(nil)
	}
	return nil
}

// current is what is armed now; a counted fault shows how many operations
// still succeed before it fires.
func (s *failpointSwitch) current() Failpoints {
	s.mu.Lock()
	defer s.mu.Unlock()
	fp := NoFailpoints()
	if s.fs != nil {
		write, sync, slow := s.fs.armed()
		if write.err != nil {
			fp.JournalWriteAfter = write.after
		}
		if sync.err != nil {
			fp.JournalSyncAfter = sync.after
		}
		fp.JournalSyncDelay, fp.JournalSyncDelayAfter = slow.delay, slow.after
	}
	if c := s.corrupt.Load(); c != nil {
		fp.CorruptAll, fp.CorruptEntries = c.CorruptAll, maps.Clone(c.CorruptEntries)
	}
	return fp
}

// corrupts reports whether a read of the entry must come back damaged.
func (s *failpointSwitch) corrupts(ledgerID, entryID int64) bool {
	c := s.corrupt.Load()
	return c != nil && c.corrupts(ledgerID, entryID)
}
