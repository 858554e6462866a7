package wire_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/meridian-mq/meridian/cluster/wire"
)

// chunkedReader returns its input in pieces whose sizes cycle through sizes,
// so that the fuzzer controls where reads split frames.
type chunkedReader struct {
	data  []byte
	sizes []byte
	i     int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)]) + 1
		c.i++
	}
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// readAll reads frames until an error and checks the invariants every frame
// must satisfy: known error classes only, and a payload frame's checksum
// holds.
func readAll(t *testing.T, r io.Reader) {
	rd := wire.NewReader(r, 64<<10)
	for {
		var f wire.Frame
		err := rd.ReadFrame(&f)
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF || errors.Is(err, wire.ErrFrameTooLarge) ||
				errors.Is(err, wire.ErrMalformedFrame) || errors.Is(err, wire.ErrChecksum) {
				return
			}
			t.Fatalf("unclassified error %v", err)
		}
		if f.Command == nil {
			t.Fatal("frame without a command")
		}
		if f.HasPayload() {
			if _, _, err := wire.SplitMessage(f.Message); err != nil {
				t.Fatalf("accepted a message that does not verify: %v", err)
			}
		}
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add(sendFrame(f, []byte("hello")))
	f.Add(append(sendFrame(f, nil), sendFrame(f, bytes.Repeat([]byte{1}, 300))...))
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		readAll(t, bytes.NewReader(data))
	})
}

// FuzzReadFrameChunked feeds the same kind of input cut into arbitrary
// chunks: a decoder must not depend on where the network splits a stream.
func FuzzReadFrameChunked(f *testing.F) {
	f.Add(sendFrame(f, []byte("hello")), []byte{0, 3, 200})
	f.Add(append(sendFrame(f, nil), sendFrame(f, []byte("x"))...), []byte{6})
	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		whole := frames(t, bytes.NewReader(data))
		chunked := frames(t, &chunkedReader{data: data, sizes: sizes})
		if len(whole) != len(chunked) {
			t.Fatalf("%d frames read whole, %d read in chunks", len(whole), len(chunked))
		}
		for i := range whole {
			if !bytes.Equal(whole[i], chunked[i]) {
				t.Fatalf("frame %d differs when read in chunks", i)
			}
		}
		readAll(t, &chunkedReader{data: data, sizes: sizes})
	})
}

// frames returns the messages (or empty for simple frames) of the frames read
// before the first error.
func frames(t *testing.T, r io.Reader) [][]byte {
	rd := wire.NewReader(r, 64<<10)
	var out [][]byte
	for {
		var f wire.Frame
		if err := rd.ReadFrame(&f); err != nil {
			return out
		}
		out = append(out, append([]byte{byte(f.Command.GetType())}, f.Message...))
	}
}
