package replicator

import (
	"time"

	"github.com/meridian-mq/meridian/cluster/mledger"
)

// ttlPolicy applies a topic's message TTL (Pulsar's messageTTLInSeconds) to
// its replication cursor, as Pulsar's expiry monitor does to a
// replicator's: an entry stored longer ago than the TTL when the task reads
// it is skipped, not sent, and counted as expired. It is owned by the
// task's send goroutine. The TTL is read again from the watched cache at
// most once per refresh (the worker's ScanInterval), so a changed policy
// applies within it.
type ttlPolicy struct {
	read    func() time.Duration // the current TTL; 0: none
	refresh time.Duration

	checked time.Time
	ttl     time.Duration
}

// messageTTL is the TTL policy of t's topic.
func (t *task) messageTTL() *ttlPolicy {
	w := t.w
	return &ttlPolicy{refresh: w.cfg.ScanInterval, read: func() time.Duration {
		eff, _ := w.effective(t.id.Topic) // unresolved: no TTL
		return time.Duration(eff.MessageTTLInSeconds) * time.Second
	}}
}

// expired reports whether e's TTL had passed at now. An entry whose broker
// timestamp cannot be read is never expired: it is sent.
func (p *ttlPolicy) expired(e mledger.Entry, now time.Time) bool {
	if now.Sub(p.checked) >= p.refresh {
		p.ttl, p.checked = p.read(), now
	}
	if p.ttl <= 0 {
		return false
	}
	ms, err := mledger.EntryTimestamp(e.Data)
	return err == nil && ms > 0 && now.Sub(time.UnixMilli(ms)) > p.ttl
}
