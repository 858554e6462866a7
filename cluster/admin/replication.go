package admin

import (
	"context"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker"
)

// renderReplication fills s.Replication, Pulsar's map of replication
// stats by remote region, for topic tp: outbound from the replication
// task's state (its worker's record, wherever the worker runs, and the
// backlog this broker measures from the task's cursor), inbound from the
// replication producers the remote regions connected here
// (broker.ReplicationProducerPrefix + region), which s.Publishers already
// holds. A failure to read the workers' records shows as lastError, so
// the stats still answer.
func (h *handler) renderReplication(ctx context.Context, tp *broker.Topic, s *topicStats) {
	now := time.Now()
	repl, err := tp.ReplicationStats(ctx)
	if err != nil {
		h.log.Warn("replication stats incomplete", "topic", tp.Name(), "err", err)
	}
	for remote, st := range repl {
		rs := replicatorStats{
			Connected:              st.Task.Connected,
			MsgRateOut:             st.Task.MsgRateOut,
			MsgThroughputOut:       st.Task.MsgThroughputOut,
			MsgRateExpired:         st.Task.MsgRateExpired,
			ReplicationBacklog:     st.Backlog.Messages,
			OutboundConnection:     st.Task.OutboundConnection,
			OutboundConnectedSince: since(st.Task.OutboundConnectedSince),
			LastError:              st.Task.LastError,
		}
		if !st.Backlog.Oldest.IsZero() {
			rs.ReplicationDelayInSeconds = max(0, int64(now.Sub(st.Backlog.Oldest)/time.Second))
		}
		if !st.Reported && err != nil {
			rs.LastError = err.Error()
		}
		s.Replication[remote] = rs
	}
	for _, p := range s.Publishers {
		remote, ok := strings.CutPrefix(p.ProducerName, broker.ReplicationProducerPrefix)
		if !ok {
			continue
		}
		rs := s.Replication[remote]
		rs.MsgRateIn, rs.MsgThroughputIn = p.MsgRateIn, p.MsgThroughputIn
		rs.InboundConnection, rs.InboundConnectedSince = p.Address, p.ConnectedSince
		s.Replication[remote] = rs
	}
}

// addReplication folds a partition's replication stats into the
// partitioned topic's, as Pulsar's aggregation does: rates and backlogs add
// up, the delay is the largest, a link is connected only if every
// partition's is, and the connections and last error are any partition's
// (the first that has one).
func (s *topicStats) addReplication(parts map[string]replicatorStats) {
	for remote, p := range parts {
		rs, seen := s.Replication[remote]
		if !seen {
			s.Replication[remote] = p
			continue
		}
		rs.Connected = rs.Connected && p.Connected
		rs.MsgRateIn += p.MsgRateIn
		rs.MsgRateOut += p.MsgRateOut
		rs.MsgThroughputIn += p.MsgThroughputIn
		rs.MsgThroughputOut += p.MsgThroughputOut
		rs.MsgRateExpired += p.MsgRateExpired
		rs.ReplicationBacklog += p.ReplicationBacklog
		rs.ReplicationDelayInSeconds = max(rs.ReplicationDelayInSeconds, p.ReplicationDelayInSeconds)
		firstOf(&rs.InboundConnection, p.InboundConnection)
		firstOf(&rs.InboundConnectedSince, p.InboundConnectedSince)
		firstOf(&rs.OutboundConnection, p.OutboundConnection)
		firstOf(&rs.OutboundConnectedSince, p.OutboundConnectedSince)
		firstOf(&rs.LastError, p.LastError)
		s.Replication[remote] = rs
	}
}

// firstOf sets *dst to v unless it already holds a value.
func firstOf(dst *string, v string) {
	if *dst == "" {
		*dst = v
	}
}
