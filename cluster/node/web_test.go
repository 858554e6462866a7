package node_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/node"
)

// TestHTTPServersCloseWhatClientsHold: the broker's web server and a
// region's metrics server close a connection that stays idle after a
// request, one whose body never arrives, and one whose header never
// ends, each within its bound; idle and slow-body connections were held
// for as long as the client liked. The bounds are made short here; the
// test waits for the server's close, up to a minute.
func TestHTTPServersCloseWhatClientsHold(t *testing.T) {
	cfg := node.Standalone(t.TempDir())
	b := cfg.Regions[0].Broker
	b.BrokerAddr, b.WebAddr, b.AdvertisedHost = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1"
	short := node.HTTPConfig{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: time.Second, IdleTimeout: 200 * time.Millisecond, MaxConnections: 16}
	b.Web = short
	cfg.Regions[0].MetricsAddr, cfg.Regions[0].MetricsHTTP = "127.0.0.1:0", short
	cfg.Logger = testLogger()
	n := startNode(t, cfg)
	for _, base := range []string{n.Broker().WebURL(), strings.TrimSuffix(n.Regions()[0].MetricsURL(), "/metrics")} {
		host := strings.TrimPrefix(base, "http://")
		for _, tc := range []struct {
			name string
			send string
			// answered: a response comes first (the idle case)
			answered bool
		}{
			{"idle after a request", "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", true},
			{"a body that never arrives", "POST /admin/v2/namespaces/public/default/messageTTL HTTP/1.1\r\nHost: x\r\n" +
				"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n10", false},
			{"a header that never ends", "GET /metrics HTTP/1.1\r\nHost: x\r\n", false},
		} {
			t.Run(host+" "+tc.name, func(t *testing.T) {
				c, err := net.Dial("tcp", host)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := io.WriteString(c, tc.send); err != nil {
					t.Fatal(err)
				}
				if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
					t.Fatal(err)
				}
				r := bufio.NewReader(c)
				if tc.answered {
					resp, err := http.ReadResponse(r, nil)
					if err != nil {
						t.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				// Whatever else the server says, it must then close.
				if _, err := io.Copy(io.Discard, r); errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("the connection is still open after a minute")
				}
			})
		}
	}
}

// TestHTTPConfigValidate: the defaults validate, a zero HTTPConfig means
// them, and each bound is checked.
func TestHTTPConfigValidate(t *testing.T) {
	d := node.DefaultHTTPConfig()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.MaxConnections != 2048 || d.ReadHeaderTimeout != 10*time.Second || d.ReadTimeout != time.Minute ||
		d.IdleTimeout != time.Minute || d.WriteTimeout != 2*time.Minute {
		t.Fatalf("defaults %+v", d)
	}
	b := node.DefaultBrokerConfig("h")
	b.Web = node.HTTPConfig{}
	if err := b.Validate(); err != nil {
		t.Fatalf("a zero HTTPConfig: %v", err)
	}
	for _, bad := range []func(*node.HTTPConfig){
		func(c *node.HTTPConfig) { c.ReadHeaderTimeout = time.Millisecond },
		func(c *node.HTTPConfig) { c.ReadTimeout = c.ReadHeaderTimeout - 1 },
		func(c *node.HTTPConfig) { c.WriteTimeout = time.Millisecond },
		func(c *node.HTTPConfig) { c.IdleTimeout = 0 },
		func(c *node.HTTPConfig) { c.MaxConnections = -1 },
	} {
		c := node.DefaultHTTPConfig()
		bad(&c)
		if c.Validate() == nil {
			t.Errorf("%+v validated", c)
		}
	}
}
