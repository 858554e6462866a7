package node

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
)

// advertisedListeners is a parsed BrokerConfig.AdvertisedListeners.
type advertisedListeners struct {
	// byName holds every listener, the internal one included.
	byName map[string]loadmgr.Listener
	// internal is the name of the listener whose URLs are the broker's
	// own: what a lookup that names no listener, the region's other
	// brokers, the replicators and the cluster record use.
	internal string
}

// parseAdvertisedListeners reads Pulsar's advertisedListeners,
// name:pulsar://host:port[,name:pulsar+ssl://host:port]..., and
// internalListenerName, with the rules of Pulsar's
// MultipleListenerValidator, as errors rather than guesses:
//   - every entry is name:URL, the URL pulsar:// or pulsar+ssl:// with a
//     host and a port;
//   - a listener has one URL of each scheme, and a pulsar:// one (a
//     client that names it must have somewhere to go without TLS);
//   - one host:port belongs to one listener;
//   - the internal listener is internal, or the first one named when
//     internal is empty, and must be one of them.
//
// An empty spec is no listeners, with no internal name allowed.
func parseAdvertisedListeners(spec, internal string) (advertisedListeners, error) {
	if strings.TrimSpace(spec) == "" {
		if internal != "" {
			return advertisedListeners{}, fmt.Errorf("internalListenerName %q is set but advertisedListeners is empty", internal)
		}
		return advertisedListeners{}, nil
	}
	out := advertisedListeners{byName: map[string]loadmgr.Listener{}, internal: internal}
	owners := map[string]string{} // host:port -> the listener it belongs to
	for entry := range strings.SplitSeq(spec, ",") {
		entry = strings.TrimSpace(entry)
		name, raw, ok := strings.Cut(entry, ":")
		name, raw = strings.TrimSpace(name), strings.TrimSpace(raw)
		if !ok || name == "" || raw == "" {
			return advertisedListeners{}, fmt.Errorf("advertisedListeners entry %q: want name:pulsar://host:port or name:pulsar+ssl://host:port", entry)
		}
		u, err := url.Parse(raw)
		if err != nil {
			return advertisedListeners{}, fmt.Errorf("advertisedListeners entry %q: %v", entry, err)
		}
		scheme := strings.ToLower(u.Scheme)
		if scheme != "pulsar" && scheme != "pulsar+ssl" {
			return advertisedListeners{}, fmt.Errorf("advertisedListeners entry %q: the scheme must be pulsar:// or pulsar+ssl://", entry)
		}
		if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 || u.Hostname() == "" || (u.Path != "" && u.Path != "/") {
			return advertisedListeners{}, fmt.Errorf("advertisedListeners entry %q: want %s://host:port, with a port from 1 to 65535 and nothing after it", entry, scheme)
		}
		hostPort := net.JoinHostPort(u.Hostname(), u.Port())
		if other, taken := owners[hostPort]; taken && other != name {
			return advertisedListeners{}, fmt.Errorf("advertisedListeners: %s is given to both listener %q and listener %q; one address belongs to one listener", hostPort, other, name)
		}
		owners[hostPort] = name
		if out.internal == "" {
			out.internal = name
		}
		l := out.byName[name]
		at := &l.ServiceURL
		if scheme == "pulsar+ssl" {
			at = &l.ServiceURLTLS
		}
		if *at != "" {
			return advertisedListeners{}, fmt.Errorf("advertisedListeners: listener %q has two %s:// URLs", name, scheme)
		}
		*at = scheme + "://" + hostPort
		out.byName[name] = l
	}
	for name, l := range out.byName {
		if l.ServiceURL == "" {
			return advertisedListeners{}, fmt.Errorf("advertisedListeners: listener %q has no pulsar:// URL", name)
		}
	}
	if _, ok := out.byName[out.internal]; !ok {
		return advertisedListeners{}, fmt.Errorf("internalListenerName %q is not one of advertisedListeners' listeners", out.internal)
	}
	return out, nil
}

// hasTLS reports whether a listener sends clients to a pulsar+ssl:// URL.
func (a advertisedListeners) hasTLS() bool {
	for _, l := range a.byName {
		if l.ServiceURLTLS != "" {
			return true
		}
	}
	return false
}
