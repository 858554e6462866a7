package mledger

import "time"

// Stats is a snapshot of a managed ledger, for topic stats and metrics
// (Pulsar's storageSize, entries, ledger count, cache figures).
type Stats struct {
	Ledgers        int
	Entries        int64
	StorageSize    int64 // bytes of the closed ledgers plus those appended to the current one
	LastConfirmed  Position
	Terminated     bool
	CacheEntries   int
	CacheBytes     int64
	CacheHits      int64
	CacheMisses    int64
	Cursors        int
	ForeignCursors int
	// Err is why the instance stopped, or nil.
	Err error
	// Created is when the topic's managed ledger was first created; zero
	// for one whose record predates the time being kept.
	Created time.Time
}

// Stats returns a snapshot of the managed ledger's state.
func (ml *ManagedLedger) Stats() Stats {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	v := ml.v
	return Stats{
		Created:        ml.created,
		Ledgers:        len(v.ledgers),
		Entries:        v.count(v.origin(), v.last()),
		StorageSize:    v.totalSize() + ml.curSizeSeen,
		LastConfirmed:  v.last(),
		Terminated:     v.terminated,
		CacheEntries:   len(ml.cache.entries),
		CacheBytes:     ml.cache.bytes,
		CacheHits:      ml.cache.hits,
		CacheMisses:    ml.cache.misses,
		Cursors:        len(ml.cursors),
		ForeignCursors: len(ml.foreign),
		Err:            ml.err,
	}
}
