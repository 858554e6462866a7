package bookie

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
)

// model is the reference for the ledger-state rules that store.apply
// enforces live and again on replay.
type modelLedger struct {
	fenced  bool
	lac     int64
	key     []byte
	entries map[int64][]byte
}

func (m *modelLedger) apply(r record) error {
	switch {
	case len(m.key) > 0 && !bytes.Equal(r.masterKey, m.key):
		// Once a ledger has a key, nothing without it changes the
		// ledger: no add (recovery or not), fence or LAC write.
		return bkproto.ErrUnauthorized
	case r.kind == recFence:
		m.fenced = true
	case (r.kind == recAdd && !r.recovery || r.kind == recLAC) && m.fenced:
		return bkproto.ErrFenced
	default:
		m.lac = max(m.lac, r.lac)
		if r.kind == recAdd {
			m.entries[r.entryID] = r.payload
		}
	}
	if len(m.key) == 0 && len(r.masterKey) > 0 {
		m.key = r.masterKey
	}
	return nil
}

// TestStateMachineAgainstModel drives random adds, recovery adds, fences
// and LAC writes with random master keys through the journal, checks every
// answer against the model, then restarts (replaying the journal) and checks
// the whole state again.
func TestStateMachineAgainstModel(t *testing.T) {
	ctx := testCtx(t)
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			cfg := testConfig(t, t.TempDir(), nil)
			b := startBookie(t, cfg)
			models := map[int64]*modelLedger{}
			keys := [][]byte{nil, []byte("a"), []byte("b")}
			for i := range 400 {
				ledger := int64(rng.IntN(3))
				m := models[ledger]
				if m == nil {
					m = &modelLedger{lac: bkproto.NoEntry, entries: map[int64][]byte{}}
					models[ledger] = m
				}
				var r record
				switch p := rng.IntN(20); {
				case p == 0:
					r = record{kind: recFence, ledgerID: ledger, masterKey: keys[rng.IntN(3)]}
				case p < 3:
					r = record{kind: recLAC, ledgerID: ledger, lac: int64(rng.IntN(50)), masterKey: keys[rng.IntN(3)]}
				default:
					e := int64(rng.IntN(60))
					payload := fmt.Appendf(nil, "op %d ledger %d entry %d", i, ledger, e)
					r = record{kind: recAdd, ledgerID: ledger, entryID: e, lac: e - 1 - int64(rng.IntN(3)),
						recovery: rng.IntN(4) == 0, masterKey: keys[rng.IntN(3)],
						checksum: bkproto.EntryChecksum(ledger, e, payload), payload: payload}
				}
				res := make(chan opResult, 1)
				if err := b.journal.enqueue(ctx, &op{rec: r, done: func(x opResult) { res <- x }}); err != nil {
					t.Fatal(err)
				}
				got := (<-res).err
				want := m.apply(r)
				if (got == nil) != (want == nil) || want != nil && !errors.Is(got, want) {
					t.Fatalf("op %d %+v: got %v, model says %v", i, r, got, want)
				}
			}
			check := func(b *testBookie, when string) {
				t.Helper()
				for id, m := range models {
					fenced, lac, ok := b.store.ledger(id)
					if !ok || fenced != m.fenced || lac != m.lac {
						t.Fatalf("%s: ledger %d: fenced %v lac %d (known %v), model %v %d", when, id, fenced, lac, ok, m.fenced, m.lac)
					}
					for e := range int64(60) {
						payload, _, _, err := b.store.read(id, e)
						want, has := m.entries[e]
						if has != (err == nil) || has && !bytes.Equal(payload, want) {
							t.Fatalf("%s: ledger %d entry %d: %q, %v; model %q (present %v)", when, id, e, payload, err, want, has)
						}
					}
				}
			}
			check(b, "live")
			b.Close()
			check(startBookie(t, cfg), "after replay")
		})
	}
}
