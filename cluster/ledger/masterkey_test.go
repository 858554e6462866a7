package ledger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/meridian-mq/meridian/cluster/ledger"
)

// TestMasterKeys: every ledger gets its own random password, its master
// key is SHA-256 of the domain prefix and the password, and the writer,
// recovery and its write-back all carry it: a bookie that bound the key
// refuses a client that sends another or none, and recovery, which reads
// the password from the metadata, gets through.
func TestMasterKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 5, "b1", "b2", "b3")
		c := e.client("writer", testConfig())
		w1, err := c.Create(t.Context(), 3, 3, 2, ledger.Groups{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		w2, err := c.Create(t.Context(), 3, 3, 2, ledger.Groups{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		w2.Stop()
		appendN(t, w1, 0, 5)
		md1, _ := c.Metadata(t.Context(), w1.ID())
		md2, _ := c.Metadata(t.Context(), w2.ID())
		if len(md1.Password) != 32 || bytes.Equal(md1.Password, md2.Password) {
			t.Fatalf("passwords %x and %x: want 32 random bytes each", md1.Password, md2.Password)
		}
		want := sha256.Sum256(append([]byte("meridian-ledger-master-key\x00"), md1.Password...))
		if !bytes.Equal(md1.MasterKey(), want[:]) {
			t.Fatalf("master key %x, want %x", md1.MasterKey(), want)
		}
		if (&ledger.Metadata{}).MasterKey() != nil {
			t.Fatal("a ledger without a password has a master key")
		}

		// Another client without the key: refused by every bookie, for
		// an overwrite, a recovery add, a fence and a LAC write.
		b, err := e.bookies.Client("intruder").Bookie(t.Context(), "b1")
		if err != nil {
			t.Fatal(err)
		}
		for what, err := range map[string]error{
			"overwrite":    b.AddEntry(t.Context(), ledger.AddRequest{LedgerID: w1.ID(), EntryID: 1, Payload: []byte("forged")}),
			"recovery add": b.AddEntry(t.Context(), ledger.AddRequest{LedgerID: w1.ID(), EntryID: 1, Recovery: true, Payload: []byte("forged"), MasterKey: md2.MasterKey()}),
			"fence":        fenceErr(t.Context(), b, w1.ID()),
			"LAC write":    b.WriteLAC(t.Context(), w1.ID(), 100, nil),
		} {
			if !errors.Is(err, ledger.ErrUnauthorized) {
				t.Errorf("%s without the key: %v, want ErrUnauthorized", what, err)
			}
		}
		if _, err := w1.Add(t.Context(), payload(5)); err != nil {
			t.Fatalf("the writer after the intruder: %v", err)
		}
		w1.Stop()
		r, err := e.client("rec", testConfig()).OpenAndRecover(t.Context(), w1.ID())
		if err != nil {
			t.Fatal(err)
		}
		if md := r.Metadata(); md.LastEntry != 5 || !bytes.Equal(md.Password, md1.Password) {
			t.Fatalf("recovered: last entry %d, password kept %v", md.LastEntry, bytes.Equal(md.Password, md1.Password))
		}
	})
}

func fenceErr(ctx context.Context, b ledger.Bookie, id int64) error {
	_, err := b.Fence(ctx, id, nil)
	return err
}
