package main

// The -bluegreen mode: the client's blue-green migration suite
// (TestBlueGreenMigrationTestSuite, -tags extensible_load_manager), which
// upstream runs against two Pulsar clusters, blue (cluster-a, of
// integration-tests/extensible-load-manager) and green (cluster-green, of
// integration-tests/blue-green), each with its own metadata store. Here
// they are two regions of two brokers each, each region a cluster of its
// own (its etcd holds its global configuration too), as upstream's are.
//
//	go run ./e2e/compat -bluegreen
//
// The suite's one case, proxyConnection, posts Pulsar's cluster migration
// (PIP-188) to blue for cluster-a, with green's URLs, while a producer and
// a consumer run on blue; the clients must move to green, and then follow
// a bundle unloaded to green's other broker. Meridian has no proxy, so
// the case runs against a broker directly: the suite's proxy:6650 and
// proxy:8080 become blue's broker-1, and green-proxy's green's broker-1.
// The other host:port pairs become the regions' brokers, on free ports
// picked for the run (blueGreenMode), and the TLS URLs of the migration
// body (green-proxy:6651 and :8081; nothing serves TLS in either
// upstream's set-up or here) a free port where nothing listens.
//
// The suite checks that green's lookups answer with green's brokers, which
// they do whether or not the clients moved: the runner counts its pass only
// if blue's brokers sent a producer and a consumer away (watchMigrated).

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/testkit"
)

// blueGreenSuite is the suite -bluegreen runs. The default run leaves it
// to -bluegreen (runElsewhere): it is built only with the mode's tag.
const blueGreenSuite = "TestBlueGreenMigrationTestSuite"

// The suite's clusters: blue's name is the one it migrates, green's is
// upstream's.
const (
	blueRegion  = "cluster-a"
	greenRegion = "cluster-green"
)

// blueGreenMode is the -bluegreen mode, on free loopback ports.
func blueGreenMode() (suiteMode, error) {
	ports, err := testkit.FreePorts(9)
	if err != nil {
		return suiteMode{}, err
	}
	at := func(i int) string { return "localhost:" + strconv.Itoa(ports[i]) }
	blue1 := brokerSpec{"blue-broker-1", at(0), at(1)}
	blue2 := brokerSpec{"blue-broker-2", at(2), at(3)}
	green1 := brokerSpec{"green-broker-1", at(4), at(5)}
	green2 := brokerSpec{"green-broker-2", at(6), at(7)}
	noTLS := at(8)
	return suiteMode{
		name:  "bluegreen",
		tags:  "extensible_load_manager",
		files: []string{"blue_green_migration_test.go"},
		hosts: []string{
			"green-proxy:6650", green1.addr, "green-proxy:8080", green1.web,
			"green-proxy:6651", noTLS, "green-proxy:8081", noTLS,
			"green-broker-1:6650", green1.addr, "green-broker-1:8080", green1.web,
			"green-broker-2:6650", green2.addr, "green-broker-2:8080", green2.web,
			"proxy:6650", blue1.addr, "proxy:8080", blue1.web,
			"broker-1:6650", blue1.addr, "broker-1:8080", blue1.web,
			"broker-2:6650", blue2.addr, "broker-2:8080", blue2.web,
		},
		leftover: regexp.MustCompile(`(proxy|broker-[12]):\d+`),
		regions: []regionSpec{
			{name: blueRegion, brokers: []brokerSpec{blue1, blue2}},
			{name: greenRegion, brokers: []brokerSpec{green1, green2}},
		},
		refused: []string{noTLS},
		tests: []suiteTest{{
			test: blueGreenSuite, sub: []string{"TestTopicMigration", "proxyConnection"},
			note: fmt.Sprintf("runs against a broker directly, not through a proxy (Meridian has none): proxy is blue's broker-1 (%s), green-proxy green's broker-1 (%s)",
				blue1.addr, green1.addr),
			watch: watchMigrated,
		}},
	}, nil
}

// watchMigrated runs the blue-green test and fails a pass unless blue's
// brokers sent at least one producer and one consumer to another cluster
// meanwhile (meridian_broker_clients_migrated_total): a run in which the
// migration moved nobody passes the suite too, its clients staying on blue.
func watchMigrated(ctx context.Context, regions []startedRegion, run func() result) result {
	blue := regions[0]
	before, err := migratedClients(ctx, blue)
	if err != nil {
		return result{Result: "fail", Reason: err.Error()}
	}
	res := run()
	after, err := migratedClients(ctx, blue)
	if err != nil {
		res.Result, res.Reason = "fail", err.Error()
		return res
	}
	moved := map[string]float64{}
	for kind, n := range after {
		moved[kind] = n - before[kind]
	}
	if res.Result == "pass" && (moved["producer"] < 1 || moved["consumer"] < 1) {
		res.Result = "fail"
		res.Reason = fmt.Sprintf("the migration moved %v producers and %v consumers off %s (meridian_broker_clients_migrated_total); the suite passes without a move",
			moved["producer"], moved["consumer"], blue.name)
	}
	return res
}

// migratedClients sums meridian_broker_clients_migrated_total by kind over
// the region's brokers.
func migratedClients(ctx context.Context, rs startedRegion) (map[string]float64, error) {
	const metric = "meridian_broker_clients_migrated_total"
	kind := regexp.MustCompile(`^` + metric + `\{kind="([a-z]+)"\} (\S+)$`)
	out := map[string]float64{}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, b := range rs.brokers {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.web+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("the metrics of %s: %w", b.name, err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			m := kind.FindStringSubmatch(strings.TrimSpace(sc.Text()))
			if m == nil {
				continue
			}
			n, err := strconv.ParseFloat(m[2], 64)
			if err == nil {
				out[m[1]] += n
			}
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("the metrics of %s: %w", b.name, err)
		}
	}
	return out, nil
}
