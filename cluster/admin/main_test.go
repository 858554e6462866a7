package admin_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"go.uber.org/goleak"

	"github.com/meridian-mq/meridian/cluster/admin"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/testkit"
)

// region is the broker the package's tests share (starting one is the
// slowest thing they do), on storage; each test works in its own tenant or
// namespace. web serves the admin API under test over region's topic
// service, and region advertises web's URL as its web service.
var (
	storage *brokertest.Storage
	region  *brokertest.Broker
	web     *httptest.Server
)

func testLogger() *slog.Logger {
	if os.Getenv("ADMIN_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// TestMain runs the tests with the shared region up, then fails the run if
// a goroutine outlives them. A producer's send-timeout timer in
// pulsar-client-go outlives the client's Close, for up to SendTimeout.
func TestMain(m *testing.M) {
	testkit.Main(withRegion{m},
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionProducer).failTimeoutMessages"))
}

// withRegion runs the tests between starting the shared region and
// stopping it, so that testkit.Main looks for leaks once it is stopped.
type withRegion struct{ *testing.M }

func (m withRegion) Run() int {
	slog.SetDefault(testLogger()) // parts below log to the default logger
	dir, err := os.MkdirTemp("", "admin-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if storage, err = brokertest.NewStorage(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, "start storage:", err)
		return 1
	}
	defer storage.Close()
	// The web server's address comes first, so that the broker can
	// advertise it; its handler comes once the broker runs.
	var handler http.Handler
	web = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	cfg := brokertest.DefaultConfig()
	cfg.WebURL = "http://" + web.Listener.Addr().String()
	if region, err = brokertest.Start(ctx, storage, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "start broker:", err)
		return 1
	}
	defer region.Close()
	if handler, err = admin.New(admin.DefaultConfig(), region.Service(), testLogger()); err != nil {
		fmt.Fprintln(os.Stderr, "admin.New:", err)
		return 1
	}
	web.Start()
	defer web.Close()
	defer web.CloseClientConnections()
	defer http.DefaultClient.CloseIdleConnections()
	return m.M.Run()
}

// startBroker starts another broker with cfg in the shared region, and
// its admin API on a web server of its own; both stop when the test ends.
func startBroker(t *testing.T, cfg brokertest.Config) (*brokertest.Broker, *httptest.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node, err := brokertest.Start(ctx, storage, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	h, err := admin.New(admin.DefaultConfig(), node.Service(), testLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return node, srv
}

// webURL is the web service region advertises: web's.
func webURL() string { return web.URL }

// newAdmin returns a pulsaradmin client of the server at url.
func newAdmin(t testing.TB, url string) pulsaradmin.Client {
	t.Helper()
	c, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: url})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// call sends a raw request to the admin API and returns the status and
// body.
func call(t testing.TB, method, path, body string, header ...string) (int, string) {
	t.Helper()
	status, b, _ := callHeader(t, method, path, body, header...)
	return status, b
}

// callHeader is call that also returns the answer's header.
func callHeader(t testing.TB, method, path, body string, header ...string) (int, string, http.Header) {
	t.Helper()
	return callAt(t, web.URL, method, path, body, header...)
}

// callAt is callHeader on the admin API served at baseURL.
func callAt(t testing.TB, baseURL, method, path, body string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, baseURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

var seq atomic.Int64

// uniq returns a suffix no other call in this process returns, so that the
// tests can run again (-count) on the shared region.
func uniq() string { return strconv.FormatInt(seq.Add(1), 10) }
