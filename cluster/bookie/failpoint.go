package bookie

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
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
//	journal-write=enospc[@n]   journal writes fail with ENOSPC (read-only)
//	entry-corrupt=all          every stored entry reads back with a flipped byte
//	entry-corrupt=L:E          only entry E of ledger L does
type Failpoints struct {
	JournalSyncAfter  int // -1: off
	JournalWriteAfter int // -1: off
	CorruptAll        bool
	CorruptEntries    map[[2]int64]bool
}

// ParseFailpoints parses a specification; "" yields no failpoints.
func ParseFailpoints(spec string) (Failpoints, error) {
	fp := Failpoints{JournalSyncAfter: -1, JournalWriteAfter: -1}
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
			return fp, fmt.Errorf("%w: unknown failpoint %q (known: journal-fsync=error, journal-write=enospc, entry-corrupt=all|L:E)", ErrFailpoint, item)
		}
	}
	return fp, nil
}

// arm applies the filesystem failpoints to fs.
func (fp Failpoints) arm(fs *FaultFS) {
	if fp.JournalSyncAfter >= 0 {
		fs.FailSyncs(syscall.EIO, fp.JournalSyncAfter)
	}
	if fp.JournalWriteAfter >= 0 {
		fs.FailWrites(syscall.ENOSPC, fp.JournalWriteAfter)
	}
}

func (fp Failpoints) corrupts(ledgerID, entryID int64) bool {
	return fp.CorruptAll || fp.CorruptEntries[[2]int64{ledgerID, entryID}]
}

func (fp Failpoints) fsActive() bool { return fp.JournalSyncAfter >= 0 || fp.JournalWriteAfter >= 0 }
