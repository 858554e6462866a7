package autorecovery

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/meridian-mq/meridian/cluster/ledger"
)

// TestDecide runs the auditor's decision (decide) through the scripts in
// testdata/decide: bookies register and go, ledgers name them, operators
// set states, and each audit at a virtual time prints which bookies' ledgers
// it marks, which bookies started waiting and which came back, and when
// the next waiting bookie falls due.
//
//	register b1 b2         the bookies register
//	unregister b2          b2's registration goes
//	ledger 7 b1 b2 b3      ledger 7's fragments name these bookies
//	drop 7                 ledger 7 is deleted
//	state b1 decommissioning|lost|none
//	audit at=90s delay=60s
func TestDecide(t *testing.T) {
	datadriven.Walk(t, "testdata/decide", func(t *testing.T, path string) {
		t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		live := map[string]bool{}
		states := map[string]string{}
		ledgers := map[int64][]string{}
		missing := map[string]time.Time{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			words := cmdArgs(d)
			switch d.Cmd {
			case "register":
				for _, b := range words {
					live[b] = true
				}
			case "unregister":
				for _, b := range words {
					delete(live, b)
				}
			case "ledger":
				id, _ := strconv.ParseInt(words[0], 10, 64)
				ledgers[id] = words[1:]
			case "drop":
				id, _ := strconv.ParseInt(words[0], 10, 64)
				delete(ledgers, id)
			case "state":
				if words[1] == "none" {
					delete(states, words[0])
				} else {
					states[words[0]] = words[1]
				}
			case "audit":
				var at, delay string
				d.ScanArgs(t, "at", &at)
				d.ScanArgs(t, "delay", &delay)
				atD, err := time.ParseDuration(at)
				if err != nil {
					t.Fatal(err)
				}
				delayD, err := time.ParseDuration(delay)
				if err != nil {
					t.Fatal(err)
				}
				v := auditView{live: live, states: states, named: map[string][]int64{}}
				for id, bs := range ledgers {
					for _, b := range bs {
						v.named[b] = append(v.named[b], id)
					}
				}
				replace, next, delayed, back := decide(v, missing, t0.Add(atD), delayD)
				var out strings.Builder
				for _, b := range slices.Sorted(maps.Keys(replace)) {
					fmt.Fprintf(&out, "mark ledgers of %s: %s\n", b, replace[b])
				}
				if len(delayed) > 0 {
					fmt.Fprintf(&out, "waiting: %s\n", strings.Join(delayed, " "))
				}
				if len(back) > 0 {
					fmt.Fprintf(&out, "back: %s\n", strings.Join(back, " "))
				}
				if !next.IsZero() {
					fmt.Fprintf(&out, "next due at %s\n", next.Sub(t0))
				}
				if out.Len() == 0 {
					return "nothing\n"
				}
				return out.String()
			default:
				t.Fatalf("unknown command %q", d.Cmd)
			}
			return ""
		})
	})
}

// cmdArgs returns a command's arguments as words (datadriven parses
// "register b1 b2" into keys b1 and b2 without values).
func cmdArgs(d *datadriven.TestData) []string {
	var out []string
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			out = append(out, a.Key)
		}
	}
	return out
}

// TestPlan runs plan through testdata/plan: a ledger described line by
// line (state, quorum, fragments), the bookies to replace, and the slot
// repairs printed, or "waiting" for fragments that are not final.
//
//	plan replace=b2,b3
//	CLOSED 3/2/2 last=99
//	0: b1 b2 b3
//	50: b4 b2 b5
func TestPlan(t *testing.T) {
	datadriven.RunTest(t, "testdata/plan", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "plan" {
			t.Fatalf("unknown command %q", d.Cmd)
		}
		var replace string
		d.ScanArgs(t, "replace", &replace)
		lines := strings.Split(strings.TrimSpace(d.Input), "\n")
		var state, quorum, last string
		if _, err := fmt.Sscanf(lines[0], "%s %s last=%s", &state, &quorum, &last); err != nil {
			t.Fatalf("%q: %v", lines[0], err)
		}
		md := &ledger.Metadata{State: ledger.State(state), LastEntry: -1}
		if _, err := fmt.Sscanf(quorum, "%d/%d/%d", &md.EnsembleSize, &md.WriteQuorum, &md.AckQuorum); err != nil {
			t.Fatal(err)
		}
		if last != "-" {
			md.LastEntry, _ = strconv.ParseInt(last, 10, 64)
		}
		for _, l := range lines[1:] {
			first, ens, _ := strings.Cut(l, ":")
			f, _ := strconv.ParseInt(strings.TrimSpace(first), 10, 64)
			md.Fragments = append(md.Fragments, ledger.Fragment{FirstEntry: f, Ensemble: strings.Fields(ens)})
		}
		repairs, waiting := plan(md, strings.Split(replace, ","))
		var out strings.Builder
		for _, r := range repairs {
			first, lastE, _ := md.FragmentEntries(r.Fragment)
			n := 0
			for e := first; e <= lastE; e++ {
				if md.Quorum().Stores(e, r.Slot) {
					n++
				}
			}
			fmt.Fprintf(&out, "fragment %d (entries %d..%d) slot %d: replace %s, copy %d entries\n", r.Fragment, first, lastE, r.Slot, r.Bookie, n)
		}
		if waiting {
			out.WriteString("waiting: a fragment that is not final names a bookie to replace\n")
		}
		if out.Len() == 0 {
			return "nothing\n"
		}
		return out.String()
	})
}
