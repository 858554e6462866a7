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
// the whole state again. It runs the ops two ways, since the journal applies
// a batch on one of two goroutines (see journal):
//   - one at a time: nobody waits for the disk, so run applies each batch;
//   - pipelined, in batches of a few records: ops are queued behind every
//     sync, so run hands batches to applyLoop, and the two take turns.
//
// Either way an acknowledged add must be readable when it is acknowledged:
// each answer of an add that succeeded reads its entry back at once.
func TestStateMachineAgainstModel(t *testing.T) {
	for _, pipelined := range []bool{false, true} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("pipelined=%v/seed=%d", pipelined, seed), func(t *testing.T) {
				testStateMachineAgainstModel(t, seed, pipelined)
			})
		}
	}
}

func testStateMachineAgainstModel(t *testing.T, seed uint64, pipelined bool) {
	ctx := testCtx(t)
	rng := rand.New(rand.NewPCG(seed, 42))
	cfg := testConfig(t, t.TempDir(), nil)
	pad := 0
	if pipelined {
		cfg.JournalMaxBatchBytes = 64 << 10 // the least
		pad = 24 << 10                      // so two or three adds a sync
	}
	b := startBookie(t, cfg)
	models := map[int64]*modelLedger{}
	keys := [][]byte{nil, []byte("a"), []byte("b")}
	const ops = 400
	var (
		recs    []record
		answers []chan opResult
	)
	unreadable := make(chan string, ops)
	for i := range ops {
		ledger := int64(rng.IntN(3))
		var r record
		switch p := rng.IntN(20); {
		case p == 0:
			r = record{kind: recFence, ledgerID: ledger, masterKey: keys[rng.IntN(3)]}
		case p < 3:
			r = record{kind: recLAC, ledgerID: ledger, lac: int64(rng.IntN(50)), masterKey: keys[rng.IntN(3)]}
		default:
			e := int64(rng.IntN(60))
			payload := fmt.Appendf(make([]byte, pad), "op %d ledger %d entry %d", i, ledger, e)
			r = record{kind: recAdd, ledgerID: ledger, entryID: e, lac: e - 1 - int64(rng.IntN(3)),
				recovery: rng.IntN(4) == 0, masterKey: keys[rng.IntN(3)],
				checksum: bkproto.EntryChecksum(ledger, e, payload), payload: payload}
		}
		res := make(chan opResult, 1)
		done := func(x opResult) {
			if r.kind == recAdd && x.err == nil {
				// On the goroutine that answers, before the answer: no
				// later record removes an entry, so it must be there.
				if _, _, _, err := b.store.read(r.ledgerID, r.entryID); err != nil {
					unreadable <- fmt.Sprintf("op %d: ledger %d entry %d acknowledged, then unreadable: %v", i, r.ledgerID, r.entryID, err)
				}
			}
			res <- x
		}
		// One enqueuer: the queue's order is the journal's.
		if err := b.journal.enqueue(ctx, &op{rec: r, done: done}); err != nil {
			t.Fatal(err)
		}
		recs, answers = append(recs, r), append(answers, res)
		if !pipelined {
			check(t, models, i, r, <-res)
		}
	}
	if pipelined {
		for i, r := range recs {
			check(t, models, i, r, <-answers[i])
		}
	}
	close(unreadable)
	for msg := range unreadable {
		t.Error(msg)
	}
	checkAll := func(b *testBookie, when string) {
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
	checkAll(b, "live")
	b.Close()
	checkAll(startBookie(t, cfg), "after replay")
}

// check applies op i, r, to the model and compares the journal's answer.
func check(t *testing.T, models map[int64]*modelLedger, i int, r record, got opResult) {
	t.Helper()
	m := models[r.ledgerID]
	if m == nil {
		m = &modelLedger{lac: bkproto.NoEntry, entries: map[int64][]byte{}}
		models[r.ledgerID] = m
	}
	want := m.apply(r)
	if (got.err == nil) != (want == nil) || want != nil && !errors.Is(got.err, want) {
		t.Fatalf("op %d %+v: got %v, model says %v", i, r, got.err, want)
	}
}
