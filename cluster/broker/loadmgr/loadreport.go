package loadmgr

import (
	"context"
	"fmt"
	"math"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Load reports. Every ReportInterval the broker samples its loaded topics'
// message counters and its own process, turns the differences since the
// last sample into rates, and writes the result into its registration
// (updateRecord), where the leader's shedder and every broker's placement
// read it. The report's shape is Pulsar's LocalBrokerData (registry.go).
//
// Rates are over the interval between two samples: a topic loaded in
// between counts from zero (its counters start at zero when it loads), and
// a counter that went down (the topic was reloaded) counts from zero too.
// CPU is this process's user and system time over the interval, in percent
// of one core, and memory its Go heap: brokers that share a host would
// otherwise all report the host's figures.

// loadState is the Manager's load-report state. The load loop owns the
// sampling fields; mu guards the last report, which the admin API reads.
type loadState struct {
	// owned by the load loop
	at      time.Time           // when the last sample was taken
	cpu     time.Duration       // the process's CPU time then
	topics  map[string]Counters // by topic, as of the last sample
	bundles []string            // the bundles owned at the last report

	mu struct {
		sync.Mutex
		report *LoadReport // nil before the first
	}
}

// rates returns the rates from prev to c over dt; a counter below its
// previous value (a reloaded topic) counts from zero.
func (c Counters) rates(prev Counters, dt time.Duration) (rateIn, tpIn, rateOut, tpOut float64) {
	per := func(cur, old int64) float64 {
		if old > cur {
			old = 0
		}
		return float64(cur-old) / dt.Seconds()
	}
	return per(c.InMsgs, prev.InMsgs), per(c.InBytes, prev.InBytes), per(c.OutMsgs, prev.OutMsgs), per(c.OutBytes, prev.OutBytes)
}

// bundleKeyName is the name of a bundle in a load report's LastStats and
// Bundles: "<tenant>/<namespace>/<range>", as Pulsar names it.
func bundleKeyName(tenant, ns string, b topology.Bundle) string {
	return tenant + "/" + ns + "/" + b.String()
}

// parseBundleName is bundleKeyName's inverse.
func parseBundleName(name string) (tenant, ns string, b topology.Bundle, err error) {
	parts := strings.Split(name, "/")
	if len(parts) != 3 {
		return "", "", b, fmt.Errorf("%w: bundle name %q, want tenant/namespace/range", topology.ErrInvalidBundle, name)
	}
	b, err = topology.ParseBundle(parts[2])
	return parts[0], parts[1], b, err
}

// ownedBundles returns the bundles this broker holds under its current
// lease, by bundleKeyName, sorted; none while it holds no lease.
func (o *ownership) ownedBundles(ctx context.Context) ([]string, error) {
	if o.liveLeaseID() == meta.NoLease {
		return nil, nil
	}
	kvs, _, err := o.store.List(ctx, o.ownersPrefix())
	if err != nil {
		return nil, fmt.Errorf("list the owners of region %s: %w", o.region, err)
	}
	var out []string
	for _, kv := range kvs {
		if _, mine := o.ownedBy(kv); !mine {
			continue
		}
		if tenant, ns, b, err := o.parseBundleKey(kv.Key); err == nil {
			out = append(out, bundleKeyName(tenant, ns, b))
		}
	}
	slices.Sort(out)
	return out, nil
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapUsage is the Go heap in use and the memory limit (GOMEMLIMIT), in
// MiB; the limit is 0 when none is set.
func heapUsage() ResourceUsage {
	samples := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/gomemlimit:bytes"}}
	rtmetrics.Read(samples)
	var u ResourceUsage
	if samples[0].Value.Kind() == rtmetrics.KindUint64 {
		u.Usage = float64(samples[0].Value.Uint64()) / (1 << 20)
	}
	if samples[1].Value.Kind() == rtmetrics.KindUint64 {
		if lim := samples[1].Value.Uint64(); lim < math.MaxInt64 {
			u.Limit = float64(lim) / (1 << 20)
		}
	}
	return u
}

// makeLoadReport samples the broker and returns its report, advancing the
// sampling window to now. Only the load loop calls it.
func (m *Manager) makeLoadReport(ctx context.Context, now time.Time) (LoadReport, error) {
	owned, err := m.own.ownedBundles(ctx)
	if err != nil {
		return LoadReport{}, err
	}
	st := &m.loadState
	self := m.own.self
	r := LoadReport{
		WebServiceURL: self.WebURL, PulsarServiceURL: self.ServiceURL, PulsarServiceURLTLS: self.ServiceURLTLS,
		PersistentTopicsEnabled: true, NonPersistentTopicsEnabled: true,
		LastUpdate: now.UnixMilli(),
		LastStats:  make(map[string]BundleStats, len(owned)),
		Bundles:    owned,
		NumBundles: len(owned),
		Memory:     heapUsage(),
	}
	if r.Bundles == nil {
		r.Bundles = []string{}
	}
	if strings.HasPrefix(self.WebURL, "https://") {
		r.WebServiceURL, r.WebServiceURLTLS = "", self.WebURL
	}
	for _, b := range owned {
		r.LastStats[b] = BundleStats{}
	}
	r.LastBundleGains, r.LastBundleLosses = diffSorted(st.bundles, owned)
	st.bundles = owned

	cpu := processCPU()
	dt := now.Sub(st.at)
	first := st.at.IsZero() || dt <= 0
	if !first {
		r.CPU.Usage = 100 * float64(cpu-st.cpu) / float64(dt)
	}
	r.CPU.Limit = 100 * float64(runtime.NumCPU())
	st.at, st.cpu = now, cpu

	sample := m.topics.Sample()
	seen := make(map[string]Counters, len(sample.Topics))
	for _, ts := range sample.Topics {
		seen[ts.Name.String()] = ts.Counters
		r.NumTopics++
		r.NumProducers += ts.Producers
		r.NumConsumers += ts.Consumers
		eff, err := m.policies.Resolve(ts.Name, global.BrokerDefaults{})
		if err != nil {
			continue // its policies went away: it unloads
		}
		b, err := BundleOf(ts.Name, eff)
		if err != nil {
			continue
		}
		name := bundleKeyName(ts.Name.Tenant, ts.Name.Namespace, b)
		bs := r.LastStats[name]
		bs.TopicsCount++
		bs.ProducerCount += ts.Producers
		bs.ConsumerCount += ts.Consumers
		if !first {
			rateIn, tpIn, rateOut, tpOut := ts.Counters.rates(st.topics[ts.Name.String()], dt)
			bs.MsgRateIn += rateIn
			bs.MsgThroughputIn += tpIn
			bs.MsgRateOut += rateOut
			bs.MsgThroughputOut += tpOut
		}
		r.LastStats[name] = bs
	}
	st.topics = seen
	for _, bs := range r.LastStats {
		r.MsgRateIn += bs.MsgRateIn
		r.MsgThroughputIn += bs.MsgThroughputIn
		r.MsgRateOut += bs.MsgRateOut
		r.MsgThroughputOut += bs.MsgThroughputOut
	}
	// Bandwidth is the broker's own message traffic in kbit/s, as Pulsar
	// reports NIC usage, with no known limit.
	r.BandwidthIn.Usage = r.MsgThroughputIn * 8 / 1000
	r.BandwidthOut.Usage = r.MsgThroughputOut * 8 / 1000
	r.Connections = sample.Connections
	return r, nil
}

// diffSorted returns what next has that prev has not (gains) and the
// other way round (losses); both inputs are sorted.
func diffSorted(prev, next []string) (gains, losses []string) {
	gains, losses = []string{}, []string{}
	for _, b := range next {
		if _, found := slices.BinarySearch(prev, b); !found {
			gains = append(gains, b)
		}
	}
	for _, b := range prev {
		if _, found := slices.BinarySearch(next, b); !found {
			losses = append(losses, b)
		}
	}
	return gains, losses
}

// publishLoadReport makes a report, keeps it for LoadReport and writes it
// into the broker's registration.
func (m *Manager) publishLoadReport(ctx context.Context) (LoadReport, error) {
	r, err := m.makeLoadReport(ctx, m.cfg.Clock.Now())
	if err != nil {
		return LoadReport{}, err
	}
	m.loadState.mu.Lock()
	m.loadState.mu.report = &r
	m.loadState.mu.Unlock()
	err = m.own.updateRecord(ctx, func(rec *BrokerRecord) {
		rec.Load = &r
	})
	return r, err
}

// LoadReport returns the broker's latest load report (pulsar-admin's
// broker-stats load-report); ok is false before the first.
func (m *Manager) LoadReport() (r LoadReport, ok bool) {
	m.loadState.mu.Lock()
	defer m.loadState.mu.Unlock()
	if m.loadState.mu.report == nil {
		return LoadReport{}, false
	}
	return *m.loadState.mu.report, true
}

// reportTimeout is the least time a report may take to make and write.
const reportTimeout = 5 * time.Second

// loadLoop publishes a load report every ReportInterval, the first at
// once, and after each checks the owned bundles for a split.
func (m *Manager) loadLoop() {
	cfg := m.cfg.LoadBalance
	tick := m.cfg.Clock.NewTicker(cfg.ReportInterval)
	defer tick.Stop()
	for {
		// At least reportTimeout: a write cut short on a loaded etcd only
		// delays the next report.
		ctx, cancel := context.WithTimeout(m.ctx, max(cfg.ReportInterval, reportTimeout))
		r, err := m.publishLoadReport(ctx)
		if err != nil {
			m.log.Warn("publishing the load report", "err", err)
		}
		cancel()
		if err == nil && cfg.AutoBundleSplit {
			m.splitHotBundles(r)
		}
		select {
		case <-tick.Chan():
		case <-m.ctx.Done():
			return
		}
	}
}
