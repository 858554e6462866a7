package meta

import (
	"context"
	"errors"
	"fmt"
)

// sequenceVersion is the format of a counter's value: {"v":1,"next":N}.
const sequenceVersion = 1

type sequenceValue struct {
	Next int64 `json:"next"`
}

// NextID returns the next id of the counter at key: 1 for a new counter,
// then 2, 3, ... Ids are unique and increasing across every process that
// uses the same key (DESIGN §3: ledger ids come from an etcd counter
// incremented by CAS), but not gapless from a reader's point of view: an id
// whose holder crashes before using it is simply never used.
//
// Unlike a CAS on owned state, a lost race here is retried: the winner took
// one id, and the loser wants the next, so re-reading is exactly right.
func NextID(ctx context.Context, s Store, key string) (int64, error) {
	for {
		kv, err := s.Get(ctx, key)
		if errors.Is(err, ErrNotFound) {
			val, err := EncodeJSON(sequenceVersion, sequenceValue{Next: 2})
			if err != nil {
				return 0, err
			}
			if _, err = s.Create(ctx, key, val, NoLease); err == nil {
				return 1, nil
			} else if !errors.Is(err, ErrExists) {
				return 0, err
			}
			continue
		}
		if err != nil {
			return 0, err
		}
		var cur sequenceValue
		if _, err := DecodeJSON(kv.Value, sequenceVersion, &cur); err != nil {
			return 0, fmt.Errorf("meta: counter %s: %w", key, err)
		}
		if cur.Next < 1 {
			return 0, fmt.Errorf("meta: counter %s holds next=%d; it must be at least 1", key, cur.Next)
		}
		val, err := EncodeJSON(sequenceVersion, sequenceValue{Next: cur.Next + 1})
		if err != nil {
			return 0, err
		}
		if _, err = s.Update(ctx, key, val, kv.ModRevision); err == nil {
			return cur.Next, nil
		} else if !errors.Is(err, ErrConflict) {
			return 0, err
		}
	}
}
