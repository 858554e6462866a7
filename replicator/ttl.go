package replicator

import "time"

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

// expired reports whether the TTL of an entry published at publishedMs
// (its broker timestamp, unix milliseconds) had passed at now. An entry
// whose timestamp could not be read (0) is never expired: it is sent.
func (p *ttlPolicy) expired(publishedMs int64, now time.Time) bool {
	if now.Sub(p.checked) >= p.refresh {
		p.ttl, p.checked = p.read(), now
	}
	if p.ttl <= 0 {
		return false
	}
	return publishedMs > 0 && now.Sub(time.UnixMilli(publishedMs)) > p.ttl
}
