package bookie

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
)

// FuzzServerConn feeds arbitrary bytes, written in arbitrary chunks, to a
// live bookie's port, once with authentication configured and once
// without, and checks what issue 38 asked for:
//   - without the token, nothing reaches the store: every answer is a
//     refusal and the bookie holds no ledger it did not hold before;
//   - without the ledger's master key, a keyed ledger's entries, its LAC
//     and its fence stay as its writer left them, whatever the requests;
//   - every answer is a well-formed response, and the bookie survives.
//
// The token and the key are long random-looking strings: an input that
// contains one is not held to the property it protects.
func FuzzServerConn(f *testing.F) {
	ctx := testCtx(f)
	token := []byte("fuzz-token-7f3a9c2e1b8d4f60a5c3e9b7d2f1a8c4")
	key := []byte("fuzz-master-key-c41e8b2f9d7a3605e1f4b8c2a9d3e7f0")
	const keyed = 1 // the ledger with a writer's key on the open bookie

	open := startBookie(f, testConfig(f, f.TempDir(), nil))
	secured := testConfig(f, f.TempDir(), nil)
	secured.AuthToken = string(token)
	closed := startBookie(f, secured)

	w := dial(f, open.Addr())
	for e := range int64(3) {
		if err := w.AddEntry(ctx, bkproto.AddRequest{LedgerID: keyed, EntryID: e, LastAddConfirmed: e - 1,
			MasterKey: key, Payload: payloadOf(keyed, e, 20)}); err != nil {
			f.Fatal(err)
		}
	}
	w.Close()

	var stream []byte
	for i, m := range []bkproto.Message{
		&bkproto.AuthRequest{Method: bkproto.AuthMethodToken, Credentials: []byte("guess")},
		&bkproto.AddRequest{LedgerID: keyed, EntryID: 1, LastAddConfirmed: 0, Recovery: true,
			Checksum: bkproto.EntryChecksum(keyed, 1, []byte("forged")), Payload: []byte("forged")},
		&bkproto.AddRequest{LedgerID: 2, EntryID: 0, LastAddConfirmed: bkproto.NoEntry,
			Checksum: bkproto.EntryChecksum(2, 0, []byte("new")), Payload: []byte("new")},
		&bkproto.FenceRequest{LedgerID: keyed, MasterKey: []byte("guess")},
		&bkproto.ReadRequest{LedgerID: keyed, EntryID: 0, Fence: true},
		&bkproto.WriteLACRequest{LedgerID: keyed, LastAddConfirmed: 50},
		&bkproto.ReadRequest{LedgerID: keyed, EntryID: 2},
		&bkproto.ReadLACRequest{LedgerID: keyed},
	} {
		frame := bkproto.AppendFrame(nil, uint64(i), m)
		stream = append(stream, frame...)
		f.Add(frame, []byte{0}, false)
		f.Add(frame, []byte{3}, true)
	}
	f.Add(stream, []byte{1, 7, 200}, false)
	f.Add(stream, []byte{2}, true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, []byte{}, false)

	f.Fuzz(func(t *testing.T, data, chunks []byte, auth bool) {
		b := open
		if auth {
			b = closed
		}
		answers := exchange(t, b.Addr(), data, chunks)
		if err := b.Err(); err != nil {
			t.Fatalf("the bookie stopped: %v", err)
		}
		if auth && !bytes.Contains(data, token) {
			for _, m := range answers {
				r, ok := m.(interface{ Err() error })
				if !ok || r.Err() == nil {
					t.Fatalf("an unauthenticated connection got %#v", m)
				}
			}
			if ids := b.store.ledgerIDs(); len(ids) != 0 {
				t.Fatalf("unauthenticated requests reached the store: ledgers %v", ids)
			}
		}
		if !auth && !bytes.Contains(data, key) {
			if fenced, lac, _ := b.store.ledger(keyed); fenced || lac != 1 {
				t.Fatalf("the keyed ledger changed without its key: fenced %v, LAC %d", fenced, lac)
			}
			for e := range int64(3) {
				p, _, _, err := b.store.read(keyed, e)
				if err != nil || !bytes.Equal(p, payloadOf(keyed, e, 20)) {
					t.Fatalf("entry %d of the keyed ledger: %q, %v", e, p, err)
				}
			}
		}
	})
}

// exchange writes data to a fresh connection to addr in chunks whose sizes
// cycle through chunks (each +1), half-closes it, and returns every
// response the bookie sent until it closed the connection. Each answer
// must be a well-formed response.
func exchange(t *testing.T, addr string, data, chunks []byte) []bkproto.Message {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := 0; len(data) > 0 && ctx.Err() == nil; i++ {
			n := 1
			if len(chunks) > 0 {
				n = int(chunks[i%len(chunks)]) + 1
			}
			n = min(n, len(data))
			if _, err := nc.Write(data[:n]); err != nil {
				return // the bookie closed the connection
			}
			data = data[n:]
		}
		nc.(*net.TCPConn).CloseWrite()
	}()
	defer func() { <-wrote }()
	var answers []bkproto.Message
	br := bufio.NewReader(nc)
	for {
		fr, err := bkproto.ReadFrame(br, 0)
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
			return answers
		}
		if err != nil {
			t.Fatalf("reading the bookie's answers: %v", err)
		}
		if fr.Type&bkproto.ResponseBit == 0 {
			t.Fatalf("the bookie sent a request, %s", fr.Type)
		}
		m, err := bkproto.Decode(fr)
		if err != nil {
			t.Fatalf("the bookie sent a malformed %s: %v", fr.Type, err)
		}
		answers = append(answers, m)
	}
}

// isReset reports a connection reset: the bookie closed a connection
// whose unread input the kernel then discarded.
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}
