package loadmgr

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// The shedder runs on the region's leader every SheddingInterval. It reads
// the brokers' load reports and plans bundle moves by two rules, then asks
// each bundle's owner to hand it over (requestUnload).
//
// Load. A broker's load is, in the spirit of Pulsar's ThresholdShedder,
// its highest usage over three resources, each measured as the broker's
// share of the region's total: message rate (in plus out), message
// throughput (bytes in plus out) and process CPU time. Shares, not
// absolute usage, because Meridian knows no capacity for a broker: brokers
// sharing a host have no limit of their own. A bundle's usage of rate and
// throughput is in its LastStats; its CPU is the broker's CPU apportioned
// by message rate, the work it causes.
//
//  1. A broker that owns no bundle (it just joined, or restarted) receives
//     bundles until it has the region's bundles divided by its brokers,
//     each taken from the broker that has the most at that point, whatever
//     their throughput: so a broker added to a running region serves within
//     one interval.
//  2. A broker whose load is above the region's average by more than
//     SheddingThreshold percentage points sheds bundles worth its excess
//     over the average in its dominant resource, each to the broker that
//     is least loaded at that point, busiest bundle first. A bundle worth
//     more than what is left to shed is skipped (moving it would only move
//     the overload), and so is a move that would leave the destination
//     more loaded than the source.
//
// Under both rules a broker keeps its busiest bundle (so never loses its
// last), a bundle moved within SheddingGracePeriod stays where it is (no
// ping-pong), and rule 2 moves only bundles of at least
// MinSheddingThroughput. Draining brokers take no part, and brokers that
// have not reported yet are left out. After a round that moved bundles,
// the next one waits until every broker has reported twice since the moves
// ended (the first report may cover part of the moves), so that it judges
// the new placement, not the old. Each broker's reports are compared with
// its own earlier ones, never with the leader's clock, so clock skew
// between hosts does not matter; a broker that stops reporting while its
// lease lives holds shedding until it reports again or its lease ends.

// bundleMove is one planned move.
type bundleMove struct {
	Bundle   string // bundleKeyName
	From, To string // broker ids
}

// shedder is the leader's shedding state: the bundles it moved and when.
// Only the leader's loop uses it; a new leader starts with none.
type shedder struct {
	cfg   BalanceConfig
	now   func() time.Time
	moved map[string]time.Time // bundle → when it was moved
	// settled holds, after a round that moved bundles, each broker's
	// report time (its LastUpdate) as read once the moves ended.
	settled map[string]int64
}

func newShedder(cfg BalanceConfig, now func() time.Time) *shedder {
	return &shedder{cfg: cfg, now: now, moved: map[string]time.Time{}}
}

// The resources a load is measured in.
const (
	resRate = iota
	resThroughput
	resCPU
	numResources
)

type usage [numResources]float64

func (u *usage) add(v usage, sign float64) {
	for i := range u {
		u[i] += sign * v[i]
	}
}

// shedBroker is one broker as the plan sees it, updated as moves are
// planned.
type shedBroker struct {
	id      string
	bundles map[string]usage
	base    usage // CPU not attributed to any bundle (a broker with no traffic)
}

func (b *shedBroker) total() usage {
	t := b.base
	for _, u := range b.bundles {
		t.add(u, 1)
	}
	return t
}

// load is the broker's highest share of the region's totals, and the
// resource it is in.
func (b *shedBroker) load(totals usage) (float64, int) {
	t := b.total()
	best, res := 0.0, resRate
	for i := range t {
		if totals[i] > 0 && t[i]/totals[i] > best {
			best, res = t[i]/totals[i], i
		}
	}
	return best, res
}

// busiest returns the broker's bundle with the highest usage of res (ties
// by name), which the broker keeps.
func (b *shedBroker) busiest(res int) string {
	var top string
	for name, u := range b.bundles {
		if top == "" || u[res] > b.bundles[top][res] || (u[res] == b.bundles[top][res] && name < top) {
			top = name
		}
	}
	return top
}

// plan returns the moves for one round over brokers' records, and
// remembers them as moved now.
func (sh *shedder) plan(brokers []LiveBroker) []bundleMove {
	now := sh.now()
	for b, at := range sh.moved {
		if now.Sub(at) >= sh.cfg.SheddingGracePeriod {
			delete(sh.moved, b)
		}
	}
	var bs []*shedBroker
	for _, lb := range brokers {
		if lb.Draining || lb.Load == nil {
			continue
		}
		if at, ok := sh.settled[lb.BrokerID]; ok && lb.Load.LastUpdate <= at+sh.cfg.ReportInterval.Milliseconds() {
			return nil // not yet two reports since the last moves
		}
		bs = append(bs, newShedBroker(lb.BrokerID, lb.Load))
	}
	if len(bs) < 2 {
		return nil
	}
	var totals usage
	nBundles := 0
	for _, b := range bs {
		totals.add(b.total(), 1)
		nBundles += len(b.bundles)
	}
	var moves []bundleMove
	move := func(from, to *shedBroker, name string) {
		u := from.bundles[name]
		delete(from.bundles, name)
		to.bundles[name] = u
		sh.moved[name] = now
		moves = append(moves, bundleMove{Bundle: name, From: from.id, To: to.id})
	}
	// movable lists from's bundles that may move, busiest in res first.
	movable := func(from *shedBroker, res int, minThroughput float64) []string {
		keep := from.busiest(res)
		var names []string
		for name, u := range from.bundles {
			if _, recent := sh.moved[name]; !recent && name != keep && u[resThroughput] >= minThroughput {
				names = append(names, name)
			}
		}
		slices.SortFunc(names, func(a, b string) int {
			return cmp.Or(cmp.Compare(from.bundles[b][res], from.bundles[a][res]), cmp.Compare(a, b))
		})
		return names
	}

	// Rule 1: brokers with no bundles get their share.
	share := nBundles / len(bs)
	for _, empty := range bs {
		if len(empty.bundles) > 0 {
			continue
		}
		for len(empty.bundles) < share {
			var donor *shedBroker
			var names []string
			for _, b := range bs {
				if b == empty || (donor != nil && len(b.bundles) <= len(donor.bundles)) {
					continue
				}
				if n := movable(b, resThroughput, 0); len(n) > 0 {
					donor, names = b, n
				}
			}
			if donor == nil || len(donor.bundles) <= len(empty.bundles)+1 {
				break
			}
			move(donor, empty, names[0])
		}
	}

	// Rule 2: brokers over the average by more than the threshold shed.
	loadOf := func(b *shedBroker) float64 { l, _ := b.load(totals); return l }
	avg := 0.0
	for _, b := range bs {
		avg += loadOf(b)
	}
	avg /= float64(len(bs))
	over := slices.Clone(bs)
	slices.SortFunc(over, func(a, b *shedBroker) int { return cmp.Compare(loadOf(b), loadOf(a)) })
	for _, src := range over {
		l, res := src.load(totals)
		if l <= avg+sh.cfg.SheddingThreshold/100 {
			continue
		}
		remaining := (l - avg) * totals[res]
		for _, name := range movable(src, res, sh.cfg.MinSheddingThroughput) {
			w := src.bundles[name][res]
			if w <= 0 || w > remaining {
				continue
			}
			dst := leastLoaded(bs, src, totals)
			if dst == nil {
				break
			}
			srcAfter := loadOf(src) - w/totals[res]
			dstAfter := dst.total()[res]/totals[res] + w/totals[res]
			if dstAfter >= srcAfter {
				continue
			}
			move(src, dst, name)
			remaining -= w
		}
	}
	return moves
}

// leastLoaded returns the least-loaded broker other than not. Ties on
// load (brokers sharing a host report the same process CPU, so their CPU
// shares are equal) go to the lower sum of shares, then to fewer bundles,
// then to the lower id.
func leastLoaded(bs []*shedBroker, not *shedBroker, totals usage) *shedBroker {
	var best *shedBroker
	for _, b := range bs {
		if b != not && (best == nil || b.compareLoad(best, totals) < 0) {
			best = b
		}
	}
	return best
}

func (b *shedBroker) compareLoad(o *shedBroker, totals usage) int {
	lb, _ := b.load(totals)
	lo, _ := o.load(totals)
	return cmp.Or(cmp.Compare(lb, lo), cmp.Compare(b.shareSum(totals), o.shareSum(totals)),
		cmp.Compare(len(b.bundles), len(o.bundles)), cmp.Compare(b.id, o.id))
}

// shareSum is the sum of the broker's shares of the region's totals.
func (b *shedBroker) shareSum(totals usage) float64 {
	t := b.total()
	sum := 0.0
	for i := range t {
		if totals[i] > 0 {
			sum += t[i] / totals[i]
		}
	}
	return sum
}

// newShedBroker builds the plan's view of one broker from its report.
func newShedBroker(id string, r *LoadReport) *shedBroker {
	b := &shedBroker{id: id, bundles: make(map[string]usage, len(r.Bundles))}
	rate := r.MsgRateIn + r.MsgRateOut
	for _, name := range r.Bundles {
		st := r.LastStats[name]
		u := usage{resRate: st.MsgRateIn + st.MsgRateOut, resThroughput: st.MsgThroughputIn + st.MsgThroughputOut}
		if rate > 0 {
			u[resCPU] = r.CPU.Usage * u[resRate] / rate
		}
		b.bundles[name] = u
	}
	if rate <= 0 {
		b.base[resCPU] = r.CPU.Usage
	}
	return b
}

// finished records the end of a round that moved bundles, with the
// brokers' records as read after the moves.
func (sh *shedder) finished(brokers []LiveBroker) {
	sh.settled = make(map[string]int64, len(brokers))
	for _, lb := range brokers {
		if lb.Load != nil {
			sh.settled[lb.BrokerID] = lb.Load.LastUpdate
		}
	}
}

// shedOnce plans one round over the brokers' records and asks each moved
// bundle's owner to hand it over (requestUnload), one at a time; it stops
// when leadership is lost. A round is bounded by SheddingInterval, and at
// least TopicLoadTimeout, since a hand-off fences and closes topics.
func (m *Manager) shedOnce(lost <-chan struct{}, sh *shedder) {
	ctx, cancel := context.WithTimeout(m.ctx, max(m.cfg.LoadBalance.SheddingInterval, m.cfg.TopicLoadTimeout))
	defer cancel()
	brokers, err := m.Brokers(ctx)
	if err != nil {
		m.log.Warn("shedding: reading the brokers' load reports", "err", err)
		return
	}
	moves := sh.plan(brokers)
	if len(moves) == 0 {
		return
	}
	// The round's successful moves, and the brokers they left, for
	// pulsar_lb_unload_*_total.
	shedBundles, shedFrom := 0, map[string]bool{}
	defer func() { m.metrics.shed(shedBundles, len(shedFrom)) }()
	for _, mv := range moves {
		select {
		case <-lost:
			return
		default:
		}
		tenant, ns, b, err := parseBundleName(mv.Bundle)
		if err != nil {
			continue
		}
		if err := m.requestUnload(ctx, tenant, ns, b, mv.To); err != nil {
			m.metrics.balanced(balanceShedFailed)
			m.log.Warn("shedding a bundle", "bundle", mv.Bundle, "from", mv.From, "to", mv.To, "err", err)
			continue
		}
		m.metrics.balanced(balanceShed)
		shedBundles++
		shedFrom[mv.From] = true
		m.log.Info("shed bundle", "bundle", mv.Bundle, "from", mv.From, "to", mv.To)
	}
	if after, err := m.Brokers(ctx); err == nil {
		brokers = after
	}
	sh.finished(brokers)
}
