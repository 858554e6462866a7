package admin

import (
	"net/http"
	"sync"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/mledger"
)

// The JSON of topic statistics, with the field names of Pulsar's
// TopicStats (pulsaradmin's utils.TopicStats and its parts). Counters are
// the broker's; rates are computed here (see rates).
type (
	topicStats struct {
		MsgRateIn           float64                      `json:"msgRateIn"`
		MsgThroughputIn     float64                      `json:"msgThroughputIn"`
		MsgRateOut          float64                      `json:"msgRateOut"`
		MsgThroughputOut    float64                      `json:"msgThroughputOut"`
		MsgInCounter        int64                        `json:"msgInCounter"`
		BytesInCounter      int64                        `json:"bytesInCounter"`
		MsgOutCounter       int64                        `json:"msgOutCounter"`
		BytesOutCounter     int64                        `json:"bytesOutCounter"`
		AverageMsgSize      float64                      `json:"averageMsgSize"`
		StorageSize         int64                        `json:"storageSize"`
		BacklogSize         int64                        `json:"backlogSize"`
		Publishers          []publisherStats             `json:"publishers"`
		Subscriptions       map[string]subscriptionStats `json:"subscriptions"`
		Replication         map[string]replicatorStats   `json:"replication"`
		DeduplicationStatus string                       `json:"deduplicationStatus"`
		// Unix milliseconds, 0 for unknown (a topic created before its
		// creation time was kept) or never (no message since it loaded).
		TopicCreationTimeStamp int64 `json:"topicCreationTimeStamp"`
		LastPublishTimestamp   int64 `json:"lastPublishTimestamp"`
	}
	publisherStats struct {
		AccessMode      string            `json:"accessMode"`
		ProducerID      int64             `json:"producerId"`
		ProducerName    string            `json:"producerName"`
		MsgRateIn       float64           `json:"msgRateIn"`
		MsgThroughputIn float64           `json:"msgThroughputIn"`
		AverageMsgSize  float64           `json:"averageMsgSize"`
		MsgInCounter    int64             `json:"msgInCounter"`
		BytesInCounter  int64             `json:"bytesInCounter"`
		Address         string            `json:"address"`
		ConnectedSince  string            `json:"connectedSince"`
		ClientVersion   string            `json:"clientVersion"`
		Metadata        map[string]string `json:"metadata"`
	}
	subscriptionStats struct {
		Type             string  `json:"type"`
		MsgRateOut       float64 `json:"msgRateOut"`
		MsgThroughputOut float64 `json:"msgThroughputOut"`
		MsgRateRedeliver float64 `json:"msgRateRedeliver"`
		MessageAckRate   float64 `json:"messageAckRate"`
		MsgRateExpired   float64 `json:"msgRateExpired"`
		TotalMsgExpired  int64   `json:"totalMsgExpired"`
		// BlockedSubscriptionOnUnackedMsgs: dispatch waits for acks
		// (maxUnackedMessagesOnSubscription).
		BlockedSubscriptionOnUnackedMsgs bool   `json:"blockedSubscriptionOnUnackedMsgs"`
		MsgBacklog                       int64  `json:"msgBacklog"`
		MsgBacklogNoDelayed              int64  `json:"msgBacklogNoDelayed"`
		MsgDelayed                       int64  `json:"msgDelayed"`
		BacklogSize                      int64  `json:"backlogSize"`
		UnackedMessages                  int64  `json:"unackedMessages"`
		ActiveConsumerName               string `json:"activeConsumerName"`
		MsgOutCounter                    int64  `json:"msgOutCounter"`
		BytesOutCounter                  int64  `json:"bytesOutCounter"`
		// IgnoredAckCount is Meridian's: the acked ids the broker ignored
		// as never delivered to the consumer that acked them.
		IgnoredAckCount int64 `json:"ignoredAckCount"`
		IsDurable       bool  `json:"isDurable"`
		IsReplicated    bool  `json:"isReplicated"`
		// ReplicatedStateAgeSeconds is Meridian's: per other region, the
		// age of its state of this replicated subscription last applied
		// here (how far behind that region's acks this one may be).
		ReplicatedStateAgeSeconds        map[string]float64 `json:"replicatedStateAgeSeconds,omitempty"`
		Consumers                        []consumerStats    `json:"consumers"`
		ConsumersAfterMarkDeletePosition map[string]string  `json:"consumersAfterMarkDeletePosition"`
		SubscriptionProperties           map[string]string  `json:"subscriptionProperties"`
	}
	consumerStats struct {
		ConsumerName     string            `json:"consumerName"`
		AvailablePermits int64             `json:"availablePermits"`
		UnackedMessages  int64             `json:"unackedMessages"`
		MsgRateOut       float64           `json:"msgRateOut"`
		MsgThroughputOut float64           `json:"msgThroughputOut"`
		MsgOutCounter    int64             `json:"msgOutCounter"`
		BytesOutCounter  int64             `json:"bytesOutCounter"`
		Address          string            `json:"address"`
		ConnectedSince   string            `json:"connectedSince"`
		ClientVersion    string            `json:"clientVersion"`
		Metadata         map[string]string `json:"metadata"`
		// Unix milliseconds, 0 for never.
		LastAckedTimestamp        int64 `json:"lastAckedTimestamp"`
		LastConsumedTimestamp     int64 `json:"lastConsumedTimestamp"`
		LastConsumedFlowTimestamp int64 `json:"lastConsumedFlowTimestamp"`
	}
	// replicatorStats is pulsaradmin's ReplicatorStats, plus LastError
	// (ours): the last failure of the replication task, empty when none.
	// See replication.go.
	replicatorStats struct {
		Connected                 bool    `json:"connected"`
		MsgRateIn                 float64 `json:"msgRateIn"`
		MsgRateOut                float64 `json:"msgRateOut"`
		MsgThroughputIn           float64 `json:"msgThroughputIn"`
		MsgThroughputOut          float64 `json:"msgThroughputOut"`
		MsgRateExpired            float64 `json:"msgRateExpired"`
		ReplicationBacklog        int64   `json:"replicationBacklog"`
		ReplicationDelayInSeconds int64   `json:"replicationDelayInSeconds"`
		InboundConnection         string  `json:"inboundConnection"`
		InboundConnectedSince     string  `json:"inboundConnectedSince"`
		OutboundConnection        string  `json:"outboundConnection"`
		OutboundConnectedSince    string  `json:"outboundConnectedSince"`
		LastError                 string  `json:"lastError"`
	}
	partitionedTopicStats struct {
		topicStats
		Metadata   partitionedMetadata   `json:"metadata"`
		Partitions map[string]topicStats `json:"partitions,omitempty"`
	}
)

// rates turns counters into rates: each stats call records a topic's,
// publisher's and subscription's counters, and the rate is the change since
// the previous call divided by the time between them (0 on the first call,
// or when the counter went down because the topic was reloaded). Pulsar
// instead samples every statsUpdateFrequencyInSecs; computing on demand
// costs nothing between calls and gives the average since the previous
// look, which is what a poller sees either way.
//
// The samples are bounded by count (Config.MaxRateSamples): when full they
// are all forgotten, and rates start again from 0.
type rates struct {
	max int
	mu  struct {
		sync.Mutex
		samples map[string]sample
	}
}

type sample struct {
	at          time.Time
	msgs, bytes int64
}

func newRates(max int) *rates {
	r := &rates{max: max}
	r.mu.samples = make(map[string]sample)
	return r
}

// rate records the counters of key at now and returns the message and byte
// rates per second since the previous record.
func (r *rates) rate(key string, now time.Time, msgs, bytes int64) (msgRate, byteRate float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, seen := r.mu.samples[key]
	if !seen && len(r.mu.samples) >= r.max {
		clear(r.mu.samples)
	}
	r.mu.samples[key] = sample{at: now, msgs: msgs, bytes: bytes}
	dt := now.Sub(prev.at).Seconds()
	if !seen || dt <= 0 || msgs < prev.msgs || bytes < prev.bytes {
		return 0, 0
	}
	return float64(msgs-prev.msgs) / dt, float64(bytes-prev.bytes) / dt
}

func average(bytes, msgs int64) float64 {
	if msgs <= 0 {
		return 0
	}
	return float64(bytes) / float64(msgs)
}

func since(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// renderStats renders a topic's statistics.
func (h *handler) renderStats(name string, st broker.TopicStats, dedup bool) topicStats {
	now := time.Now()
	out := topicStats{
		MsgInCounter: st.MsgInCounter, BytesInCounter: st.BytesInCounter,
		MsgOutCounter: st.MsgOutCounter, BytesOutCounter: st.BytesOutCounter,
		AverageMsgSize:         average(st.BytesInCounter, st.MsgInCounter),
		StorageSize:            st.StorageSize,
		Publishers:             []publisherStats{},
		Subscriptions:          map[string]subscriptionStats{},
		Replication:            map[string]replicatorStats{},
		DeduplicationStatus:    map[bool]string{true: "Enabled", false: "Disabled"}[dedup],
		TopicCreationTimeStamp: unixMillis(st.Created),
		LastPublishTimestamp:   st.LastPublishMillis,
	}
	out.MsgRateIn, out.MsgThroughputIn = h.rates.rate(name+"\x00in", now, st.MsgInCounter, st.BytesInCounter)
	out.MsgRateOut, out.MsgThroughputOut = h.rates.rate(name+"\x00out", now, st.MsgOutCounter, st.BytesOutCounter)
	for _, p := range st.Publishers {
		ps := publisherStats{AccessMode: p.AccessMode, ProducerID: int64(p.ProducerID), ProducerName: p.ProducerName,
			MsgInCounter: p.MsgInCounter, BytesInCounter: p.BytesInCounter,
			AverageMsgSize: average(p.BytesInCounter, p.MsgInCounter), Address: p.Address,
			ConnectedSince: since(p.ConnectedSince), ClientVersion: p.ClientVersion, Metadata: p.Metadata}
		ps.MsgRateIn, ps.MsgThroughputIn = h.rates.rate(name+"\x00p\x00"+p.ProducerName, now, p.MsgInCounter, p.BytesInCounter)
		out.Publishers = append(out.Publishers, ps)
	}
	for sub, s := range st.Subscriptions {
		ss := subscriptionStats{Type: s.Type, MsgBacklog: s.MsgBacklog, MsgBacklogNoDelayed: max(0, s.MsgBacklog-s.DelayedMessages),
			MsgDelayed: s.DelayedMessages, UnackedMessages: s.UnackedMessages, ActiveConsumerName: s.ActiveConsumerName,
			MsgOutCounter: s.MsgOutCounter, BytesOutCounter: s.BytesOutCounter, IgnoredAckCount: s.IgnoredAcks, IsDurable: s.Durable,
			IsReplicated: s.Replicated, ReplicatedStateAgeSeconds: ageSeconds(s.ReplicatedStateAges(now)),
			Consumers: []consumerStats{}, ConsumersAfterMarkDeletePosition: map[string]string{},
			SubscriptionProperties: map[string]string{}}
		ss.MsgRateOut, ss.MsgThroughputOut = h.rates.rate(name+"\x00s\x00"+sub, now, s.MsgOutCounter, s.BytesOutCounter)
		ss.TotalMsgExpired, ss.BlockedSubscriptionOnUnackedMsgs = s.Expired, s.BlockedOnUnacked
		ss.MsgRateExpired, _ = h.rates.rate(name+"\x00expired\x00"+sub, now, s.Expired, 0)
		ss.MsgRateRedeliver, _ = h.rates.rate(name+"\x00redeliver\x00"+sub, now, s.RedeliveredCounter, 0)
		ss.MessageAckRate, _ = h.rates.rate(name+"\x00ack\x00"+sub, now, s.AckedCounter, 0)
		for _, c := range s.Consumers {
			cs := consumerStats{ConsumerName: c.ConsumerName, AvailablePermits: c.AvailablePermits,
				UnackedMessages: c.UnackedMessages, MsgOutCounter: c.MsgOutCounter, BytesOutCounter: c.BytesOutCounter,
				Address: c.Address, ConnectedSince: since(c.ConnectedSince), ClientVersion: c.ClientVersion,
				Metadata: c.Metadata, LastAckedTimestamp: c.LastAckedMillis,
				LastConsumedTimestamp: c.LastConsumedMillis, LastConsumedFlowTimestamp: c.LastFlowMillis}
			ss.Consumers = append(ss.Consumers, cs)
		}
		out.Subscriptions[sub] = ss
	}
	return out
}

// statsFilter is what a stats request leaves out, as Pulsar's
// excludePublishers and excludeConsumers query parameters ask.
type statsFilter struct{ publishers, consumers bool }

func statsFilterOf(r *http.Request) (statsFilter, error) {
	p, err := queryBool(r, "excludePublishers")
	if err != nil {
		return statsFilter{}, err
	}
	c, err := queryBool(r, "excludeConsumers")
	return statsFilter{publishers: p, consumers: c}, err
}

func (f statsFilter) apply(s *topicStats) {
	if f.publishers {
		s.Publishers = []publisherStats{}
	}
	if f.consumers {
		for name, ss := range s.Subscriptions {
			ss.Consumers = []consumerStats{}
			s.Subscriptions[name] = ss
		}
	}
}

// add folds a partition's statistics into the partitioned topic's, as
// Pulsar's PartitionedTopicStats aggregates them: counters, rates and
// sizes add up, publishers are listed together, and subscriptions of the
// same name merge. The topic was created when its first partition was,
// and last published to when its latest partition was.
func (s *topicStats) add(p topicStats) {
	if c := p.TopicCreationTimeStamp; c != 0 && (s.TopicCreationTimeStamp == 0 || c < s.TopicCreationTimeStamp) {
		s.TopicCreationTimeStamp = c
	}
	s.LastPublishTimestamp = max(s.LastPublishTimestamp, p.LastPublishTimestamp)
	s.MsgRateIn += p.MsgRateIn
	s.MsgThroughputIn += p.MsgThroughputIn
	s.MsgRateOut += p.MsgRateOut
	s.MsgThroughputOut += p.MsgThroughputOut
	s.MsgInCounter += p.MsgInCounter
	s.BytesInCounter += p.BytesInCounter
	s.MsgOutCounter += p.MsgOutCounter
	s.BytesOutCounter += p.BytesOutCounter
	s.StorageSize += p.StorageSize
	s.BacklogSize += p.BacklogSize
	s.AverageMsgSize = average(s.BytesInCounter, s.MsgInCounter)
	s.Publishers = append(s.Publishers, p.Publishers...)
	s.addReplication(p.Replication)
	if s.DeduplicationStatus == "" {
		s.DeduplicationStatus = p.DeduplicationStatus
	}
	for name, ps := range p.Subscriptions {
		ss, ok := s.Subscriptions[name]
		if !ok {
			ss = ps
			ss.Consumers = append([]consumerStats{}, ps.Consumers...)
			s.Subscriptions[name] = ss
			continue
		}
		ss.MsgRateOut += ps.MsgRateOut
		ss.MsgThroughputOut += ps.MsgThroughputOut
		ss.MsgRateExpired += ps.MsgRateExpired
		ss.MsgRateRedeliver += ps.MsgRateRedeliver
		ss.MessageAckRate += ps.MessageAckRate
		ss.TotalMsgExpired += ps.TotalMsgExpired
		ss.BlockedSubscriptionOnUnackedMsgs = ss.BlockedSubscriptionOnUnackedMsgs || ps.BlockedSubscriptionOnUnackedMsgs
		ss.MsgBacklog += ps.MsgBacklog
		ss.MsgBacklogNoDelayed += ps.MsgBacklogNoDelayed
		ss.MsgDelayed += ps.MsgDelayed
		ss.UnackedMessages += ps.UnackedMessages
		ss.MsgOutCounter += ps.MsgOutCounter
		ss.BytesOutCounter += ps.BytesOutCounter
		ss.IgnoredAckCount += ps.IgnoredAckCount
		ss.Consumers = append(ss.Consumers, ps.Consumers...)
		s.Subscriptions[name] = ss
	}
}

// messageID is Pulsar's MessageIdImpl as the admin API reads and writes it.
type messageID struct {
	LedgerID       int64 `json:"ledgerId"`
	EntryID        int64 `json:"entryId"`
	PartitionIndex int   `json:"partitionIndex"`
	BatchIndex     *int  `json:"batchIndex,omitempty"`
}

func positionID(p mledger.Position, partition int) messageID {
	return messageID{LedgerID: p.Ledger, EntryID: p.Entry, PartitionIndex: partition}
}

// The JSON of internal stats, with the names of Pulsar's
// PersistentTopicInternalStats.
type (
	internalStats struct {
		EntriesAddedCounter  int64                  `json:"entriesAddedCounter"`
		NumberOfEntries      int64                  `json:"numberOfEntries"`
		TotalSize            int64                  `json:"totalSize"`
		CurrentLedgerEntries int64                  `json:"currentLedgerEntries"`
		CurrentLedgerSize    int64                  `json:"currentLedgerSize"`
		LastConfirmedEntry   string                 `json:"lastConfirmedEntry"`
		State                string                 `json:"state"`
		Ledgers              []ledgerInfo           `json:"ledgers"`
		Cursors              map[string]cursorStats `json:"cursors"`
	}
	ledgerInfo struct {
		LedgerID int64 `json:"ledgerId"`
	}
	cursorStats struct {
		MarkDeletePosition      string           `json:"markDeletePosition"`
		ReadPosition            string           `json:"readPosition"`
		MessagesConsumedCounter int64            `json:"messagesConsumedCounter"`
		State                   string           `json:"state"`
		Properties              map[string]int64 `json:"properties"`
	}
)

func renderInternalStats(st broker.InternalStats) internalStats {
	out := internalStats{EntriesAddedCounter: st.Ledger.Entries, NumberOfEntries: st.Ledger.Entries,
		TotalSize: st.Ledger.StorageSize, LastConfirmedEntry: st.Ledger.LastConfirmed.String(), State: "LedgerOpened",
		Ledgers: []ledgerInfo{}, Cursors: map[string]cursorStats{}}
	if st.Ledger.Terminated {
		out.State = "Terminated"
	}
	for _, l := range st.Ledgers {
		out.Ledgers = append(out.Ledgers, ledgerInfo{LedgerID: l})
	}
	for name, c := range st.Cursors {
		out.Cursors[name] = cursorStats{MarkDeletePosition: c.MarkDelete.String(), ReadPosition: c.ReadPosition.String(),
			MessagesConsumedCounter: c.MsgOutCounter, State: "Open", Properties: map[string]int64{}}
	}
	return out
}

// unixMillis is t in unix milliseconds, 0 for the zero time (never), as
// Pulsar's timestamps in statistics are.
func unixMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// ageSeconds is ages in seconds, as stats give them (nil for none).
func ageSeconds(ages map[string]time.Duration) map[string]float64 {
	if len(ages) == 0 {
		return nil
	}
	out := make(map[string]float64, len(ages))
	for region, age := range ages {
		out[region] = age.Seconds()
	}
	return out
}
