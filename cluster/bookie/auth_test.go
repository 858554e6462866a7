package bookie

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/testkit"
)

const testToken = "region-bookie-token"

func dialWith(t testing.TB, addr string, cfg bkproto.ConnConfig) (*bkproto.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := bkproto.DialConfig(ctx, addr, cfg)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// TestTamperThroughBookiePortRefused is issue 38's first finding: whoever
// reached a bookie's port could overwrite an acknowledged entry with an add
// that carried no master key, write into a fenced ledger with the recovery
// flag, and fence a live ledger. Each is tried from a client that is not
// the ledger's writer, on a bookie without authentication and on one with
// it (where the tamperer has the region's token, as a compromised or buggy
// region client would): the master key alone must refuse them all.
func TestTamperThroughBookiePortRefused(t *testing.T) {
	for _, auth := range []bool{false, true} {
		name := "without authentication"
		if auth {
			name = "with authentication"
		}
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			cfg := testConfig(t, t.TempDir(), nil)
			ccfg := bkproto.DefaultConnConfig(nil)
			if auth {
				cfg.AuthToken = testToken
				ccfg.Token = []byte(testToken)
			}
			b := startBookie(t, cfg)
			writer, err := dialWith(t, b.Addr(), ccfg)
			if err != nil {
				t.Fatal(err)
			}
			tamperer, err := dialWith(t, b.Addr(), ccfg)
			if err != nil {
				t.Fatal(err)
			}
			const ledger = 10
			key, wrong := []byte("the ledger's master key"), []byte("a guess")
			add := func(c *bkproto.Conn, e int64, recovery bool, k []byte, p string) error {
				return c.AddEntry(ctx, bkproto.AddRequest{LedgerID: ledger, EntryID: e, LastAddConfirmed: e - 1,
					Recovery: recovery, MasterKey: k, Payload: []byte(p)})
			}
			for e := range int64(3) {
				if err := add(writer, e, false, key, "acknowledged"); err != nil {
					t.Fatal(err)
				}
			}
			for _, tc := range []struct {
				what string
				err  error
			}{
				{"overwrite without a key", add(tamperer, 1, false, nil, "forged")},
				{"overwrite with a wrong key", add(tamperer, 1, false, wrong, "forged")},
				{"recovery add without a key", add(tamperer, 1, true, nil, "forged")},
				{"recovery add with a wrong key", add(tamperer, 3, true, wrong, "forged")},
				{"LAC write without a key", tamperer.WriteLAC(ctx, bkproto.WriteLACRequest{LedgerID: ledger, LastAddConfirmed: 100})},
				{"fence without a key", func() error {
					_, err := tamperer.Fence(ctx, bkproto.FenceRequest{LedgerID: ledger})
					return err
				}()},
				{"fence with a wrong key", func() error {
					_, err := tamperer.Fence(ctx, bkproto.FenceRequest{LedgerID: ledger, MasterKey: wrong})
					return err
				}()},
				{"fencing read without a key", func() error {
					_, err := tamperer.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: ledger, EntryID: 0, Fence: true})
					return err
				}()},
			} {
				wantErr(t, tc.what, tc.err, bkproto.ErrUnauthorized)
			}
			// Nothing changed: the writer is not fenced, the entries and
			// the LAC are the writer's.
			if fenced, lac, _ := b.store.ledger(ledger); fenced || lac != 1 {
				t.Fatalf("after the tampering: fenced %v, LAC %d; want unfenced, 1", fenced, lac)
			}
			if err := add(writer, 3, false, key, "acknowledged"); err != nil {
				t.Fatalf("the writer's next add: %v", err)
			}
			for e := range int64(4) {
				got, err := tamperer.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: ledger, EntryID: e})
				if err != nil || string(got.Payload) != "acknowledged" {
					t.Fatalf("entry %d: %q, %v", e, got.Payload, err)
				}
			}

			// Recovery, with the key, fences; a recovery add into the
			// fenced ledger still needs the key.
			if _, err := writer.Fence(ctx, bkproto.FenceRequest{LedgerID: ledger, MasterKey: key}); err != nil {
				t.Fatal(err)
			}
			wantErr(t, "recovery add to a fenced ledger without a key", add(tamperer, 2, true, nil, "forged"), bkproto.ErrUnauthorized)
			wantErr(t, "recovery add to a fenced ledger with a wrong key", add(tamperer, 4, true, wrong, "forged"), bkproto.ErrUnauthorized)
			wantErr(t, "the old writer's add after the fence", add(writer, 4, false, key, "late"), bkproto.ErrFenced)
			if err := add(writer, 4, true, key, "recovered"); err != nil {
				t.Fatalf("recovery add with the key: %v", err)
			}

			// A fence binds the key of a ledger the bookie has not seen yet:
			// the first add or fence decides, and later ones need its key.
			if _, err := writer.Fence(ctx, bkproto.FenceRequest{LedgerID: ledger + 1, MasterKey: key}); err != nil {
				t.Fatal(err)
			}
			err = tamperer.AddEntry(ctx, bkproto.AddRequest{LedgerID: ledger + 1, EntryID: 0, LastAddConfirmed: bkproto.NoEntry,
				Recovery: true, Payload: []byte("forged")})
			wantErr(t, "keyless recovery add to a ledger first seen by a keyed fence", err, bkproto.ErrUnauthorized)

			// A restart replays the journal under the same rules.
			b.Close()
			b2 := startBookie(t, cfg)
			again, err := dialWith(t, b2.Addr(), ccfg)
			if err != nil {
				t.Fatal(err)
			}
			err = again.AddEntry(ctx, bkproto.AddRequest{LedgerID: ledger, EntryID: 1, Recovery: true, Payload: []byte("forged")})
			wantErr(t, "keyless recovery add after a restart", err, bkproto.ErrUnauthorized)
			got, err := again.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: ledger, EntryID: 1})
			if err != nil || string(got.Payload) != "acknowledged" {
				t.Fatalf("entry 1 after the restart: %q, %v", got.Payload, err)
			}
		})
	}
}

// rawRequest sends frames on a fresh plain connection and returns the first
// response, and whether the bookie then closed the connection.
func rawRequest(t *testing.T, addr string, frames ...[]byte) (bkproto.Message, bool) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, f := range frames {
		if _, err := nc.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	var last bkproto.Message
	for {
		f, err := bkproto.ReadFrame(br, 0)
		if errors.Is(err, io.EOF) {
			return last, true
		}
		if err != nil {
			t.Fatalf("reading the bookie's answer: %v", err)
		}
		m, err := bkproto.Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		last = m
		if r, ok := m.(interface{ Err() error }); ok && r.Err() == nil {
			return last, false // accepted: the connection stays open
		}
	}
}

// TestUnauthenticatedConnectionRefused: with a token configured, a
// connection whose first frame is not an AuthRequest with the token gets
// Unauthorized and is closed, and none of its requests has any effect.
func TestUnauthenticatedConnectionRefused(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, t.TempDir(), nil)
	cfg.AuthToken = testToken
	b := startBookie(t, cfg)
	add := bkproto.AppendFrame(nil, 1, &bkproto.AddRequest{LedgerID: 5, EntryID: 0, LastAddConfirmed: bkproto.NoEntry,
		Checksum: bkproto.EntryChecksum(5, 0, []byte("x")), Payload: []byte("x")})
	for _, tc := range []struct {
		name   string
		frames [][]byte
	}{
		{"add first", [][]byte{add}},
		{"read first", [][]byte{bkproto.AppendFrame(nil, 1, &bkproto.ReadRequest{LedgerID: 5, EntryID: 0})}},
		{"fence first", [][]byte{bkproto.AppendFrame(nil, 1, &bkproto.FenceRequest{LedgerID: 5})}},
		{"LAC read first", [][]byte{bkproto.AppendFrame(nil, 1, &bkproto.ReadLACRequest{LedgerID: 5})}},
		{"wrong token, then an add", [][]byte{bkproto.AppendFrame(nil, 1, &bkproto.AuthRequest{Method: bkproto.AuthMethodToken, Credentials: []byte("guess")}), add}},
		{"unknown method", [][]byte{bkproto.AppendFrame(nil, 1, &bkproto.AuthRequest{Method: "sasl", Credentials: []byte(testToken)}), add}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, closed := rawRequest(t, b.Addr(), tc.frames...)
			r, ok := m.(interface{ Err() error })
			if !ok || !errors.Is(r.Err(), bkproto.ErrUnauthorized) || !closed {
				t.Fatalf("answer %#v, closed %v; want Unauthorized and a closed connection", m, closed)
			}
		})
	}
	if ids := b.store.ledgerIDs(); len(ids) != 0 {
		t.Fatalf("unauthenticated requests reached the store: ledgers %v", ids)
	}
	// Before it has authenticated, a connection may not make the bookie
	// hold more than an AuthRequest: a larger frame closes it, unanswered.
	big := bkproto.AppendFrame(nil, 1, &bkproto.AddRequest{LedgerID: 5, Payload: make([]byte, bkproto.MaxAuthFrameSize)})
	if m, closed := rawRequest(t, b.Addr(), big[:bkproto.HeaderSize]); m != nil || !closed {
		t.Fatalf("a frame larger than an AuthRequest before authenticating: answer %#v, closed %v", m, closed)
	}
	if got := metricValue(b.m.authFailures); got != 6 {
		t.Fatalf("meridian_bookie_auth_failures_total = %v, want 6", got)
	}

	_, err := dialWith(t, b.Addr(), bkproto.DefaultConnConfig(nil))
	if err != nil {
		t.Fatal(err) // a dial without a token sends nothing yet
	}
	bad := bkproto.DefaultConnConfig(nil)
	bad.Token = []byte("guess")
	_, err = dialWith(t, b.Addr(), bad)
	wantErr(t, "a dial with a wrong token", err, bkproto.ErrUnauthorized)

	good := bkproto.DefaultConnConfig(nil)
	good.Token = []byte(testToken)
	c, err := dialWith(t, b.Addr(), good)
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, ctx, c, 5, 0, 10)
	mustRead(t, ctx, c, 5, 0, 10)

	// A client given a token works with a bookie that asks for none, so
	// that clients can be given the token before the bookies require it.
	open := startBookie(t, testConfig(t, t.TempDir(), nil))
	c2, err := dialWith(t, open.Addr(), good)
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, ctx, c2, 5, 0, 10)
}

// TestMutualTLS: a bookie with a region CA refuses clients without a
// certificate of that CA, before any request reaches it.
func TestMutualTLS(t *testing.T) {
	ctx := testCtx(t)
	region, stranger := testkit.NewCA(t, "region"), testkit.NewCA(t, "stranger")
	for _, withToken := range []bool{false, true} {
		cfg := testConfig(t, t.TempDir(), nil)
		cfg.TLS = &tls.Config{
			Certificates: []tls.Certificate{region.Issue(t, "bookie-1")},
			ClientCAs:    region.Pool(), ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
		}
		if withToken {
			cfg.AuthToken = testToken
		}
		b := startBookie(t, cfg)
		client := func(cert *tls.Certificate, token string) bkproto.ConnConfig {
			c := bkproto.DefaultConnConfig(nil)
			c.TLS = &tls.Config{RootCAs: region.Pool(), MinVersion: tls.VersionTLS12}
			if cert != nil {
				c.TLS.Certificates = []tls.Certificate{*cert}
			}
			c.Token = []byte(token)
			return c
		}
		// A refused certificate shows either in the handshake or at the
		// first request (TLS 1.3 checks the client's after the client has
		// finished its handshake).
		refused := func(what string, ccfg bkproto.ConnConfig) {
			t.Helper()
			c, err := dialWith(t, b.Addr(), ccfg)
			if err == nil {
				_, err = c.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: 1, EntryID: 0})
			}
			if err == nil || errors.Is(err, bkproto.ErrNoSuchLedger) {
				t.Fatalf("%s: got %v, want a refused connection", what, err)
			}
		}
		token := ""
		if withToken {
			token = testToken
		}
		foreign := stranger.Issue(t, "broker")
		mine := region.Issue(t, "broker")
		refused("no client certificate", client(nil, token))
		refused("a certificate of another CA", client(&foreign, token))
		if withToken {
			refused("the region's certificate without the token", client(&mine, ""))
		}
		plain, err := dialWith(t, b.Addr(), bkproto.DefaultConnConfig(nil))
		if err == nil {
			_, err = plain.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: 1, EntryID: 0})
		}
		if err == nil || errors.Is(err, bkproto.ErrNoSuchLedger) {
			t.Fatalf("plain TCP to a TLS bookie: %v", err)
		}
		c, err := dialWith(t, b.Addr(), client(&mine, token))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddEntry(ctx, bkproto.AddRequest{LedgerID: 1, EntryID: 0, LastAddConfirmed: bkproto.NoEntry,
			MasterKey: []byte("k"), Payload: []byte("over TLS")}); err != nil {
			t.Fatal(err)
		}
		if e, err := c.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: 1, EntryID: 0}); err != nil || !bytes.Equal(e.Payload, []byte("over TLS")) {
			t.Fatalf("read over mutual TLS: %q, %v", e.Payload, err)
		}
		if ids := b.store.ledgerIDs(); len(ids) != 1 {
			t.Fatalf("ledgers %v; only the authenticated client's should exist", ids)
		}
	}
}

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
