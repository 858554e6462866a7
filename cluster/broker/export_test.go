package broker

import "github.com/meridian-mq/meridian/cluster/mledger"

// KeyHash exposes the Key_Shared hash to the external tests, which pick
// keys by the range they fall in.
var KeyHash = keyHash

// HashSpace is the size of the Key_Shared hash range.
const HashSpace = hashSpace

// EntriesRead is how many entry reads the topic's managed ledger has served,
// from its cache or from the bookies.
func EntriesRead(t *Topic) int64 {
	s := t.ml.Stats()
	return s.CacheHits + s.CacheMisses
}

// DedupSnapshotPosition is where the topic's deduplication snapshot cursor
// stands: the last entry its last snapshot covers.
func DedupSnapshotPosition(t *Topic) mledger.Position { return t.dd.cursor.MarkDeletePosition() }
