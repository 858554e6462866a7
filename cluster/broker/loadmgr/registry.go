package loadmgr

import (
	"context"
	"fmt"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire"
)

// BrokerRecord is the value of a broker's registration key,
// /meridian/regions/<r>/brokers/<id>, written under the broker's session
// lease, the same lease its bundle claims hang on. Only the broker itself
// writes it (ownership.updateRecord): the other brokers read it to find
// the region's live brokers, their load and whether they take bundles.
type BrokerRecord struct {
	Owner
	// Draining is set by a broker that is shutting down: it takes no new
	// bundles, and hands over the ones it has.
	Draining bool `json:"draining,omitempty"`
	// Load is the broker's latest load report; nil before its first.
	Load *LoadReport `json:"load,omitempty"`
}

// LoadReport is what a broker publishes about its load, in the names and
// units of Pulsar's LocalBrokerData (pulsaradmin's utils.LocalBrokerData):
// rates per second over the last report interval. CPU is the broker
// process's own CPU time and Memory its Go heap, not the host's: brokers
// that share a host would otherwise all report the same figures.
type LoadReport struct {
	WebServiceURL       string `json:"webServiceUrl"`
	WebServiceURLTLS    string `json:"webServiceUrlTls"`
	PulsarServiceURL    string `json:"pulsarServiceUrl"`
	PulsarServiceURLTLS string `json:"pulsarServiceUrlTls"`

	PersistentTopicsEnabled    bool `json:"persistentTopicsEnabled"`
	NonPersistentTopicsEnabled bool `json:"nonPersistentTopicsEnabled"`

	CPU          ResourceUsage `json:"cpu"`
	Memory       ResourceUsage `json:"memory"`
	DirectMemory ResourceUsage `json:"directMemory"`
	BandwidthIn  ResourceUsage `json:"bandwidthIn"`
	BandwidthOut ResourceUsage `json:"bandwidthOut"`

	MsgThroughputIn  float64 `json:"msgThroughputIn"`
	MsgThroughputOut float64 `json:"msgThroughputOut"`
	MsgRateIn        float64 `json:"msgRateIn"`
	MsgRateOut       float64 `json:"msgRateOut"`

	// LastUpdate is when the report was made, in Unix milliseconds.
	LastUpdate int64 `json:"lastUpdate"`

	// LastStats holds the figures of each bundle this broker owns, by
	// "<tenant>/<namespace>/<bundle range>".
	LastStats    map[string]BundleStats `json:"lastStats"`
	NumTopics    int                    `json:"numTopics"`
	NumBundles   int                    `json:"numBundles"`
	NumConsumers int                    `json:"numConsumers"`
	NumProducers int                    `json:"numProducers"`

	Bundles          []string `json:"bundles"`
	LastBundleGains  []string `json:"lastBundleGains"`
	LastBundleLosses []string `json:"lastBundleLosses"`

	// Connections is the broker's open client connections (Meridian's
	// own field: Pulsar reports them per bundle only, as sessions).
	Connections int `json:"connections"`
}

// ResourceUsage is pulsaradmin's ResourceUsage: a usage and its limit, in
// the resource's own unit (CPU in percent of one core, memory in MiB).
type ResourceUsage struct {
	Usage float64 `json:"usage"`
	Limit float64 `json:"limit"`
}

// BundleStats is pulsaradmin's NamespaceBundleStats: one bundle's load.
type BundleStats struct {
	MsgRateIn        float64 `json:"msgRateIn"`
	MsgThroughputIn  float64 `json:"msgThroughputIn"`
	MsgRateOut       float64 `json:"msgRateOut"`
	MsgThroughputOut float64 `json:"msgThroughputOut"`
	ConsumerCount    int     `json:"consumerCount"`
	ProducerCount    int     `json:"producerCount"`
	TopicsCount      int64   `json:"topics"`
	CacheSize        int64   `json:"cacheSize"`
}

// LiveBroker is a registered broker as read from the store.
type LiveBroker struct {
	BrokerRecord
	// Lease is the lease the registration hangs on: the broker's session,
	// which its bundle claims share.
	Lease meta.LeaseID
}

// liveBrokers reads the registrations of region's live brokers, in key
// order. A record that does not decode is skipped, not fatal: one bad
// value must not stop every lookup of the region.
func liveBrokers(ctx context.Context, store meta.Store, region string) ([]LiveBroker, error) {
	kvs, _, err := store.List(ctx, meta.Prefix(meta.RegionKey(region, "brokers")))
	if err != nil {
		return nil, fmt.Errorf("%w: list brokers of %s: %v", wire.ErrMetadata, region, err)
	}
	out := make([]LiveBroker, 0, len(kvs))
	for _, kv := range kvs {
		var r BrokerRecord
		if _, err := meta.DecodeJSON(kv.Value, 1, &r); err == nil && r.BrokerID != "" {
			out = append(out, LiveBroker{BrokerRecord: r, Lease: kv.Lease})
		}
	}
	return out, nil
}
