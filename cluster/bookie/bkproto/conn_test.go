package bkproto

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// fakeBookie accepts one connection and hands every decoded request to
// handle, which writes whatever it likes back.
func fakeBookie(t *testing.T, handle func(w *bufio.Writer, id uint64, m Message)) (addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		mu.Lock()
		conns = append(conns, nc)
		mu.Unlock()
		br, bw := bufio.NewReader(nc), bufio.NewWriter(nc)
		for {
			f, err := ReadFrame(br, 0)
			if err != nil {
				return
			}
			m, err := Decode(f)
			if err != nil {
				return
			}
			handle(bw, f.RequestID, m)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func TestConnPipelinedOutOfOrder(t *testing.T) {
	const n = 64
	// Hold every request until all n have arrived, then answer in reverse:
	// each caller must still get its own answer.
	var held []func()
	addr := fakeBookie(t, func(w *bufio.Writer, id uint64, m Message) {
		req := m.(*ReadRequest)
		held = append(held, func() {
			p := []byte(fmt.Sprintf("entry-%d", req.EntryID))
			w.Write(AppendFrame(nil, id, &ReadResponse{
				LedgerID: req.LedgerID, EntryID: req.EntryID, LastAddConfirmed: n - 1,
				Checksum: EntryChecksum(req.LedgerID, req.EntryID, p), Payload: p,
			}))
		})
		if len(held) == n {
			for i := len(held) - 1; i >= 0; i-- {
				held[i]()
			}
			w.Flush()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := c.ReadEntry(ctx, ReadRequest{LedgerID: 5, EntryID: int64(i)})
			if err != nil {
				errs <- err
				return
			}
			if string(e.Payload) != fmt.Sprintf("entry-%d", i) || e.EntryID != int64(i) || e.LastAddConfirmed != n-1 {
				errs <- fmt.Errorf("request %d got %+v", i, e)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestConnVerifiesChecksumAndStatus(t *testing.T) {
	addr := fakeBookie(t, func(w *bufio.Writer, id uint64, m Message) {
		switch req := m.(type) {
		case *ReadRequest:
			w.Write(AppendFrame(nil, id, &ReadResponse{LedgerID: req.LedgerID, EntryID: req.EntryID,
				Checksum: EntryChecksum(req.LedgerID, req.EntryID, []byte("good")), Payload: []byte("evil")}))
		case *AddRequest:
			st := StatusOK
			if req.Checksum != EntryChecksum(req.LedgerID, req.EntryID, req.Payload) {
				st = StatusChecksumMismatch
			}
			if req.EntryID == 1 {
				st = StatusFenced
			}
			w.Write(AppendFrame(nil, id, &AddResponse{Result: Result{Status: st, Message: "ledger 3 is fenced"}, LedgerID: req.LedgerID, EntryID: req.EntryID}))
		case *FenceRequest:
			w.Write(AppendFrame(nil, id, &FenceResponse{LedgerID: req.LedgerID, LastAddConfirmed: 41}))
		}
		w.Flush()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, &net.Dialer{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ReadEntry(ctx, ReadRequest{LedgerID: 3, EntryID: 0}); !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("corrupt read: %v", err)
	}
	if err := c.AddEntry(ctx, AddRequest{LedgerID: 3, EntryID: 0, Payload: []byte("x")}); err != nil {
		t.Fatalf("add: %v (the client must fill in the checksum)", err)
	}
	if err := c.AddEntry(ctx, AddRequest{LedgerID: 3, EntryID: 1, Payload: []byte("x")}); !errors.Is(err, ErrFenced) {
		t.Fatalf("fenced add: %v", err)
	}
	if lac, err := c.Fence(ctx, FenceRequest{LedgerID: 3}); err != nil || lac != 41 {
		t.Fatalf("fence: %d %v", lac, err)
	}
	if err := c.AddEntry(ctx, AddRequest{Payload: make([]byte, MaxPayloadSize+1)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized add: %v", err)
	}
}

func TestConnFailsInFlightOnBadResponse(t *testing.T) {
	addr := fakeBookie(t, func(w *bufio.Writer, id uint64, m Message) {
		// Answer a read with an add response: a broken peer.
		w.Write(AppendFrame(nil, id, &AddResponse{}))
		w.Flush()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ReadEntry(ctx, ReadRequest{LedgerID: 1}); !errors.Is(err, ErrMalformedFrame) {
		t.Fatalf("got %v", err)
	}
	<-c.Done()
	if !errors.Is(c.Err(), ErrConnClosed) {
		t.Fatalf("Err() = %v", c.Err())
	}
	if _, err := c.ReadLAC(ctx, ReadLACRequest{LedgerID: 1}); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("call on a dead conn: %v", err)
	}
}

func TestConnCancelAndClose(t *testing.T) {
	addr := fakeBookie(t, func(*bufio.Writer, uint64, Message) {}) // never answers
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.ReadLAC(short, ReadLACRequest{LedgerID: 1})
		done <- err
	}()
	cancelShort()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	go func() {
		_, err := c.Fence(ctx, FenceRequest{LedgerID: 1})
		done <- err
	}()
	c.Close()
	if err := <-done; !errors.Is(err, ErrConnClosed) && !errors.Is(err, context.Canceled) {
		t.Fatalf("call across Close: %v", err)
	}
}
