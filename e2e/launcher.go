//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
)

// SeedEnv names the environment variable that replays a run: a failing run
// prints its seed, and MERIDIAN_E2E_SEED=<seed> gives the next run the same
// fault schedule and link jitter.
const SeedEnv = "MERIDIAN_E2E_SEED"

// KeepEnv names the environment variable that keeps a passing test's bed
// folder (every process's log and data, and the history) as a failing
// test's is kept: MERIDIAN_E2E_KEEP=1, to read what the processes did in
// a run that passed but looked slow.
const KeepEnv = "MERIDIAN_E2E_KEEP"

// LogLevelEnv names the environment variable that sets the processes' log
// level when the test does not (BedConfig.LogLevel): MERIDIAN_E2E_LOG_LEVEL=info,
// with MERIDIAN_E2E_KEEP=1, keeps the ownership moves and the replication
// tasks' claims in a passing run's logs.
const LogLevelEnv = "MERIDIAN_E2E_LOG_LEVEL"

// How remote users reach a broker. A broker listens on 127.0.0.1:P and
// advertises the host advertisedHost with the same port P. Its Link
// listens on advertisedHost:P and forwards to 127.0.0.1:P. Lookups,
// redirects and the region's cluster record (brokerServiceUrl, serviceUrl)
// therefore all name the proxied address, and every client or future
// replicator that follows them passes through the broker's links. The
// broker's own port is reachable directly, for what must bypass the link.
// Linux routes all of 127.0.0.0/8 to the loopback device, so the address
// needs no setup.
//
// One address per broker means one path into it: clients of the broker's
// own region follow the same lookups and also pass through its link, so a
// link's shape is the broker's network as every client sees it. The
// broker now takes Pulsar's advertisedListeners (--advertised-listeners, a
// lookup answered with the owner's URLs of the client's ListenerName), so
// a bed could give each region's clients a path of their own: a listener
// per region, each the address of a link shaped as that region's network,
// with the region's clients naming it. This bed does not: every client
// shares the one link.
const advertisedHost = "127.0.0.2"

// BuildMeridian builds the meridian binary into dir and returns its path. A test
// run builds it once (in TestMain) and passes it to every bed.
func BuildMeridian(dir string) (string, error) { return BuildMeridianTags(dir, "") }

// BuildMeridianTags is BuildMeridian with build tags (comma-separated, as
// go build -tags takes them; "" for none): the checker's broken variants
// are built so (see TestBrokenVariants).
func BuildMeridianTags(dir, tags string) (string, error) { return buildMeridian("", dir, tags) }

// BuildMeridianAt builds the meridian binary of the repository's revision
// rev (a commit or a tag) into dir and returns its path: the old version
// of an upgrade. The source comes from `git archive` into dir, so the work
// tree and the repository's worktrees are left alone.
func BuildMeridianAt(dir, rev string) (string, error) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("building meridian at %s needs the git repository: %w", rev, err)
	}
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", strings.TrimSpace(string(top)), rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %w\n%s", rev, err, out)
	}
	return buildMeridian(src, dir, "")
}

// buildMeridian builds ./cmd/meridian of the module in srcDir ("": this
// one) into outDir with tags.
func buildMeridian(srcDir, outDir, tags string) (string, error) {
	// go test puts its own toolchain first on PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go toolchain on PATH: %w", err)
	}
	bin := filepath.Join(outDir, "meridian")
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command(goBin, append(args, "github.com/meridian-mq/meridian/cmd/meridian")...)
	cmd.Dir = srcDir
	// Built as the README builds it, without cgo: with cgo, pebble takes
	// a bookie's memtables and block cache from C malloc, and glibc keeps
	// what they free, so the bookies' RSS rose 15-25% an hour in the
	// soak (docs/BENCHMARKS.md, "Reading these runs").
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// BedConfig describes a bed.
type BedConfig struct {
	// Binary is the meridian binary (see BuildMeridian). Required.
	Binary string
	// Regions are the regions to run; at least one, with distinct names.
	Regions []RegionConfig
	// GlobalEtcd runs one more etcd member for the global configuration
	// store, which each region's brokers reach through the region's
	// GlobalLink. Without it the global configuration lives in the
	// region's own etcd, which is only allowed for a single region.
	GlobalEtcd bool
	// GlobalMembers, with GlobalEtcd, lays the global store out as
	// production should (docs/operations.md): one member in each region,
	// so GlobalMembers must equal the number of regions, odd and at least
	// 3. Each member stands behind links of its own (Region.GlobalMember),
	// its peer traffic crosses them as the regions' traffic crosses the
	// brokers' links, and CutRegion and a SIGKILL of the region's
	// processes take it away with the region. 0 keeps the one member
	// outside every region, behind each region's GlobalLink.
	GlobalMembers int
	// Seed drives the run's random choices (Bed.Rand, link jitter). Zero
	// takes $MERIDIAN_E2E_SEED, or the clock when that is unset.
	Seed uint64
	// LogLevel is every process's --log-level. Default $MERIDIAN_E2E_LOG_LEVEL,
	// or "warn" when that is unset.
	LogLevel string
	// EtcdArgs are further flags for every etcd member, the global one
	// included (e.g. "--auto-compaction-retention", "1m").
	EtcdArgs []string
	// StartTimeout bounds Start. Default 3 minutes.
	StartTimeout time.Duration
	// LocalClients makes the test's own clients (sockets of the test
	// process, see OwnPeer) bypass the brokers' links: a client is then in
	// the region whose broker it talks to, on that region's network, and
	// each broker's Link carries, is shaped and cut for, only what comes
	// from the bed's processes, the other regions' replicators. Without
	// it every client passes through the links.
	LocalClients bool
}

// RegionConfig describes one region.
type RegionConfig struct {
	// Name is the region (cluster) name.
	Name string
	// EtcdMembers is the size of the region's etcd cluster: 1 or 3.
	EtcdMembers int
	// Bookies is how many bookies to run.
	Bookies int
	// Brokers is how many brokers to run; they need at least EnsembleSize
	// bookies.
	Brokers int
	// Replicators is how many replication workers to run (`meridian
	// replicator`). They read the region's topics from its bookies and
	// publish to the other regions' brokers at their cluster records'
	// (proxied) addresses.
	Replicators int
	// EnsembleSize, WriteQuorum and AckQuorum are the brokers' ledger
	// settings (E >= Qw >= Qa >= 1). Zero takes E = min(Bookies, 3),
	// Qw = E, and Qa = Qw, or 2 when Qw is 3.
	EnsembleSize, WriteQuorum, AckQuorum int
	// BrokerArgs are further flags for every broker of the region.
	BrokerArgs []string
	// BookieArgs are further flags for every bookie of the region (e.g.
	// "--storage", "memory").
	BookieArgs []string
	// BookieAuth makes every bookie of the region require a token
	// (`--auth-token-file`, a file in the bed's folder) that the region's
	// brokers and replicators present (`--bookie-auth-token-file`), so a
	// scenario runs with storage authentication on.
	BookieAuth bool
	// BookieFailpoints gives every bookie of the region a failpoint
	// endpoint (`--failpoint-endpoint` on a free loopback port), so that
	// a scenario switches its disk faults while it runs, with
	// Process.SetFailpoints.
	BookieFailpoints bool
}

// withDefaults fills the ledger settings left zero.
func (r RegionConfig) withDefaults() RegionConfig {
	if r.EnsembleSize == 0 {
		r.EnsembleSize = min(r.Bookies, 3)
	}
	if r.WriteQuorum == 0 {
		r.WriteQuorum = r.EnsembleSize
	}
	if r.AckQuorum == 0 {
		r.AckQuorum = r.WriteQuorum
		if r.WriteQuorum == 3 {
			r.AckQuorum = 2
		}
	}
	return r
}

// Validate reports a config the bed cannot run.
func (c BedConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Binary == "":
		return bad("BedConfig.Binary is required (BuildMeridian)")
	case len(c.Regions) == 0:
		return bad("BedConfig.Regions is empty")
	case len(c.Regions) > 1 && !c.GlobalEtcd:
		return bad("%d regions need BedConfig.GlobalEtcd: one region's etcd cannot be every region's global store", len(c.Regions))
	case c.GlobalMembers != 0 && !c.GlobalEtcd:
		return bad("BedConfig.GlobalMembers needs BedConfig.GlobalEtcd")
	case c.GlobalMembers != 0 && (c.GlobalMembers != len(c.Regions) || c.GlobalMembers < 3 || c.GlobalMembers%2 == 0):
		return bad("BedConfig.GlobalMembers is one member per region, an odd count of at least 3: got %d members for %d regions", c.GlobalMembers, len(c.Regions))
	case c.StartTimeout < 0:
		return bad("BedConfig.StartTimeout must not be negative")
	}
	names := map[string]bool{}
	for _, r := range c.Regions {
		r = r.withDefaults()
		switch {
		case r.Name == "" || r.Name == "global" || strings.ContainsAny(r.Name, "/ "):
			return bad("region name %q must be non-empty, not \"global\" (the global etcd's name), without '/' or spaces", r.Name)
		case names[r.Name]:
			return bad("region %s is listed twice", r.Name)
		case r.EtcdMembers != 1 && r.EtcdMembers != 3:
			return bad("region %s: EtcdMembers must be 1 or 3, got %d", r.Name, r.EtcdMembers)
		case r.Bookies < 0 || r.Brokers < 0 || r.Replicators < 0:
			return bad("region %s: negative process count", r.Name)
		case r.Brokers > 0 && !(r.EnsembleSize >= r.WriteQuorum && r.WriteQuorum >= r.AckQuorum && r.AckQuorum >= 1):
			return bad("region %s: need E >= Qw >= Qa >= 1, got %d/%d/%d", r.Name, r.EnsembleSize, r.WriteQuorum, r.AckQuorum)
		case r.Brokers > 0 && r.EnsembleSize > r.Bookies:
			return bad("region %s: ensemble size %d with only %d bookies", r.Name, r.EnsembleSize, r.Bookies)
		}
		names[r.Name] = true
	}
	return nil
}

// Bed is a running set of regions. It owns every process and link it
// starts: when the test ends it SIGKILLs the processes and closes the
// links. Its folder (Dir) holds one log per process, the processes' data
// and any saved history; it is removed after a passing test and kept,
// with its path and the seed printed, after a failing one.
type Bed struct {
	// Dir is the run's folder.
	Dir string
	// Seed is the run's seed; Rand is drawn from it. Use Rand (from the
	// test's goroutine) for every random choice of a fault schedule, so
	// that the seed replays it.
	Seed uint64
	Rand *rand.Rand
	// Global is the global etcd member, nil without BedConfig.GlobalEtcd
	// and with BedConfig.GlobalMembers (see Region.GlobalMember).
	Global *Process
	// Regions are the regions in BedConfig order.
	Regions []*Region
	// StartedIn is how long Start took to have every process ready.
	StartedIn time.Duration

	tb    testing.TB
	cfg   BedConfig
	procs []*Process // appended by the test's goroutine only
	// procsMu guards procs against regionOf, which links call from their
	// own goroutines.
	procsMu  sync.Mutex
	links    []*Link
	recorder *Recorder
	// handedOut are the ports freePorts returned (test's goroutine
	// only). A process binds its ports some time after it starts, so a
	// port handed to one that has not bound it yet is still free to the
	// kernel; without this, the next process could draw it too and one
	// of the two fail to bind.
	handedOut map[int]bool
}

// Region is one region's processes and links.
type Region struct {
	Name    string
	Etcd    []*Process
	Bookies []*Process
	Brokers []*Broker
	// Replicators are the region's replication workers.
	Replicators []*Process
	// GlobalLink is the region's path to the global etcd; nil without one,
	// and with BedConfig.GlobalMembers.
	GlobalLink *Link
	// GlobalMember is the region's member of the global store with
	// BedConfig.GlobalMembers, else nil. The region's own processes reach
	// it directly and the other members through their links; the other
	// regions' processes reach it through GlobalClientLink, and the other
	// members exchange raft messages with it through GlobalPeerLink (each
	// member dials the others' peer URLs, so every pair of members talks
	// through both members' peer links).
	GlobalMember                     *Process
	GlobalClientLink, GlobalPeerLink *Link
	// Config is the region's configuration, defaults filled in.
	Config RegionConfig
}

// Processes lists every process of the region, in the order a restart
// of the whole region must bring them back: its etcd and global member,
// then its bookies, brokers and replicators.
func (r *Region) Processes() []*Process {
	out := append([]*Process{}, r.Etcd...)
	if r.GlobalMember != nil {
		out = append(out, r.GlobalMember)
	}
	out = append(out, r.Bookies...)
	for _, b := range r.Brokers {
		out = append(out, b.Process)
	}
	return append(out, r.Replicators...)
}

// Broker is a broker process with the links in front of its ports.
type Broker struct {
	*Process
	// Link carries the Pulsar protocol; its address is the one the broker
	// advertises. WebLink carries HTTP (admin and /metrics).
	Link, WebLink *Link
	// DirectAddr is the broker's own Pulsar listener, bypassing Link.
	DirectAddr string
}

// ServiceURL is the broker's advertised (proxied) Pulsar URL.
func (b *Broker) ServiceURL() string { return "pulsar://" + b.Link.Addr() }

// ID is the broker's id, as in its registration and ownership keys: its
// advertised host with its Pulsar port, which is its Link's address (the
// broker's default id; the bed never passes --broker-id).
func (b *Broker) ID() string { return b.Link.Addr() }

// WebURL is the broker's advertised (proxied) HTTP URL.
func (b *Broker) WebURL() string { return "http://" + b.WebLink.Addr() }

// InboundLinks are the links that stand for the way into the region from
// the others: its brokers' (Pulsar and web), and its global member's with
// BedConfig.GlobalMembers. A WAN shape set on every region's InboundLinks
// shapes every path between regions once each way.
func (r *Region) InboundLinks() []*Link { return append(r.brokerLinks(), r.globalLinks()...) }

// EtcdEndpoints are the client URLs of the region's etcd members.
func (r *Region) EtcdEndpoints() []string {
	var out []string
	for _, m := range r.Etcd {
		out = append(out, m.ClientURL)
	}
	return out
}

// ServiceURL is the region's Pulsar service URL: its first broker's
// advertised address (every broker redirects lookups to the owner). The
// region must have a broker.
func (r *Region) ServiceURL() string { return r.Brokers[0].ServiceURL() }

// AllBrokersURL is a Pulsar service URL that lists every broker of the
// region, each at its advertised (proxied) address:
// pulsar://h1:p1,h2:p2,... pulsar-client-go sends each lookup to the next
// host of the list and tries the others when one fails, so its clients
// survive the loss of any one broker, including the first.
func (r *Region) AllBrokersURL() string {
	addrs := make([]string, 0, len(r.Brokers))
	for _, b := range r.Brokers {
		addrs = append(addrs, b.Link.Addr())
	}
	return "pulsar://" + strings.Join(addrs, ",")
}

// StartBed runs the bed's processes and waits until each is ready: all etcd
// members at once, then all bookies, then all brokers, then all
// replicators (they find the other regions through the cluster records
// the brokers create). It fails the test if any does not come up.
func StartBed(tb testing.TB, cfg BedConfig) *Bed {
	tb.Helper()
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = cmp.Or(os.Getenv(LogLevelEnv), "warn")
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 3 * time.Minute
	}
	b := &Bed{tb: tb, cfg: cfg, Seed: cfg.Seed, recorder: &Recorder{}}
	if b.Seed == 0 {
		if env := os.Getenv(SeedEnv); env != "" {
			s, err := strconv.ParseUint(env, 10, 64)
			if err != nil {
				tb.Fatalf("$%s=%q is not a seed: %v", SeedEnv, env, err)
			}
			b.Seed = s
		} else {
			b.Seed = uint64(time.Now().UnixNano())
		}
	}
	b.Rand = rand.New(rand.NewPCG(b.Seed, 0x626564))
	name := strings.NewReplacer("/", "-", " ", "-").Replace(tb.Name())
	dir, err := os.MkdirTemp("", "meridian-e2e-"+name+"-")
	if err != nil {
		tb.Fatal(err)
	}
	b.Dir = dir
	tb.Cleanup(b.cleanup)
	tb.Logf("test bed in %s, seed %d", b.Dir, b.Seed)

	began := time.Now()
	ctx, cancel := context.WithTimeout(tb.Context(), cfg.StartTimeout)
	defer cancel()
	b.startEtcd()
	b.waitReady(ctx, b.procs)
	b.startLinks()
	var bookies []*Process
	for _, r := range b.Regions {
		for i := range r.Config.Bookies {
			bookies = append(bookies, b.startBookie(r, i))
		}
	}
	b.waitReady(ctx, bookies)
	var brokers []*Process
	for _, r := range b.Regions {
		for i := range r.Config.Brokers {
			brokers = append(brokers, b.startBroker(r, i).Process)
		}
	}
	b.waitReady(ctx, brokers)
	gs := b.GlobalStore(ctx)
	for _, r := range b.Regions {
		if len(r.Brokers) > 0 { // a region without brokers has no record: only a broker writes it
			b.awaitClusterRecord(ctx, gs, r)
		}
	}
	var replicators []*Process
	for _, r := range b.Regions {
		for i := range r.Config.Replicators {
			replicators = append(replicators, b.startReplicator(r, i))
		}
	}
	b.waitReady(ctx, replicators)
	b.StartedIn = time.Since(began)
	return b
}

// startEtcd starts the global member (or members) and every region's
// members.
func (b *Bed) startEtcd() {
	if b.cfg.GlobalEtcd && b.cfg.GlobalMembers == 0 {
		b.Global = b.startEtcdCluster("", "global", 1)[0]
	}
	for _, rc := range b.cfg.Regions {
		rc = rc.withDefaults()
		b.Regions = append(b.Regions, &Region{Name: rc.Name, Config: rc, Etcd: b.startEtcdCluster(rc.Name, rc.Name, rc.EtcdMembers)})
	}
	if b.cfg.GlobalMembers > 0 {
		b.startGlobalMembers()
	}
}

// startGlobalMembers starts the global store of BedConfig.GlobalMembers:
// one member in each region, named <region>-global-etcd, behind a client
// link and a peer link that listen on advertisedHost with the member's
// ports. The members advertise those links, so raft traffic between two
// members, and every client of another region, crosses them: their shape
// is the WAN's, and cutting them cuts the member off. Their Source is the
// region of the process at the far end, so that a region's cut also
// breaks what its own member dials into the others' links.
func (b *Bed) startGlobalMembers() {
	ports := b.freePorts(2 * len(b.Regions))
	client := func(i int) int { return ports[2*i] }
	peer := func(i int) int { return ports[2*i+1] }
	var initial []string
	for i, r := range b.Regions {
		initial = append(initial, fmt.Sprintf("%s-global-etcd=http://%s:%d", r.Name, advertisedHost, peer(i)))
	}
	for i, r := range b.Regions {
		name := r.Name + "-global-etcd"
		direct := fmt.Sprintf("http://127.0.0.1:%d", client(i))
		r.GlobalClientLink = b.startLink(name, fmt.Sprintf("%s:%d", advertisedHost, client(i)), fmt.Sprintf("127.0.0.1:%d", client(i)), nil, b.regionOf)
		r.GlobalPeerLink = b.startLink(name+"/peer", fmt.Sprintf("%s:%d", advertisedHost, peer(i)), fmt.Sprintf("127.0.0.1:%d", peer(i)), nil, b.regionOf)
		args := []string{"--name", name, "--data-dir", filepath.Join(b.Dir, name),
			"--listen-client-urls", direct, "--advertise-client-urls", "http://" + r.GlobalClientLink.Addr(),
			"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer(i)),
			"--initial-advertise-peer-urls", "http://" + r.GlobalPeerLink.Addr(),
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "global"}
		p := b.newProcess(r.Name, name, "etcd", append(args, b.cfg.EtcdArgs...)...)
		p.ClientURL, p.MetricsURL = direct, direct+"/metrics"
		p.Start()
		r.GlobalMember = p
	}
}

// globalEndpoints are the global store's client URLs as region r's
// processes reach them (--global-etcd), or nil when the region's own etcd
// is the global store. With BedConfig.GlobalMembers they are the region's
// own member, directly, then the other regions' members through their
// links: etcd's client balances its requests over every endpoint it can
// reach, so the list's order does not pin it to the local member, but
// the loss of any one member, the local one included, leaves it the
// others.
func (b *Bed) globalEndpoints(r *Region) []string {
	switch {
	case r.GlobalMember != nil:
		out := []string{r.GlobalMember.ClientURL}
		for _, o := range b.Regions {
			if o != r {
				out = append(out, "http://"+o.GlobalClientLink.Addr())
			}
		}
		return out
	case r.GlobalLink != nil:
		return []string{"http://" + r.GlobalLink.Addr()}
	}
	return nil
}

// startEtcdCluster starts n members of region ("" for the global
// store) named <prefix>-etcd-<i>, bootstrapping one cluster.
func (b *Bed) startEtcdCluster(region, prefix string, n int) []*Process {
	ports := b.freePorts(2 * n)
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("%s-etcd-%d=http://127.0.0.1:%d", prefix, i, ports[2*i+1]))
	}
	var members []*Process
	for i := range n {
		name := fmt.Sprintf("%s-etcd-%d", prefix, i)
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		args := []string{"--name", name, "--data-dir", filepath.Join(b.Dir, name),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", prefix}
		p := b.newProcess(region, name, "etcd", append(args, b.cfg.EtcdArgs...)...)
		p.ClientURL, p.MetricsURL = client, client+"/metrics"
		p.Start()
		members = append(members, p)
	}
	return members
}

// startLinks starts each region's link to the global etcd.
func (b *Bed) startLinks() {
	if b.Global == nil {
		return
	}
	for _, r := range b.Regions {
		upstream := strings.TrimPrefix(b.Global.ClientURL, "http://")
		r.GlobalLink = b.startLink(r.Name+"->global-etcd", "127.0.0.1:0", upstream, nil, nil)
	}
}

// startLink starts a link; local and source, if not nil, are its
// LinkConfig.Local and Source.
func (b *Bed) startLink(name, listen, upstream string, local func(peer, self net.Addr) bool, source func(peer, self net.Addr) string) *Link {
	cfg := DefaultLinkConfig(name, listen, upstream)
	cfg.Seed, cfg.Local, cfg.Source = b.Rand.Uint64(), local, source
	l, err := StartLink(cfg)
	if err != nil {
		b.tb.Fatal(err)
	}
	b.links = append(b.links, l)
	return l
}

func (b *Bed) startBookie(r *Region, i int) *Process {
	name := fmt.Sprintf("%s-bookie-%d", r.Name, i)
	args := []string{"--region", r.Name, "--etcd", strings.Join(r.EtcdEndpoints(), ","),
		"--id", name, "--data-dir", filepath.Join(b.Dir, name),
		"--listen", fmt.Sprintf("127.0.0.1:%d", b.freePorts(1)[0])}
	args = append(args, b.bookieAuthArgs(r, "--auth-token-file")...)
	var endpoint string
	if r.Config.BookieFailpoints {
		endpoint = fmt.Sprintf("127.0.0.1:%d", b.freePorts(1)[0])
		args = append(args, "--failpoint-endpoint", endpoint)
	}
	metrics := b.metricsListen(&args)
	p := b.newProcess(r.Name, name, "bookie", append(args, r.Config.BookieArgs...)...)
	p.FailpointEndpoint, p.MetricsURL = endpoint, metrics
	p.Start()
	r.Bookies = append(r.Bookies, p)
	return p
}

// AddBroker starts one more broker in the running region r, configured as
// the region's others (RegionConfig.BrokerArgs, plus extra), and waits
// until it serves: a scale-out.
func (b *Bed) AddBroker(ctx context.Context, r *Region, extra ...string) *Broker {
	b.tb.Helper()
	brk := b.startBroker(r, len(r.Brokers), extra...)
	b.waitReady(ctx, []*Process{brk.Process})
	b.awaitClusterRecord(ctx, b.GlobalStore(ctx), r)
	return brk
}

// awaitClusterRecord waits until region r's cluster record names every
// broker of the region, as the region's leader keeps it (the record is
// the region's own: its first broker created it). The other regions
// replicate into r through its record, and one that named only the first
// broker would stop them while that broker is down; the other regions'
// replicators follow the change through their watch of the global
// configuration. gs is the bed's GlobalStore.
func (b *Bed) awaitClusterRecord(ctx context.Context, gs *global.Store, r *Region) {
	b.tb.Helper()
	want := make([]string, 0, len(r.Brokers))
	for _, brk := range r.Brokers {
		want = append(want, brk.Link.Addr())
	}
	slices.Sort(want)
	var got string
	for {
		c, err := gs.Cluster(ctx, r.Name)
		if err == nil {
			got = c.BrokerServiceURL
			if _, hosts, ok := global.ServiceHosts(got); ok {
				slices.Sort(hosts)
				if slices.Equal(hosts, want) {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			b.tb.Fatalf("the cluster record of %s names %q, want every broker of the region, %v", r.Name, got, want)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (b *Bed) startBroker(r *Region, i int, extra ...string) *Broker {
	name := fmt.Sprintf("%s-broker-%d", r.Name, i)
	ports := b.freePorts(2)
	direct := fmt.Sprintf("127.0.0.1:%d", ports[0])
	web := fmt.Sprintf("127.0.0.1:%d", ports[1])
	var local func(peer, self net.Addr) bool
	if b.cfg.LocalClients {
		local = OwnPeer
	}
	brk := &Broker{
		DirectAddr: direct,
		Link:       b.startLink(name, fmt.Sprintf("%s:%d", advertisedHost, ports[0]), direct, local, b.regionOf),
		WebLink:    b.startLink(name+"/web", fmt.Sprintf("%s:%d", advertisedHost, ports[1]), web, local, b.regionOf),
	}
	args := []string{"--region", r.Name, "--etcd", strings.Join(r.EtcdEndpoints(), ","),
		"--advertised-address", advertisedHost, "--broker-listen", direct, "--web-listen", web,
		"--ensemble-size", strconv.Itoa(r.Config.EnsembleSize), "--write-quorum", strconv.Itoa(r.Config.WriteQuorum),
		"--ack-quorum", strconv.Itoa(r.Config.AckQuorum)}
	if eps := b.globalEndpoints(r); eps != nil {
		args = append(args, "--global-etcd", strings.Join(eps, ","))
	}
	args = append(args, b.bookieAuthArgs(r, "--bookie-auth-token-file")...)
	args = append(args, r.Config.BrokerArgs...)
	brk.Process = b.newProcess(r.Name, name, "broker", append(args, extra...)...)
	brk.MetricsURL = "http://" + web + "/metrics"
	// While the process is down its advertised address refuses
	// connections, as a dead broker's port does (see Link.Unlisten).
	brk.beforeStart = func() error { return errors.Join(brk.Link.Listen(), brk.WebLink.Listen()) }
	brk.afterExit = func() { brk.Link.Unlisten(); brk.WebLink.Unlisten() }
	brk.Start()
	r.Brokers = append(r.Brokers, brk)
	return brk
}

// bookieAuthArgs is flag and the region's bookie token file when the
// region runs with RegionConfig.BookieAuth, else nothing. The file is
// written once per region, in the bed's folder; its token is derived from
// the folder's name, which is unique to the run.
func (b *Bed) bookieAuthArgs(r *Region, flag string) []string {
	if !r.Config.BookieAuth {
		return nil
	}
	file := filepath.Join(b.Dir, r.Name+"-bookie-token")
	if _, err := os.Stat(file); err != nil {
		token := fmt.Sprintf("%x", sha256.Sum256([]byte(b.Dir+"/"+r.Name)))
		if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
			b.tb.Fatalf("bookie token file: %v", err)
		}
	}
	return []string{flag, file}
}

func (b *Bed) startReplicator(r *Region, i int) *Process {
	name := fmt.Sprintf("%s-replicator-%d", r.Name, i)
	args := []string{"--region", r.Name, "--etcd", strings.Join(r.EtcdEndpoints(), ","), "--worker-id", name}
	if eps := b.globalEndpoints(r); eps != nil {
		args = append(args, "--global-etcd", strings.Join(eps, ","))
	}
	args = append(args, b.bookieAuthArgs(r, "--bookie-auth-token-file")...)
	metrics := b.metricsListen(&args)
	p := b.newProcess(r.Name, name, "replicator", args...)
	p.MetricsURL = metrics
	p.Start()
	r.Replicators = append(r.Replicators, p)
	return p
}

// metricsListen appends `--metrics-listen` on a free loopback port to
// args, and returns the URL of that /metrics: a bookie's and a
// replicator's default port is fixed (8000, 8001), and a bed runs many of
// them on one host. Their /ready and /health are beside it.
func (b *Bed) metricsListen(args *[]string) string {
	addr := fmt.Sprintf("127.0.0.1:%d", b.freePorts(1)[0])
	*args = append(*args, "--metrics-listen", addr)
	return "http://" + addr + "/metrics"
}

// freePorts reserves n distinct free loopback ports, each free on both
// 127.0.0.1 and advertisedHost, where the brokers' links listen: a port
// free on one may be bound on the other (by a link of another bed, in
// another test process; seen as "bind: address already in use"). They are
// released just before use, so another process could take one in between;
// the process then fails to start and the test says so. A port the bed
// handed out once is never handed out again (see Bed.handedOut).
func (b *Bed) freePorts(n int) []int {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			b.tb.Fatalf("no %d ports free on both 127.0.0.1 and %s after %d tries", n, advertisedHost, tries)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.tb.Fatal(err)
		}
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		if b.handedOut[port] {
			continue // held open above, so that it is not drawn again
		}
		adv, err := net.Listen("tcp", fmt.Sprintf("%s:%d", advertisedHost, port))
		if err != nil {
			continue // held open above, so that it is not drawn again
		}
		ls = append(ls, adv)
		ports = append(ports, port)
	}
	if b.handedOut == nil {
		b.handedOut = make(map[int]bool)
	}
	for _, p := range ports {
		b.handedOut[p] = true
	}
	return ports
}

func (b *Bed) newProcess(region, name, command string, args ...string) *Process {
	p := &Process{Name: name, region: region, tb: b.tb, bin: b.cfg.Binary,
		args:    append([]string{command}, append(args, "--log-level", b.cfg.LogLevel)...),
		logPath: filepath.Join(b.Dir, name+".log")}
	b.procsMu.Lock()
	b.procs = append(b.procs, p)
	b.procsMu.Unlock()
	return p
}

// bedProcess is one of the bed's processes, with its kind: etcd, bookie,
// broker or replicator.
type bedProcess struct {
	*Process
	kind string
}

// processes lists every process of the bed: the global etcd (if any),
// then each region's etcd members, global member (if any), bookies,
// brokers and replicators.
func (b *Bed) processes() []bedProcess {
	var out []bedProcess
	if b.Global != nil {
		out = append(out, bedProcess{b.Global, "etcd"})
	}
	for _, r := range b.Regions {
		for _, p := range r.Etcd {
			out = append(out, bedProcess{p, "etcd"})
		}
		if r.GlobalMember != nil {
			out = append(out, bedProcess{r.GlobalMember, "etcd"})
		}
		for _, p := range r.Bookies {
			out = append(out, bedProcess{p, "bookie"})
		}
		for _, brk := range r.Brokers {
			out = append(out, bedProcess{brk.Process, "broker"})
		}
		for _, p := range r.Replicators {
			out = append(out, bedProcess{p, "replicator"})
		}
	}
	return out
}

// regionOf names the region whose process holds the socket at peer (the
// far end of a connection a link accepted at self); "" when none of the
// bed's processes does (the test's own clients, say).
func (b *Bed) regionOf(peer, self net.Addr) string {
	inode, ok := socketInode(peer, self)
	if !ok {
		return ""
	}
	b.procsMu.Lock()
	procs := slices.Clone(b.procs)
	b.procsMu.Unlock()
	for _, p := range procs {
		if pid := p.PID(); pid != 0 && holdsSocket(strconv.Itoa(pid), inode) {
			return p.region
		}
	}
	return ""
}

// CutRegion cuts the region called name off from the others, both ways:
// every connection through its InboundLinks (its brokers' Pulsar and web
// links, and its global member's with BedConfig.GlobalMembers) is broken
// and new ones refused, and so is every connection its own processes
// (its replicators, its global member) make through the other regions'
// links. What stays inside the region goes on: its etcd, its bookies, its
// processes' path to its own global member, and the test's own clients
// when they bypass the links (BedConfig.LocalClients). A global store
// outside every region (GlobalEtcd without GlobalMembers) stays reachable
// (CutGlobal cuts it). What DarkenRegion held is dropped with the
// connections. RestoreRegion undoes it.
func (b *Bed) CutRegion(name string) { b.cutLinks(name, (*Region).InboundLinks) }

// CutBrokers is CutRegion for the region's brokers' links only: with
// BedConfig.GlobalMembers, the region is cut off from the others while
// its global member stays in the store. RestoreRegion undoes it.
func (b *Bed) CutBrokers(name string) { b.cutLinks(name, (*Region).brokerLinks) }

// CutGlobal cuts the region called name off from the global store only:
// its GlobalLink, or, with BedConfig.GlobalMembers, every path between its
// global member and the others and between its processes and the other
// members (CutRegion's cut of those links). Its processes then reach only
// their own member, which has no quorum. RestoreGlobal undoes it.
func (b *Bed) CutGlobal(name string) {
	r := b.Region(name)
	if r.GlobalMember == nil {
		r.GlobalLink.Cut()
		return
	}
	b.cutLinks(name, (*Region).globalLinks)
}

// RestoreGlobal ends CutGlobal(name).
func (b *Bed) RestoreGlobal(name string) {
	r := b.Region(name)
	if r.GlobalMember == nil {
		r.GlobalLink.Restore()
		return
	}
	b.eachLink(name, (*Region).globalLinks, (*Link).Restore, func(l *Link) { l.RestoreFrom(name) })
}

// cutLinks cuts the links of region name that links lists, and what its
// processes make through the other regions' such links.
func (b *Bed) cutLinks(name string, links func(*Region) []*Link) {
	b.eachLink(name, links,
		func(l *Link) { l.Cut(); l.Heal() },
		func(l *Link) { l.CutFrom(name); l.HealFrom(name) })
}

// DarkenRegion is how a cut begins when a network starts dropping every
// packet: the paths CutRegion breaks carry nothing, both ways, but no
// connection closes (Link.Partition), so each side goes on sending into
// the dark until its own timeouts notice, or until CutRegion breaks the
// connections and drops what was held, as a reset would.
// RestoreRegion ends it too, delivering what was held.
func (b *Bed) DarkenRegion(name string) {
	b.eachLink(name, (*Region).InboundLinks, (*Link).Partition, func(l *Link) { l.PartitionFrom(name) })
}

// RestoreRegion ends CutRegion(name), CutBrokers(name) and
// DarkenRegion(name).
func (b *Bed) RestoreRegion(name string) {
	b.eachLink(name, (*Region).InboundLinks,
		func(l *Link) { l.Restore(); l.Heal() },
		func(l *Link) { l.RestoreFrom(name); l.HealFrom(name) })
}

// eachLink calls in on each of links' links of the region called name,
// and out on every other region's.
func (b *Bed) eachLink(name string, links func(*Region) []*Link, in, out func(*Link)) {
	for _, r := range b.Regions {
		for _, l := range links(r) {
			if r.Name == name {
				in(l)
			} else {
				out(l)
			}
		}
	}
}

// brokerLinks are the region's brokers' links, Pulsar and web.
func (r *Region) brokerLinks() []*Link {
	var out []*Link
	for _, brk := range r.Brokers {
		out = append(out, brk.Link, brk.WebLink)
	}
	return out
}

// globalLinks are its global member's links (BedConfig.GlobalMembers).
func (r *Region) globalLinks() []*Link {
	if r.GlobalMember == nil {
		return nil
	}
	return []*Link{r.GlobalClientLink, r.GlobalPeerLink}
}

// waitReady waits for every process's ready line.
func (b *Bed) waitReady(ctx context.Context, ps []*Process) {
	b.tb.Helper()
	for _, p := range ps {
		p.WaitLog(ctx, 0, readyLine)
	}
}

// Region returns the region called name, failing the test if there is none.
func (b *Bed) Region(name string) *Region {
	i := slices.IndexFunc(b.Regions, func(r *Region) bool { return r.Name == name })
	if i < 0 {
		b.tb.Fatalf("the bed has no region %s", name)
	}
	return b.Regions[i]
}

// Dial connects to an etcd cluster by its client URLs, directly (not
// through a link), and closes the connection when the test ends.
func (b *Bed) Dial(ctx context.Context, endpoints []string) *meta.Etcd {
	b.tb.Helper()
	cfg := meta.DefaultEtcdConfig()
	cfg.Logger = nil
	cfg.DialTimeout = 2 * time.Second
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		s, err := meta.Dial(ctx, endpoints, cfg)
		if err == nil {
			b.tb.Cleanup(func() { s.Close() })
			return s
		}
		select {
		case <-ctx.Done():
			b.tb.Fatalf("etcd %v never served a quorum read: %v", endpoints, err)
		case <-tick.C:
		}
	}
}

// GlobalStore is the global configuration store (the global etcd, its
// members reached directly, or the single region's), for the operator's
// part: tenants and namespaces.
func (b *Bed) GlobalStore(ctx context.Context) *global.Store {
	b.tb.Helper()
	endpoints := b.Regions[0].EtcdEndpoints()
	switch {
	case b.Global != nil:
		endpoints = []string{b.Global.ClientURL}
	case b.cfg.GlobalMembers > 0:
		endpoints = nil
		for _, r := range b.Regions {
			endpoints = append(endpoints, r.GlobalMember.ClientURL)
		}
	}
	cfg := global.DefaultConfig()
	cfg.Logger = slog.Default() // the test process's own log, as the bed's other clients use
	gs, err := global.NewStore(b.Dial(ctx, endpoints), cfg)
	if err != nil {
		b.tb.Fatal(err)
	}
	return gs
}

// Recorder is the bed's Recorder, for the test's workload. If the test
// fails, the bed saves what it recorded (see SaveHistory), whatever the
// failure.
func (b *Bed) Recorder() *Recorder { return b.recorder }

// SaveHistory writes h to history.json in the bed's folder, which a
// failing test keeps.
func (b *Bed) SaveHistory(h History) {
	b.tb.Helper()
	out, err := json.MarshalIndent(h, "", " ")
	if err != nil {
		b.tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.Dir, historyFile), out, 0o644); err != nil {
		b.tb.Fatal(err)
	}
}

// cleanup kills every process and closes every link; it keeps the folder
// of a failed test (or of any, with $MERIDIAN_E2E_KEEP=1) and says where
// it is.
func (b *Bed) cleanup() {
	for _, p := range b.procs {
		p.Kill()
	}
	for _, l := range b.links {
		l.Close()
	}
	if !b.tb.Failed() && os.Getenv(KeepEnv) == "1" {
		b.SaveHistory(b.recorder.History())
		b.tb.Logf("kept the test bed's folder ($%s=1): %s", KeepEnv, b.Dir)
		return
	}
	if !b.tb.Failed() {
		if err := os.RemoveAll(b.Dir); err != nil {
			b.tb.Logf("removing %s: %v", b.Dir, err)
		}
		return
	}
	for _, p := range b.procs {
		b.tb.Logf("--- %s (log tail) ---\n%s", p.Name, p.LogTail(3000))
	}
	if _, err := os.Stat(filepath.Join(b.Dir, historyFile)); err != nil {
		b.SaveHistory(b.recorder.History())
	}
	b.tb.Logf("FAILED with seed %d (rerun: %s=%d); logs, data and history kept in %s", b.Seed, SeedEnv, b.Seed, b.Dir)
}

// historyFile is where a failed run's history is saved, in the bed's
// folder.
const historyFile = "history.json"

// readyLine is what every meridian command prints once it serves.
const readyLine = " ready: "
