package autorecovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// The auditor. One process per region leads the election at
// bkproto.AuditorElection under a lease of its own (ClaimTTL); candidates
// queue behind it, and the next takes over when its lease ends. While it
// leads, one goroutine (lead) owns the audit state: when each bookie was
// first seen gone. It audits when the bookie set changes, when an operator
// sets a bookie's state or pauses or resumes recovery, when a gone
// bookie's delay falls due, and every AuditInterval. A second goroutine
// runs the periodic check of sampled entries every CheckInterval.
//
// Two auditors at once are possible only for the moment a cut-off leader
// takes to notice its lease ended; both only write marks by CAS, merging
// bookie sets, so a stale auditor's audit is at worst a mark made early
// or made twice. A new auditor knows nothing of when bookies went: it
// starts each missing bookie's delay again, so a failover delays a repair
// by at most one delay, and never hastens one.

// campaignRetry paces campaigns after a failure (etcd unreachable).
const campaignRetry = time.Second

// campaignLoop campaigns for the auditor until the service closes, and
// audits while it leads.
func (s *Service) campaignLoop() {
	value, err := meta.EncodeJSON(1, struct {
		Worker string `json:"worker"`
	}{s.cfg.WorkerID})
	if err != nil {
		s.log.Error("encoding the auditor candidate", "err", err)
		return
	}
	for s.ctx.Err() == nil {
		s.m.electionAttempts.Inc()
		lease, err := s.store.Grant(s.ctx, s.cfg.ClaimTTL)
		var lead meta.Leadership
		if err == nil {
			lead, err = s.store.Campaign(s.ctx, bkproto.AuditorElection(s.cfg.Region), value, lease)
		}
		if err != nil {
			if lease != nil {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 2*time.Second)
				lease.Revoke(rctx)
				cancel()
			}
			if s.ctx.Err() == nil {
				s.log.Info("campaign for the auditor failed; retrying", "err", err)
			}
			sleep(s.ctx, s.cfg.Clock, campaignRetry)
			continue
		}
		s.log.Info("elected the region's auditor")
		s.lead(lead)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 2*time.Second)
		lead.Resign(rctx)
		lease.Revoke(rctx)
		cancel()
	}
}

// lead audits until leadership ends or the service closes.
func (s *Service) lead(lead meta.Leadership) {
	s.m.leading.Set(1)
	defer func() {
		s.m.leading.Set(0)
		s.m.underReplicated.Set(0)
		s.m.underReplicatedSize.Set(0)
		s.m.noGoodCopy.Set(0)
	}()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	go func() {
		select {
		case <-lead.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	stateChanged, marksChanged := make(chan struct{}, 1), make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for resp := range s.store.Watch(ctx, bkproto.AutoRecoveryPrefix(s.cfg.Region), 0) {
				if resp.Err != nil {
					break
				}
				for _, ev := range resp.Events {
					switch k := ev.KV.Key; {
					case k == bkproto.RecoveryDisabledKey(s.cfg.Region) || strings.HasPrefix(k, bkproto.BookieStatesPrefix(s.cfg.Region)):
						// Operators' states and the pause switch.
						poke(stateChanged)
					case strings.HasPrefix(k, bkproto.UnderReplicatedPrefix(s.cfg.Region)):
						// A worker's repair done or noted: the gauges
						// follow it at once rather than at the next audit.
						poke(marksChanged)
					}
				}
			}
			sleep(ctx, s.cfg.Clock, time.Second)
		}
	}()
	checks := make(chan struct{})
	if s.cfg.CheckInterval > 0 {
		go func() {
			defer close(checks)
			s.checkLoop(ctx)
		}()
	} else {
		close(checks)
	}
	defer func() {
		cancel()
		<-done
		<-checks
	}()

	a := &audit{missing: make(map[string]time.Time)}
	tick := s.cfg.Clock.NewTicker(s.cfg.AuditInterval)
	defer tick.Stop()
	due := s.cfg.Clock.NewTimer(time.Hour)
	due.Stop()
	for {
		dirChanged := s.lc.Directory().Changed()
		next, err := s.auditOnce(ctx, a)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("audit failed; retrying", "err", err)
			next = s.cfg.Clock.Now().Add(s.cfg.RetryInterval)
		}
		if !next.IsZero() {
			due.Reset(s.cfg.Clock.Until(next))
		}
	wait:
		for {
			select {
			case <-dirChanged:
			case <-stateChanged:
			case <-tick.Chan():
			case <-due.Chan():
			case <-marksChanged:
				if err := s.countMarks(ctx, a); err != nil && ctx.Err() == nil {
					s.log.Warn("counting the under-replicated ledgers failed", "err", err)
				}
				continue
			case <-ctx.Done():
				return
			}
			break wait
		}
		due.Stop()
	}
}

// audit is the state the auditor's owner loop keeps between audits.
type audit struct {
	// missing is when each bookie named by a ledger was first seen
	// unregistered; it goes when the bookie registers again.
	missing map[string]time.Time
	// marked are the bookies whose ledgers this auditor has marked, so
	// that a lost bookie is logged once, not at every audit.
	marked map[string]bool
	// sizes are the closed ledgers' lengths as the last audit listed
	// them, for the gauge of under-replicated bytes between audits.
	sizes map[int64]int64
}

// auditView is what one audit sees: the registered bookies, the
// operators' states, and which ledgers name each bookie.
type auditView struct {
	live   map[string]bool
	states map[string]string
	named  map[string][]int64
}

// decide says, from what an audit sees, which bookies' ledgers must be
// marked now and why. A bookie an operator marked lost or decommissioning
// is replaced at once. One that ledgers name but that is not registered
// waits delay from when it was first seen gone (missing records that, and
// forgets bookies registered again). It returns when the first waiting
// bookie falls due (zero: none waits), and the bookies that started
// waiting and that came back within their delay, for metrics and logs.
func decide(v auditView, missing map[string]time.Time, now time.Time, delay time.Duration) (replace map[string]string, next time.Time, delayed, back []string) {
	replace = make(map[string]string)
	for b, st := range v.states {
		switch st {
		case bkproto.StateLost:
			replace[b] = "bookie " + b + " marked lost by an operator"
		case bkproto.StateDecommissioning:
			replace[b] = "bookie " + b + " is being decommissioned"
		}
	}
	for _, b := range slices.Sorted(maps.Keys(missing)) {
		if v.live[b] {
			delete(missing, b)
			back = append(back, b)
		}
	}
	for _, b := range slices.Sorted(maps.Keys(v.named)) {
		if v.live[b] || replace[b] != "" {
			continue
		}
		since, ok := missing[b]
		if !ok {
			since = now
			missing[b] = now
			delayed = append(delayed, b)
		}
		switch at := since.Add(delay); {
		case !now.Before(at):
			replace[b] = fmt.Sprintf("bookie %s lost: unregistered since %s", b, since.UTC().Format(time.RFC3339))
		case next.IsZero() || at.Before(next):
			next = at
		}
	}
	// A bookie no ledger names any more needs nothing, gone or not.
	for b := range missing {
		if _, ok := v.named[b]; !ok {
			delete(missing, b)
		}
	}
	return replace, next, delayed, back
}

// auditOnce compares every ledger's ensembles with the registered bookies
// and the operators' states, marks the ledgers of the bookies to replace,
// deletes the marks of ledgers that are gone, and sets the gauges. It
// returns when the next delayed bookie falls due.
func (s *Service) auditOnce(ctx context.Context, a *audit) (time.Time, error) {
	now, start := s.cfg.Clock.Now(), time.Now() // start times the audit metric only
	defer func() { s.m.auditTime.Observe(time.Since(start).Seconds()) }()
	paused, err := s.paused(ctx)
	if err != nil {
		return time.Time{}, err
	}
	ledgers, bad, err := s.lc.Ledgers(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if bad > 0 {
		s.log.Warn("ledgers whose metadata cannot be read are not audited", "count", bad)
	}
	states, err := BookieStates(ctx, s.store, s.cfg.Region)
	if err != nil {
		return time.Time{}, err
	}
	v := auditView{live: make(map[string]bool), states: states, named: make(map[string][]int64)}
	for _, b := range s.lc.Directory().Snapshot() {
		v.live[b.ID] = true
	}
	byID := make(map[int64]ledger.Snapshot, len(ledgers))
	for _, l := range ledgers {
		byID[l.Metadata.ID] = l
		for _, b := range members(l.Metadata) {
			v.named[b] = append(v.named[b], l.Metadata.ID)
		}
	}
	replace, next, delayed, back := decide(v, a.missing, now, s.cfg.LostBookieRecoveryDelay)
	for _, b := range delayed {
		s.m.auditsDelayed.Inc()
		s.log.Warn("bookie gone: its ledgers are marked under-replicated unless it returns within the delay",
			"bookie", b, "ledgers", len(v.named[b]), "delay", s.cfg.LostBookieRecoveryDelay)
	}
	for _, b := range back {
		s.m.auditsCancelled.Inc()
		s.log.Info("bookie back within the recovery delay: nothing to copy", "bookie", b)
	}
	if paused {
		if len(replace) > 0 {
			s.log.Info("recovery is paused: not marking", "bookies", slices.Sorted(maps.Keys(replace)))
		}
	} else {
		if a.marked == nil {
			a.marked = make(map[string]bool)
		}
		for _, b := range slices.Sorted(maps.Keys(replace)) {
			n := 0
			for _, id := range v.named[b] {
				changed, err := markLedger(ctx, s.store, s.cfg.Region, id, []string{b}, replace[b], start)
				if err != nil {
					return time.Time{}, fmt.Errorf("mark ledger %d under-replicated: %w", id, err)
				}
				if changed {
					n++
				}
			}
			if n > 0 || !a.marked[b] {
				s.log.Warn("marked ledgers under-replicated", "bookie", b, "ledgers", n, "reason", replace[b])
			}
			a.marked[b] = true
		}
		for b := range a.marked {
			if replace[b] == "" {
				delete(a.marked, b)
			}
		}
	}
	a.sizes = make(map[int64]int64, len(ledgers))
	for _, l := range ledgers {
		if l.Metadata.State == ledger.StateClosed && l.Metadata.Length > 0 {
			a.sizes[l.Metadata.ID] = l.Metadata.Length
		}
	}
	marks, err := listMarks(ctx, s.store, s.cfg.Region)
	if err != nil {
		return time.Time{}, err
	}
	for _, sm := range marks {
		if _, ok := byID[sm.Ledger]; !ok {
			// The ledger was deleted: nothing is left to repair. A
			// ledger created after the listing has no mark yet.
			if err := s.store.Delete(ctx, bkproto.UnderReplicatedKey(s.cfg.Region, sm.Ledger), sm.Revision); err != nil && !errors.Is(err, meta.ErrConflict) {
				return time.Time{}, err
			}
		}
	}
	return next, s.countMarks(ctx, a)
}

// countMarks sets the gauges of under-replicated ledgers from the marks
// as they are now, sized by the last audit's listing.
func (s *Service) countMarks(ctx context.Context, a *audit) error {
	marks, err := listMarks(ctx, s.store, s.cfg.Region)
	if err != nil {
		return err
	}
	var size int64
	lost := 0
	for _, sm := range marks {
		size += a.sizes[sm.Ledger]
		if sm.Mark.EntryLost {
			lost++
		}
	}
	s.m.underReplicated.Set(float64(len(marks)))
	s.m.underReplicatedSize.Set(float64(size))
	s.m.noGoodCopy.Set(float64(lost))
	return nil
}

// members returns every bookie a ledger's fragments name.
func members(md *ledger.Metadata) []string {
	var out []string
	for _, f := range md.Fragments {
		for _, b := range f.Ensemble {
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out
}

// BookieStates returns the operators' states of region's bookies
// (bkproto.BookieState), by bookie id.
func BookieStates(ctx context.Context, store meta.Store, region string) (map[string]string, error) {
	prefix := bkproto.BookieStatesPrefix(region)
	kvs, _, err := store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list bookie states: %w", err)
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		id, err := meta.Name(kv.Key)
		if err != nil {
			continue
		}
		st, err := bkproto.ParseBookieState(kv.Value)
		if err != nil {
			continue
		}
		out[id] = st.State
	}
	return out, nil
}

// checkLoop runs check every CheckInterval until ctx ends.
func (s *Service) checkLoop(ctx context.Context) {
	t := s.cfg.Clock.NewTicker(s.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-t.Chan():
		case <-ctx.Done():
			return
		}
		if err := s.check(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("periodic check of entries failed", "err", err)
		}
	}
}

// check reads CheckSampleRate of every final fragment's entries (at least
// one each) from every member of their write sets, and marks the ledgers
// whose registered members lack or hold damaged a sampled entry. The
// copies of unregistered bookies are the audit's business.
func (s *Service) check(ctx context.Context) error {
	start := time.Now()
	defer func() { s.m.checkTime.Observe(time.Since(start).Seconds()) }()
	if p, err := s.paused(ctx); err != nil || p {
		return err
	}
	ledgers, _, err := s.lc.Ledgers(ctx)
	if err != nil {
		return err
	}
	live := make(map[string]bool)
	for _, b := range s.lc.Directory().Snapshot() {
		live[b.ID] = true
	}
	for _, l := range ledgers {
		md := l.Metadata
		if md.State == ledger.StateInRecovery {
			continue
		}
		var sample []int64
		for i := range md.Fragments {
			first, last, final := md.FragmentEntries(i)
			if !final || last < first {
				continue
			}
			sample = append(sample, s.sampleRange(first, last)...)
		}
		if len(sample) == 0 {
			continue
		}
		missing, err := s.lc.CheckCopies(ctx, md, sample)
		if err != nil {
			return err
		}
		s.m.ledgersChecked.Inc()
		var lacking []string
		for _, mc := range missing {
			if live[mc.Bookie] && !slices.Contains(lacking, mc.Bookie) {
				lacking = append(lacking, mc.Bookie)
			}
		}
		if len(lacking) == 0 {
			continue
		}
		reason := fmt.Sprintf("the periodic check found copies missing or damaged on %v (first: entry %d on %s)", lacking, missing[0].Entry, missing[0].Bookie)
		if _, err := markLedger(ctx, s.store, s.cfg.Region, md.ID, lacking, reason, start); err != nil {
			return err
		}
		s.log.Warn("marked a ledger under-replicated", "ledger", md.ID, "reason", reason)
	}
	return nil
}

// sampleRange picks ceil(CheckSampleRate × n) distinct entries of
// first..last, at least one, sorted.
func (s *Service) sampleRange(first, last int64) []int64 {
	n := last - first + 1
	k := int64(math.Ceil(s.cfg.CheckSampleRate * float64(n)))
	k = min(max(k, 1), n)
	if 2*k > n {
		// Drawing most of a range one by one costs more than taking it.
		out := make([]int64, 0, n)
		for e := first; e <= last; e++ {
			out = append(out, e)
		}
		return out
	}
	picked := make(map[int64]bool, k)
	for int64(len(picked)) < k {
		picked[first+int64(s.intn(int(min(n, math.MaxInt32))))] = true
	}
	return slices.Sorted(maps.Keys(picked))
}
