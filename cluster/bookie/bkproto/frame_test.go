package bkproto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleMessages() []Message {
	return []Message{
		&AddRequest{LedgerID: 7, EntryID: 3, LastAddConfirmed: 2, Recovery: true, MasterKey: []byte("key"), Checksum: 99, Payload: []byte("hello")},
		&AddRequest{LedgerID: 1, EntryID: 0, LastAddConfirmed: NoEntry, Payload: []byte{}},
		&ReadRequest{LedgerID: 7, EntryID: 3, Fence: true},
		&ReadRequest{LedgerID: 7, EntryID: 4, Wait: 1500 * time.Millisecond},
		&ReadLACRequest{LedgerID: 7, LongPoll: true, Previous: 5, Timeout: 1500 * time.Millisecond},
		&FenceRequest{LedgerID: 9},
		&FenceRequest{LedgerID: 9, MasterKey: []byte("k")},
		&ReadRequest{LedgerID: 7, EntryID: 5, Fence: true, MasterKey: []byte("k")},
		&AuthRequest{Method: AuthMethodToken, Credentials: []byte("secret")},
		&AuthRequest{},
		&AuthResponse{Result: Result{Status: StatusUnauthorized, Message: "wrong token"}},
		&AuthResponse{},
		&WriteLACRequest{LedgerID: 9, LastAddConfirmed: 10, MasterKey: []byte("k")},
		&AddResponse{Result: Result{Status: StatusFenced, Message: "fenced by recovery"}, LedgerID: 7, EntryID: 3},
		&ReadResponse{Result: Result{}, LedgerID: 7, EntryID: 3, LastAddConfirmed: 3, Checksum: 5, Payload: []byte("p")},
		&ReadLACResponse{LedgerID: 7, LastAddConfirmed: 6},
		&FenceResponse{LedgerID: 9, LastAddConfirmed: NoEntry},
		&WriteLACResponse{Result: Result{Status: StatusReadOnly}, LedgerID: 9},
	}
}

// normalize maps empty byte slices to nil: the codec does not distinguish
// them and neither does any caller.
func normalize(m Message) Message {
	nilIfEmpty := func(bs ...*[]byte) {
		for _, b := range bs {
			if len(*b) == 0 {
				*b = nil
			}
		}
	}
	switch m := m.(type) {
	case *AddRequest:
		c := *m
		nilIfEmpty(&c.Payload, &c.MasterKey)
		return &c
	case *ReadResponse:
		c := *m
		nilIfEmpty(&c.Payload)
		return &c
	case *WriteLACRequest:
		c := *m
		nilIfEmpty(&c.MasterKey)
		return &c
	case *FenceRequest:
		c := *m
		nilIfEmpty(&c.MasterKey)
		return &c
	case *ReadRequest:
		c := *m
		nilIfEmpty(&c.MasterKey)
		return &c
	case *AuthRequest:
		c := *m
		nilIfEmpty(&c.Credentials)
		return &c
	}
	return m
}

func TestRoundTrip(t *testing.T) {
	var stream []byte
	msgs := sampleMessages()
	for i, m := range msgs {
		stream = AppendFrame(stream, uint64(1000+i), m)
	}
	br := bufio.NewReader(bytes.NewReader(stream))
	for i, want := range msgs {
		f, err := ReadFrame(br, 0)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if f.RequestID != uint64(1000+i) || f.Type != want.Type() {
			t.Fatalf("frame %d: id %d type %s, want %d %s", i, f.RequestID, f.Type, 1000+i, want.Type())
		}
		got, err := Decode(f)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !reflect.DeepEqual(normalize(got), normalize(want)) {
			t.Fatalf("frame %d:\n got %#v\nwant %#v", i, got, want)
		}
	}
	if _, err := ReadFrame(br, 0); err != io.EOF {
		t.Fatalf("after last frame: %v, want io.EOF", err)
	}
}

func TestMalformedFrames(t *testing.T) {
	valid := AppendFrame(nil, 1, &ReadRequest{LedgerID: 1, EntryID: 2})
	withLen := func(b []byte, n uint32) []byte {
		b = bytes.Clone(b)
		binary.BigEndian.PutUint32(b, n)
		return b
	}
	cases := []struct {
		name  string
		input []byte
		want  error
	}{
		{"too large", withLen(valid, MaxFrameSize), ErrFrameTooLarge},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff}, ErrFrameTooLarge},
		{"shorter than header", withLen(valid, 3), ErrMalformedFrame},
		{"cut in header", valid[:8], io.ErrUnexpectedEOF},
		{"cut in body", valid[:len(valid)-1], io.ErrUnexpectedEOF},
		{"bad version", func() []byte { b := bytes.Clone(valid); b[4] = 9; return b }(), ErrUnsupportedVersion},
		{"unknown type", func() []byte { b := bytes.Clone(valid); b[5] = 0x42; return b }(), ErrMalformedFrame},
		{"trailing bytes", withLen(append(bytes.Clone(valid), 0), uint32(len(valid)-3)), ErrMalformedFrame},
		{"short body", withLen(valid[:len(valid)-1], uint32(len(valid)-5)), ErrMalformedFrame},
		{"unknown flag", func() []byte { b := bytes.Clone(valid); b[len(b)-1] = 0x80; return b }(), ErrMalformedFrame},
		{"fencing read that waits", func() []byte {
			b := AppendFrame(nil, 1, &ReadRequest{LedgerID: 1, EntryID: 2, Wait: time.Second})
			b[len(b)-5] |= flagFence
			return b
		}(), ErrMalformedFrame},
		{"long-poll read of no wait", func() []byte {
			b := AppendFrame(nil, 1, &ReadRequest{LedgerID: 1, EntryID: 2, Wait: time.Second})
			binary.BigEndian.PutUint32(b[len(b)-4:], 0)
			return b
		}(), ErrMalformedFrame},
		{"payload length lies", func() []byte {
			b := AppendFrame(nil, 1, &AddRequest{Payload: []byte("abc")})
			binary.BigEndian.PutUint32(b[len(b)-7:], 1<<30)
			return b
		}(), ErrMalformedFrame},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ReadFrame(bufio.NewReader(bytes.NewReader(tc.input)), 0)
			if err == nil {
				_, err = Decode(f)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestStatusErrors(t *testing.T) {
	for s := StatusOK; s <= StatusInternal; s++ {
		err := Result{Status: s, Message: "why"}.Err()
		if s == StatusOK {
			if err != nil {
				t.Fatalf("OK gave %v", err)
			}
			continue
		}
		if !errors.Is(err, s.Err()) || StatusOf(err) != s || StatusOf(s.Err()) != s {
			t.Fatalf("status %s: err %v maps back to %s", s, err, StatusOf(err))
		}
		if !strings.Contains(err.Error(), "why") {
			t.Fatalf("status %s: message lost in %q", s, err)
		}
	}
	if StatusOf(errors.New("disk on fire")) != StatusInternal || !errors.Is(Status(200).Err(), ErrInternal) {
		t.Fatal("unknown errors and statuses must map to Internal")
	}
}

func TestRegistration(t *testing.T) {
	r := Registration{ID: "b1", Address: "10.0.0.1:3181", Rack: "r1"}
	const want = `{"v":1,"id":"b1","address":"10.0.0.1:3181","rack":"r1","readOnly":false}`
	if got := string(r.Marshal()); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	back, err := ParseRegistration([]byte(want))
	if err != nil || back != (Registration{V: 1, ID: "b1", Address: "10.0.0.1:3181", Rack: "r1"}) {
		t.Fatalf("parse: %+v, %v", back, err)
	}
	if _, err := ParseRegistration([]byte(`{"v":2,"id":"b1","address":"a:1"}`)); err == nil {
		t.Fatal("a later version must be refused")
	}
	if got := BookieKey("us east", "b/1"); got != "/meridian/regions/us%20east/bookies/b%2F1" {
		t.Fatalf("BookieKey: %s", got)
	}
	for _, tc := range []struct {
		region string
		id     int64
	}{{"us east", 42}, {"r", 0}} {
		key := LedgerKey(tc.region, tc.id)
		if id, ok := ParseLedgerKey(tc.region, key); !ok || id != tc.id {
			t.Fatalf("ParseLedgerKey(%s) = %d %v", key, id, ok)
		}
	}
	for _, key := range []string{"/meridian/regions/r/ledgers/", "/meridian/regions/r/ledgers/x", "/meridian/regions/r/ledgers/1/2", "/meridian/regions/r/ledgers/007", "/meridian/regions/r2/ledgers/1"} {
		if _, ok := ParseLedgerKey("r", key); ok {
			t.Fatalf("ParseLedgerKey accepted %s", key)
		}
	}
}

func TestEntryChecksumBindsIDs(t *testing.T) {
	p := []byte("payload")
	a := EntryChecksum(1, 2, p)
	if a != EntryChecksum(1, 2, bytes.Clone(p)) {
		t.Fatal("checksum is not deterministic")
	}
	if a == EntryChecksum(2, 1, p) || a == EntryChecksum(1, 3, p) || a == EntryChecksum(1, 2, []byte("payloaD")) {
		t.Fatal("checksum ignores ids or payload")
	}
}

// chunkReader returns its data in chunks whose sizes cycle through sizes,
// the way TCP may cut a stream anywhere.
type chunkReader struct {
	data  []byte
	sizes []byte
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(r.sizes) > 0 {
		n = int(r.sizes[r.i%len(r.sizes)]) + 1
		r.i++
	}
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func FuzzFrameDecode(f *testing.F) {
	var stream []byte
	for i, m := range sampleMessages() {
		stream = AppendFrame(stream, uint64(i), m)
		f.Add(AppendFrame(nil, uint64(i), m), []byte{0})
	}
	f.Add(stream, []byte{3, 200, 7})
	f.Add([]byte{0, 0, 0, 10, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1}, []byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1}, []byte{1})
	f.Fuzz(func(t *testing.T, data, chunks []byte) {
		// Small buffer and chunked reads: frame boundaries land anywhere.
		br := bufio.NewReaderSize(&chunkReader{data: data, sizes: chunks}, 16)
		for {
			fr, err := ReadFrame(br, 1<<20)
			if err != nil {
				return
			}
			m, err := Decode(fr)
			if err != nil {
				if !errors.Is(err, ErrMalformedFrame) {
					t.Fatalf("decode error %v is not ErrMalformedFrame", err)
				}
				continue
			}
			// Whatever decodes must re-encode to a frame that decodes to
			// the same message.
			re := AppendFrame(nil, fr.RequestID, m)
			fr2, err := ReadFrame(bufio.NewReader(bytes.NewReader(re)), 0)
			if err != nil {
				t.Fatalf("re-read %s: %v", m.Type(), err)
			}
			m2, err := Decode(fr2)
			if err != nil {
				t.Fatalf("re-decode %s: %v", m.Type(), err)
			}
			if !reflect.DeepEqual(normalize(m), normalize(m2)) {
				t.Fatalf("round trip changed %#v into %#v", m, m2)
			}
		}
	})
}
