package drill

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// Which region a client is attached to.
//
// pulsar-client-go tells its application nothing of the broker a producer
// or consumer is attached to, but it logs it: a producer's "Connected
// producer" carries the connection ("local -> remote"), and a consumer's
// lookup logs "Lookup result: " with the broker's physical address before
// its "Connected consumer". Every workload client has a client of its own
// and so a logger of its own (where), which follows those lines and maps
// the broker's address to its region through the cluster records
// (addresses). A region with several brokers behind one record name is
// mapped by host when the brokers' addresses are not in the record; an
// address that maps to nothing is recorded as "?".
//
// Rejected: asking each region's topic stats where each client is. Polls
// are coarse at a switch, exactly where the RTO is measured, and they add
// load to the regions under test.

// addresses maps a broker's "host:port" (and its resolved IPs) to a region.
type addresses map[string]string

// addRegion maps every host of serviceURL (one or several) to region,
// with the IPs its names resolve to.
func (a addresses) addRegion(ctx context.Context, region, serviceURL string) {
	rest := serviceURL
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	for _, hp := range strings.Split(strings.TrimSuffix(rest, "/"), ",") {
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			continue
		}
		a[net.JoinHostPort(host, port)] = region
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil {
			continue
		}
		for _, ip := range ips {
			a[net.JoinHostPort(ip, port)] = region
		}
	}
}

// region is the region of a broker address, "?" when unknown.
func (a addresses) region(hostport string) string {
	if r, ok := a[hostport]; ok {
		return r
	}
	return "?"
}

// where is one client's logger: it follows the client's connections and
// knows the region of the broker its producer or consumer is on now.
type where struct {
	addrs   addresses
	current atomic.Pointer[string] // the region now; nil before the first connection
	mu      sync.Mutex
	lookup  string // a consumer's last lookup's broker address
}

func newWhere(addrs addresses) *where { return &where{addrs: addrs} }

// Region is the region the client is attached to now, "" before it first
// connected.
func (w *where) Region() string {
	if r := w.current.Load(); r != nil {
		return *r
	}
	return ""
}

func (w *where) set(hostport string) {
	r := w.addrs.region(hostport)
	w.current.Store(&r)
}

// observe reads one log line.
func (w *where) observe(msg string, fields plog.Fields, args []any) {
	switch {
	case msg == "Connected producer":
		cnx, _ := fields["cnx"].(string)
		if _, remote, ok := strings.Cut(cnx, " -> "); ok {
			w.set(strings.TrimSpace(remote))
		}
	case strings.HasPrefix(msg, "Lookup result"):
		if addr := lastBrokerAddress(fmt.Sprint(args[1:]...)); addr != "" {
			w.mu.Lock()
			w.lookup = addr
			w.mu.Unlock()
		}
	case msg == "Connected consumer":
		w.mu.Lock()
		addr := w.lookup
		w.mu.Unlock()
		if addr != "" {
			w.set(addr)
		}
	}
}

// lastBrokerAddress returns the host:port of the last pulsar:// or
// pulsar+ssl:// URL in s (a LookupResult prints its logical address, then
// its physical one).
func lastBrokerAddress(s string) string {
	var last string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '{' || r == '}' || r == '&' }) {
		if u, err := url.Parse(f); err == nil && strings.HasPrefix(u.Scheme, "pulsar") && u.Host != "" {
			last = u.Host
		}
	}
	return last
}

// logger is where as a pulsar-client-go logger; fields accumulate as the
// client's sub-loggers and entries add them.
type logger struct {
	w      *where
	fields plog.Fields
}

func (l logger) with(f plog.Fields) logger {
	merged := make(plog.Fields, len(l.fields)+len(f))
	for k, v := range l.fields {
		merged[k] = v
	}
	for k, v := range f {
		merged[k] = v
	}
	return logger{w: l.w, fields: merged}
}

func (l logger) line(args []any) {
	if len(args) > 0 {
		if msg, ok := args[0].(string); ok {
			l.w.observe(msg, l.fields, args)
		}
	}
}

func (l logger) SubLogger(f plog.Fields) plog.Logger     { return l.with(f) }
func (l logger) WithFields(f plog.Fields) plog.Entry     { return l.with(f) }
func (l logger) WithField(name string, v any) plog.Entry { return l.with(plog.Fields{name: v}) }
func (l logger) WithError(err error) plog.Entry          { return l.with(plog.Fields{"error": err}) }
func (l logger) Debug(args ...any)                       { l.line(args) }
func (l logger) Info(args ...any)                        { l.line(args) }
func (l logger) Warn(args ...any)                        {}
func (l logger) Error(args ...any)                       {}
func (l logger) Debugf(format string, args ...any)       {}
func (l logger) Infof(format string, args ...any)        {}
func (l logger) Warnf(format string, args ...any)        {}
func (l logger) Errorf(format string, args ...any)       {}

var _ plog.Logger = logger{}
