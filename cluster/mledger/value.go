package mledger

import (
	"fmt"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// Value formats in the store (DESIGN §3). Both are versioned JSON.
const (
	listVersion   = 1
	cursorVersion = 1
)

// listValue is the managed ledger's record at
// /meridian/regions/<r>/mledgers/<topic>.
type listValue struct {
	Ledgers    []ledgerInfo `json:"ledgers"`
	Terminated bool         `json:"terminated"`
	// Created is when the record was created, in unix milliseconds (0 in
	// records written before it was kept): the topic's creation time, as
	// Pulsar takes it from its managed ledger's node.
	Created int64 `json:"created,omitempty"`
}

// cursorValue is a durable cursor's record at
// /meridian/regions/<r>/cursors/<topic>/<name>.
type cursorValue struct {
	// MarkDelete is the last consumed position of the consumed prefix.
	MarkDelete Position `json:"markDelete"`
	// Acked are the individually acked ranges after MarkDelete, as
	// [ledger, from, to] (inclusive), lowest first, at most
	// Config.MaxPersistedAckRanges of them.
	Acked [][3]int64 `json:"individuallyAcked,omitempty"`
	// Truncated says that ranges past the cap were left out: those entries
	// will be delivered again after a restart.
	Truncated  bool              `json:"truncated,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
}

func (c cursorValue) validate() error {
	prev := c.MarkDelete
	for _, r := range c.Acked {
		if r[1] < 0 || r[2] < r[1] || !prev.Less(Position{r[0], r[1]}) {
			return fmt.Errorf("%w: cursor range %v out of order after %v", ErrBadMetadata, r, prev)
		}
		prev = Position{r[0], r[2]}
	}
	return nil
}

// persistedValue is what s looks like in the store with at most maxRanges
// ranges kept. The ranges kept are the lowest ones, nearest the mark-delete
// position; the ones dropped past the cap are persisted as not acked, so
// after a restart they are delivered again: duplicates, never losses.
func persistedValue(s *cursorState, maxRanges int, props map[string]string) cursorValue {
	v := cursorValue{MarkDelete: s.markDelete, Properties: props}
	rs := s.acked.ranges
	if len(rs) > maxRanges {
		rs = rs[:maxRanges]
		v.Truncated = true
	}
	v.Acked = make([][3]int64, len(rs))
	for i, r := range rs {
		v.Acked[i] = [3]int64{r.Ledger, r.From, r.To}
	}
	return v
}

// restoredState rebuilds a cursor's state from its stored value.
func restoredState(v cursorValue) cursorState {
	s := cursorState{markDelete: v.MarkDelete, readAfter: v.MarkDelete}
	for _, r := range v.Acked {
		// validate has checked the ranges are ordered and disjoint; merge
		// ranges that touch so that the set stays coalesced.
		rs := s.acked.ranges
		if n := len(rs); n > 0 && rs[n-1].Ledger == r[0] && rs[n-1].To+1 == r[1] {
			rs[n-1].To = r[2]
		} else {
			s.acked.ranges = append(rs, entryRange{r[0], r[1], r[2]})
		}
		s.acked.count += r[2] - r[1] + 1
	}
	return s
}

func encodeList(l listValue) ([]byte, error)     { return meta.EncodeJSON(listVersion, l) }
func encodeCursor(c cursorValue) ([]byte, error) { return meta.EncodeJSON(cursorVersion, c) }

func decodeList(b []byte) (listValue, error) {
	var l listValue
	if _, err := meta.DecodeJSON(b, listVersion, &l); err != nil {
		return l, fmt.Errorf("%w: ledger list: %w", ErrBadMetadata, err)
	}
	for i := 1; i < len(l.Ledgers); i++ {
		if l.Ledgers[i].ID <= l.Ledgers[i-1].ID {
			return l, fmt.Errorf("%w: ledger ids out of order: %d after %d", ErrBadMetadata, l.Ledgers[i].ID, l.Ledgers[i-1].ID)
		}
	}
	return l, nil
}

func decodeCursor(b []byte) (cursorValue, error) {
	var c cursorValue
	if _, err := meta.DecodeJSON(b, cursorVersion, &c); err != nil {
		return c, fmt.Errorf("%w: cursor: %w", ErrBadMetadata, err)
	}
	return c, c.validate()
}

// ListKey is the key of a topic's managed ledger record.
func ListKey(region, topic string) string { return meta.RegionKey(region, "mledgers", topic) }

// CursorKey is the key of a durable cursor's record.
func CursorKey(region, topic, name string) string {
	return meta.RegionKey(region, "cursors", topic, name)
}

// cursorPrefix is the prefix of every cursor of a topic.
func cursorPrefix(region, topic string) string {
	return meta.Prefix(meta.RegionKey(region, "cursors", topic))
}
