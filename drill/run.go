package drill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

// Env is what a drill runs against and reports to.
type Env struct {
	Admin     Admin
	NewClient ClientFactory
	// Out receives the progress and the summary; Terminal makes the
	// progress one line rewritten in place.
	Out      io.Writer
	Terminal bool
	// Interrupts are SIGINT and SIGTERM: the first restores the region
	// and fails back, the second calls Exit at once (after saying what is
	// still cut).
	Interrupts <-chan os.Signal
	Exit       func(code int)
}

// Plan is a drill checked against the cluster, before it touches it.
type Plan struct {
	Config
	Tenant, NS string
	// Regions are the namespace's replication clusters.
	Regions []string
	// Auto leaves the switch to the namespace's automatic failover.
	Auto        bool
	Fallback    []string // the namespace's fallback list (Auto)
	ServiceURLs map[string]string
	Addresses   addresses
}

// MakePlan validates cfg and checks it against the cluster: the regions
// exist, the namespace exists and replicates to both. Nothing is written.
func MakePlan(ctx context.Context, cfg Config, admin Admin) (Plan, error) {
	if err := cfg.Validate(); err != nil {
		return Plan{}, err
	}
	p := Plan{Config: cfg, ServiceURLs: map[string]string{}, Addresses: addresses{}}
	p.Tenant, p.NS = cfg.tenantNamespace()
	clusters, err := admin.Clusters(ctx)
	if err != nil {
		return p, fmt.Errorf("reading the regions through the admin URL: %w", err)
	}
	for _, r := range []string{cfg.Lose, cfg.To} {
		if r != "" && !slices.Contains(clusters, r) {
			return p, fmt.Errorf("%w: unknown region %s: the regions are %s", ErrInvalidConfig, r, strings.Join(clusters, ", "))
		}
	}
	ns, err := admin.Namespace(ctx, cfg.Namespace)
	if errors.Is(err, ErrNotFound) {
		return p, fmt.Errorf("%w: namespace %s does not exist", ErrInvalidConfig, cfg.Namespace)
	}
	if err != nil {
		return p, fmt.Errorf("reading namespace %s: %w", cfg.Namespace, err)
	}
	p.Regions = ns.ReplicationClusters
	if !slices.Contains(p.Regions, cfg.Lose) {
		return p, fmt.Errorf("%w: namespace %s does not replicate to %s (its replication clusters: %v)", ErrInvalidConfig, cfg.Namespace, cfg.Lose, p.Regions)
	}
	p.Auto = cfg.Cut == CutCommand && cfg.Mode == Unplanned && cfg.To == "" && ns.AutoFailover
	if p.Auto {
		if ns.Active.ActiveRegion != cfg.Lose {
			return p, fmt.Errorf("%w: automatic failover of %s moves its active region, which is %q, not %s: lose the active region, or give --to",
				ErrInvalidConfig, cfg.Namespace, ns.Active.ActiveRegion, cfg.Lose)
		}
		p.Fallback = ns.Active.FallbackRegions
		p.To = p.Fallback[0]
	}
	if p.To == "" {
		p.To = nextRegion(p.Regions, ns.Active, cfg.Lose)
	}
	if p.To == "" || !slices.Contains(p.Regions, p.To) {
		return p, fmt.Errorf("%w: namespace %s does not replicate to both %s and another region (--to %q; its replication clusters: %v)",
			ErrInvalidConfig, cfg.Namespace, cfg.Lose, p.To, p.Regions)
	}
	adminURLs := map[string]string{}
	for _, r := range p.Regions {
		rec, err := admin.Cluster(ctx, r)
		if err != nil {
			return p, fmt.Errorf("reading region %s's record: %w", r, err)
		}
		p.ServiceURLs[r], adminURLs[r] = rec.BrokerServiceURL, rec.ServiceURL
		if u := cfg.ServiceURLs[r]; u != "" {
			p.ServiceURLs[r] = u
		}
		if u := cfg.AdminURLs[r]; u != "" {
			adminURLs[r] = u
		}
		if p.ServiceURLs[r] == "" {
			return p, fmt.Errorf("%w: region %s's record has no broker service URL: give --service-url-of %s=pulsar://host:port", ErrInvalidConfig, r, r)
		}
		p.Addresses.addRegion(ctx, r, p.ServiceURLs[r])
	}
	if h, ok := admin.(*HTTPAdmin); ok {
		h.AdminURLs = adminURLs
	}
	return p, nil
}

// nextRegion is the first fallback of the namespace's active region
// other than lose, else the replication cluster after lose.
func nextRegion(regions []string, active ActiveRegion, lose string) string {
	for _, r := range active.FallbackRegions {
		if r != lose {
			return r
		}
	}
	i := slices.Index(regions, lose)
	if i < 0 || len(regions) < 2 {
		return ""
	}
	return regions[(i+1)%len(regions)]
}

// serviceURL lists the brokers of every region, lose's first.
func (p Plan) serviceURL() string {
	var hosts []string
	scheme := "pulsar://"
	for _, r := range append([]string{p.Lose}, slices.DeleteFunc(slices.Clone(p.Regions), func(r string) bool { return r == p.Lose })...) {
		u := p.ServiceURLs[r]
		if i := strings.Index(u, "://"); i >= 0 {
			scheme, u = u[:i+3], u[i+3:]
		}
		hosts = append(hosts, strings.Split(strings.TrimSuffix(u, "/"), ",")...)
	}
	return scheme + strings.Join(hosts, ",")
}

// stateSyncWait is two replicated-subscription sync intervals (broker.conf
// replicatedSubscriptionsSnapshotFrequencyMillis, 1s by default).
// Measured on meridian dev: failing back as soon as replication had caught
// up redelivered the whole outage's traffic in the restored region (its
// subscription's state had been applied before the entries arrived);
// after two intervals, at most one interval of acks.
const stateSyncWait = 2 * time.Second

// catchUpSlack is how old the oldest entry still to replicate into the
// restored region may be for replication to count as caught up: the
// stats give its age in whole seconds, so up to two seconds of traffic.
const catchUpSlack = time.Second

// drill is one run's state.
type drill struct {
	Plan
	env    Env
	run    string
	prefix string
	topics []string
	rec    *Recorder
	tl     Timeline

	mu struct {
		sync.Mutex
		phase      string
		fenced     bool // the fence is held
		cutByCmd   bool // the cut command ran and the restore has not
		interrupts int
	}
}

// Run runs the drill of p and returns its report (written to
// p.ReportDir). An error is a drill that could not run, or was
// interrupted; a drill that ran and failed a threshold returns its report
// with Verdict.Pass false.
func Run(ctx context.Context, p Plan, env Env) (Report, error) {
	d := &drill{Plan: p, env: env, rec: NewRecorder()}
	d.run = randomID()
	d.prefix = "drill-" + d.run + "-"
	for i := range p.Topics {
		d.topics = append(d.topics, fmt.Sprintf("persistent://%s/%s%d", p.Namespace, d.prefix, i))
	}
	phases, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	defer close(done)
	go d.watchInterrupts(stop, done)

	d.say("drill %s: %s losing %s, failover to %s (cut %s, %s), %d msg/s on %d topics %s*",
		d.run, p.Namespace, p.Lose, p.To, p.Cut, p.Mode, p.Rate, p.Topics, d.prefix)
	d.tl.Start = time.Now()
	err := d.setUp(ctx)
	var wl *Workload
	if err == nil {
		wl, err = StartWorkload(ctx, d.rec, WorkloadConfig{ServiceURL: p.serviceURL(), Topics: d.topics, Run: d.run, Rate: p.Rate,
			SubscriptionType: p.SubscriptionType, Client: p.Client, Addresses: p.Addresses, NewClient: env.NewClient})
	}
	if err == nil {
		progress := d.startProgress(wl)
		err = d.phases(phases, wl)
		// Whatever happened, the region comes back and the clients go home.
		err = errors.Join(err, d.restore(ctx), d.failBack(ctx))
		if phases.Err() == nil {
			d.phase("after", p.After)
			sleep(phases, p.After)
		}
		d.tl.Stop = time.Now()
		wl.StopProducers()
		d.drain(phases)
		d.tl.End = time.Now()
		d.closePhase()
		progress()
		wl.Close()
	}
	err = errors.Join(err, d.cleanUp(ctx))
	h := d.rec.History()
	f := Analyze(h, d.tl, p.Mode, p.Lose, p.SubscriptionType)
	r := Report{Namespace: p.Namespace, Lose: p.Lose, To: p.To, Cut: p.Cut, Mode: p.Mode, Rate: p.Rate, Topics: d.topics,
		SubscriptionType: p.SubscriptionType, Client: p.Client, Thresholds: p.Thresholds, Timeline: d.tl, Figures: f,
		Verdict: Judge(f, p.Thresholds, p.SubscriptionType), Rates: rates(h, d.tl.Start, later(d.tl.End, d.tl.Stop))}
	if phases.Err() != nil && ctx.Err() == nil {
		err = errors.Join(err, errors.New("drill interrupted: the region was restored and the clients failed back"))
	}
	if p.ReportDir != "" {
		err = errors.Join(err, r.Write(p.ReportDir), writeHistory(p.ReportDir, h))
	}
	return r, err
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// setUp creates the topics in the lost region and makes it their active
// region, so every client starts there.
func (d *drill) setUp(ctx context.Context) error {
	for _, t := range d.topics {
		if err := d.env.Admin.CreateTopic(ctx, d.Lose, t); err != nil {
			return fmt.Errorf("creating %s: %w", t, err)
		}
		if d.Auto {
			continue
		}
		if err := d.env.Admin.SetTopicActiveRegion(ctx, t, d.Lose); err != nil {
			if errors.Is(err, ErrNotFound) {
				err = fmt.Errorf("%w (the cluster has no topic-level active region: it needs a Meridian with POST .../{topic}/activeRegion)", err)
			}
			return fmt.Errorf("making %s active for %s: %w", d.Lose, t, err)
		}
	}
	return nil
}

// phases runs warm-up, the switch and the cut in the mode's order, and the
// outage; it returns early when ctx ends (an interrupt).
func (d *drill) phases(ctx context.Context, wl *Workload) error {
	d.phase("warm-up", d.Before)
	if !sleep(ctx, d.Before) {
		return nil
	}
	if d.Mode == Planned {
		d.phase("failover", 0)
		if err := d.switchTo(ctx, d.To); err != nil {
			return err
		}
		d.awaitClients(ctx, wl, d.To, d.Thresholds.MaxRTO)
		// A planned failover drains first: what the lost region stored
		// before its clients left reaches the new region before the cut
		// stops replication. Entries replicated into the lost region keep
		// arriving meanwhile, and its replicators pass over them a cursor
		// write at a time, so the backlog seldom reads 0: drained is the
		// oldest entry not passed being younger than the clients' leaving.
		left := time.Now()
		drained := func(s ReplicationState) bool { return s.Backlog == 0 || s.Delay+time.Second <= time.Since(left) }
		if !d.awaitReplication(ctx, []string{d.Lose}, d.To, drained) {
			d.say("replication from %s to %s has not drained within %v; cutting anyway", d.Lose, d.To, d.Drain)
		}
		d.phase("cut", 0)
		if err := d.cut(ctx); err != nil {
			return err
		}
	} else {
		d.phase("cut", 0)
		if err := d.cut(ctx); err != nil {
			return err
		}
		d.phase("failover", 0)
		if d.Auto {
			d.awaitAutomaticSwitch(ctx)
		} else if err := d.switchTo(ctx, d.To); err != nil {
			return err
		}
	}
	d.phase("outage", d.Outage)
	sleep(ctx, d.Outage-time.Since(d.tl.Cut))
	return nil
}

// switchTo moves the drill's topics' active region to region.
func (d *drill) switchTo(ctx context.Context, region string) error {
	for _, t := range d.topics {
		if err := d.env.Admin.SetTopicActiveRegion(ctx, t, region); err != nil {
			return fmt.Errorf("switching %s to %s: %w", t, region, err)
		}
	}
	if region == d.To {
		d.tl.Switch = time.Now()
	}
	return nil
}

// awaitAutomaticSwitch waits for the namespace's automatic failover to
// move the active region away from the lost one.
func (d *drill) awaitAutomaticSwitch(ctx context.Context) {
	for ctx.Err() == nil && time.Since(d.tl.Cut) < d.Outage {
		ns, err := d.env.Admin.Namespace(ctx, d.Namespace)
		if err == nil && ns.Active.ActiveRegion != "" && ns.Active.ActiveRegion != d.Lose {
			d.tl.Switch, d.To = time.Now(), ns.Active.ActiveRegion
			return
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// awaitClients waits until every client is attached to region, for at
// most limit.
func (d *drill) awaitClients(ctx context.Context, wl *Workload, region string, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		all := true
		for _, r := range wl.Regions() {
			all = all && r == region
		}
		if all {
			return
		}
		sleep(ctx, 50*time.Millisecond)
	}
}

// cut cuts the lost region off: the fence, renewed until the restore, or
// the operator's command.
func (d *drill) cut(ctx context.Context) error {
	d.tl.Cut = time.Now()
	if d.Cut == CutCommand {
		d.mu.Lock()
		d.mu.cutByCmd = true
		d.mu.Unlock()
		return d.shell(ctx, "cut", d.CutCommand)
	}
	err := d.env.Admin.CreateFence(ctx, d.Namespace, d.fenceName(), Fence{Region: d.Lose, TopicPrefix: d.prefix,
		TTLSeconds: int(d.FenceTTL.Seconds()), Holder: "meridian drill " + d.run})
	if err != nil {
		return fmt.Errorf("fencing %s: %w", d.Lose, err)
	}
	d.mu.Lock()
	d.mu.fenced = true
	d.mu.Unlock()
	go d.renewFence()
	return nil
}

func (d *drill) fenceName() string { return "drill-" + d.run }

// renewFence renews the fence every third of its TTL while it is held.
// It is the one goroutine that renews; restore ends it by clearing fenced.
func (d *drill) renewFence() {
	for {
		time.Sleep(d.FenceTTL / 3)
		d.mu.Lock()
		held := d.mu.fenced
		d.mu.Unlock()
		if !held {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), d.FenceTTL/3)
		err := d.env.Admin.RenewFence(ctx, d.Namespace, d.fenceName())
		cancel()
		if err != nil {
			d.say("renewing the fence failed (it lapses %v after its last renewal): %v", d.FenceTTL, err)
		}
	}
}

func (d *drill) shell(ctx context.Context, what, command string) error {
	cmd := exec.CommandContext(context.WithoutCancel(ctx), "sh", "-c", command)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("the %s command %q failed: %w: %s", what, command, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// restore ends the cut, if it began.
func (d *drill) restore(ctx context.Context) error {
	d.mu.Lock()
	fenced, cutByCmd := d.mu.fenced, d.mu.cutByCmd
	d.mu.fenced, d.mu.cutByCmd = false, false
	d.mu.Unlock()
	if !fenced && !cutByCmd {
		return nil
	}
	d.phase("restore", 0)
	d.tl.Restore = time.Now()
	ctx = context.WithoutCancel(ctx)
	if cutByCmd {
		if err := d.shell(ctx, "restore", d.RestoreCommand); err != nil {
			return err
		}
	} else if err := d.env.Admin.DeleteFence(ctx, d.Namespace, d.fenceName()); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("removing the fence (it lapses by itself within %v): %w", d.FenceTTL, err)
	}
	d.awaitCatchUp(ctx)
	return nil
}

// awaitCatchUp waits, for Drain at most, until every other region has
// replicated to the restored one what it stored during the outage: a fail
// back before that would send the clients home to a region that lacks
// messages, and the operator's runbook says as much (README, "Fail back
// is yours"). The load goes on meanwhile, so a backlog whose oldest entry
// is at most catchUpSlack old counts as caught up.
func (d *drill) awaitCatchUp(ctx context.Context) {
	var from []string
	for _, r := range d.Regions {
		if r != d.Lose {
			from = append(from, r)
		}
	}
	// Caught up: connected again (until then, the stats show the backlog
	// of the replicator's last report), with nothing older than
	// catchUpSlack left to pass.
	caughtUp := func(s ReplicationState) bool { return s.Connected && s.Delay <= catchUpSlack }
	if !d.awaitReplication(ctx, from, d.Lose, caughtUp) {
		d.say("replication into %s has not caught up within %v; failing back anyway", d.Lose, d.Drain)
		return
	}
	// The acks made meanwhile reach the restored region as subscription
	// states, written at most once per sync interval and applied to the
	// entries there at the time: wait until one has been written after
	// the entries arrived.
	sleep(ctx, stateSyncWait)
}

// awaitReplication waits, for Drain at most, until the replication of
// every drill topic from every region of from to to is done; it reports
// whether it got there.
func (d *drill) awaitReplication(ctx context.Context, from []string, to string, done func(ReplicationState) bool) bool {
	deadline := time.Now().Add(d.Drain)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		behind := false
		for _, r := range from {
			for _, t := range d.topics {
				s, err := d.env.Admin.Replication(ctx, r, t, to)
				behind = behind || err != nil || !done(s)
			}
		}
		if !behind {
			return true
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return false
}

// failBack makes the lost region active again, if the drill switched away
// from it.
func (d *drill) failBack(ctx context.Context) error {
	if d.tl.Switch.IsZero() {
		return nil
	}
	d.phase("fail back", 0)
	d.tl.FailBack = time.Now()
	ctx = context.WithoutCancel(ctx)
	if d.Auto {
		return d.env.Admin.SetNamespaceActiveRegion(ctx, d.Namespace, ActiveRegion{ActiveRegion: d.Lose,
			FallbackRegions: slices.DeleteFunc(slices.Clone(d.Fallback), func(r string) bool { return r == d.Lose })})
	}
	return d.switchTo(ctx, d.Lose)
}

// drain waits until every receipted message has been delivered, for
// Drain at most.
func (d *drill) drain(ctx context.Context) {
	d.phase("drain", d.Drain)
	deadline := time.Now().Add(d.Drain)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		h := d.rec.History()
		got := map[topicMessage]bool{}
		for _, dl := range h.Deliveries {
			got[topicMessage{dl.Topic, dl.Message}] = true
		}
		missing := 0
		for _, s := range h.Sends {
			if s.Receipted() && !got[topicMessage{s.Topic, s.Message}] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// cleanUp removes the topic-level active regions and deletes the drill's
// topics (their subscriptions with them) in every region, until none is
// left: a replicator may recreate a topic it still had entries for.
func (d *drill) cleanUp(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	if !d.Auto {
		for _, t := range d.topics {
			if err := d.env.Admin.RemoveTopicActiveRegion(ctx, t); err != nil && !errors.Is(err, ErrNotFound) {
				errs = append(errs, err)
			}
		}
	}
	for attempt := 0; attempt < 20; attempt++ {
		left := 0
		for _, r := range d.Regions {
			names, err := d.env.Admin.Topics(ctx, r, d.Namespace)
			if err != nil {
				continue
			}
			for _, n := range names {
				if !strings.Contains(n, "/"+d.prefix) {
					continue
				}
				left++
				if err := d.env.Admin.DeleteTopic(ctx, r, n); err != nil && !errors.Is(err, ErrNotFound) && attempt == 19 {
					errs = append(errs, fmt.Errorf("deleting %s in %s: %w", n, r, err))
				}
			}
		}
		if left == 0 {
			return errors.Join(errs...)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return errors.Join(append(errs, fmt.Errorf("topics %s* still listed after the clean-up", d.prefix))...)
}

// watchInterrupts: the first interrupt ends the phases (restore and fail
// back follow), the second exits at once, saying what is still cut.
func (d *drill) watchInterrupts(stop context.CancelFunc, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-d.env.Interrupts:
		}
		d.mu.Lock()
		d.mu.interrupts++
		n, fenced, cutByCmd := d.mu.interrupts, d.mu.fenced, d.mu.cutByCmd
		d.mu.Unlock()
		if n == 1 {
			d.say("interrupted: restoring %s and failing back before exiting (interrupt again to exit at once)", d.Lose)
			stop()
			continue
		}
		switch {
		case fenced:
			d.say("exiting at once: %s is still fenced for %s* (fence %s in %s), until it lapses within %v",
				d.Lose, d.prefix, d.fenceName(), d.Namespace, d.FenceTTL)
		case cutByCmd:
			d.say("exiting at once: %s is still cut: run the restore command yourself: %s", d.Lose, d.RestoreCommand)
		default:
			d.say("exiting at once: nothing is cut; the drill's topics %s* may be left in %s", d.prefix, d.Namespace)
		}
		d.env.Exit(130)
		return
	}
}

// sleep waits for dur or until ctx ends; it reports whether it slept the
// whole time.
func sleep(ctx context.Context, dur time.Duration) bool {
	if dur <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
