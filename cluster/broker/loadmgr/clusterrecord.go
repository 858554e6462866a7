package loadmgr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/global"
)

// The region's cluster record (/meridian/global/clusters/<region>) is how
// the other regions reach this one: their replicators connect to the hosts
// its brokerServiceUrl lists, and an active-region redirect names one of
// them. The region's first broker creates it with its own URLs and
// MaintainedByRegion set. While the mark is there, the leader keeps the
// Pulsar protocol's URLs naming every live broker that is not draining, a
// list of hosts, as an operator of a region of several brokers writes
// them, and the web service's URLs naming one of those brokers: a record
// that named only the first broker would stop replication into the region
// while that broker is down. A record without the mark is the operator's
// (a load balancer's URL, say) and is left as it is.

// clusterRecordInterval is how often the leader compares the record with
// the live brokers. A broker that dies leaves the record once its
// registration's lease has expired and a pass has run; the hosts a record
// still names are tried in turn meanwhile.
const clusterRecordInterval = 5 * time.Second

// errOperatorsRecord stops the rewrite of a record the operator took over
// since the leader read it.
var errOperatorsRecord = errors.New("the cluster record is the operator's")

// maintainClusterRecord rewrites the region's record to name its live
// brokers, if the region maintains the record and it names others.
func (m *Manager) maintainClusterRecord(ctx context.Context) error {
	d, ok := m.policies.Cluster(m.cfg.Region)
	if !ok || !d.MaintainedByRegion {
		return nil
	}
	brokers, err := liveBrokers(ctx, m.store, m.cfg.Region)
	if err != nil {
		return err
	}
	want, ok := brokerURLs(brokers)
	if !ok || sameURLs(d, want) {
		return nil
	}
	_, _, err = m.gstore.UpdateCluster(ctx, m.cfg.Region, func(d *global.ClusterData) error {
		if !d.MaintainedByRegion {
			return errOperatorsRecord
		}
		d.ServiceURL, d.ServiceURLTLS = want.ServiceURL, want.ServiceURLTLS
		d.BrokerServiceURL, d.BrokerServiceURLTLS = want.BrokerServiceURL, want.BrokerServiceURLTLS
		return nil
	})
	switch {
	case errors.Is(err, errOperatorsRecord):
		return nil
	case err != nil:
		return fmt.Errorf("update the cluster record of %s: %w", m.cfg.Region, err)
	}
	m.log.Info("the cluster record names the region's brokers", "region", m.cfg.Region,
		"brokerServiceUrl", want.BrokerServiceURL, "serviceUrl", want.ServiceURL)
	return nil
}

// brokerURLs is the four URLs of a record for brokers, all but the draining
// ones, in their order: the Pulsar protocol's URLs list every one of them,
// the web service's name the first (an http URL names one host, in Pulsar
// as in Go's url package). ok is false when none is left.
func brokerURLs(brokers []LiveBroker) (d global.ClusterData, ok bool) {
	var service, serviceTLS []string
	for _, b := range brokers {
		if b.Draining {
			continue
		}
		if len(service) == 0 {
			d.ServiceURL, d.ServiceURLTLS = b.WebURL, b.WebURLTLS
		}
		service, serviceTLS = appendHosts(service, b.ServiceURL), appendHosts(serviceTLS, b.ServiceURLTLS)
	}
	if len(service) == 0 {
		return global.ClusterData{}, false
	}
	d.BrokerServiceURL, d.BrokerServiceURLTLS = joinHosts("pulsar", service), joinHosts("pulsar+ssl", serviceTLS)
	return d, true
}

func appendHosts(hosts []string, url string) []string {
	_, h, ok := global.ServiceHosts(url)
	if !ok {
		return hosts // none (no TLS listener, say)
	}
	return append(hosts, h...)
}

func joinHosts(scheme string, hosts []string) string {
	if len(hosts) == 0 {
		return ""
	}
	return scheme + "://" + strings.Join(hosts, ",")
}

func sameURLs(a, b global.ClusterData) bool {
	return a.ServiceURL == b.ServiceURL && a.ServiceURLTLS == b.ServiceURLTLS &&
		a.BrokerServiceURL == b.BrokerServiceURL && a.BrokerServiceURLTLS == b.BrokerServiceURLTLS
}
