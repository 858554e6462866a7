package admin

import (
	"net/http"

	"github.com/meridian-mq/meridian/cluster/broker"
)

// This file is Pulsar's broker-stats endpoints as pulsaradmin's
// BrokerStats reads them: /metrics, a list of dimensioned metric sets, one
// per namespace with topics loaded here (Pulsar's brk_* names), and
// /topics, the stats of every topic loaded here by namespace, bundle and
// domain.

func (h *handler) routeBrokerStats() {
	h.handle("GET /admin/v2/broker-stats/metrics", opSuperUser, h.brokerMetrics)
	h.handle("GET /admin/v2/broker-stats/topics", opSuperUser, h.brokerTopics)
}

// brokerMetricSet is pulsaradmin's utils.Metrics.
type brokerMetricSet struct {
	Metrics    map[string]any    `json:"metrics"`
	Dimensions map[string]string `json:"dimensions"`
}

func (h *handler) brokerMetrics(w http.ResponseWriter, r *http.Request) error {
	namespaces, _ := broker.NamespaceMetrics(h.svc.TopicMetrics(r.Context()))
	out := []brokerMetricSet{}
	for _, ns := range namespaces {
		var replBacklog, maxDelay int64
		for _, rm := range ns.Replication {
			replBacklog += rm.Backlog
			maxDelay = max(maxDelay, rm.DelaySeconds)
		}
		out = append(out, brokerMetricSet{
			Dimensions: map[string]string{"broker": h.svc.Self().BrokerID, "cluster": h.svc.Region(), "namespace": ns.Namespace},
			Metrics: map[string]any{
				"brk_in_rate": ns.RateIn, "brk_in_tp_rate": ns.ThroughputIn,
				"brk_out_rate": ns.RateOut, "brk_out_tp_rate": ns.ThroughputOut,
				"brk_storage_size": ns.StorageSize, "brk_msg_backlog": ns.MsgBacklog,
				"brk_no_of_producers": ns.Producers, "brk_no_of_subscriptions": ns.Subscriptions,
				"brk_no_of_consumers": ns.Consumers, "brk_no_of_replicators": len(ns.Replication),
				"brk_replication_backlog": replBacklog, "brk_max_replication_delay_second": maxDelay,
			},
		})
	}
	return ok(w, out)
}

// brokerTopics answers {namespace: {bundle: {domain: {topic: stats}}}}, as
// Pulsar's broker-stats/topics.
func (h *handler) brokerTopics(w http.ResponseWriter, r *http.Request) error {
	out := map[string]map[string]map[string]map[string]topicStats{}
	for _, tp := range h.svc.LoadedTopics() {
		t := tp.TopicName()
		b, err := h.svc.Bundle(t)
		if err != nil {
			continue // its policies went away: no longer served here
		}
		ns := t.NamespaceName()
		if out[ns] == nil {
			out[ns] = map[string]map[string]map[string]topicStats{}
		}
		if out[ns][b.String()] == nil {
			out[ns][b.String()] = map[string]map[string]topicStats{}
		}
		domain := string(t.Domain)
		if out[ns][b.String()][domain] == nil {
			out[ns][b.String()][domain] = map[string]topicStats{}
		}
		st := h.renderStats(t.String(), tp.Stats(), h.dedup(t))
		h.renderReplication(r.Context(), tp, &st)
		out[ns][b.String()][domain][t.String()] = st
	}
	return ok(w, out)
}
