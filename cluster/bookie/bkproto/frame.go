package bkproto

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// Wire format. Every frame is
//
//	[u32 length][u8 version][u8 type][u64 requestID][body]
//
// big-endian, where length counts every byte after itself. The request id is
// chosen by the client and echoed by the response, which is how responses may
// come back in any order on one connection. A response's type is its
// request's type with ResponseBit set, and its body starts with
// [u8 status][u16 msgLen][msg]. Bodies must be consumed exactly: trailing
// bytes make the frame malformed, so that a codec bug shows up as an error at
// once rather than as a silently misread field.
const (
	// Version is the protocol version this package speaks.
	Version = 1
	// HeaderSize is the size of the fixed frame header, length included.
	HeaderSize = 4 + 1 + 1 + 8
	// MaxPayloadSize is the largest entry payload the protocol carries.
	// Pulsar's default maximum message (5 MiB) plus broker entry metadata
	// fits with room to spare.
	MaxPayloadSize = 8 << 20
	// MaxFrameSize is the largest frame (length prefix included) a peer may
	// send: the largest payload plus room for the fixed fields and a master
	// key. A longer length prefix closes the connection.
	MaxFrameSize = MaxPayloadSize + 1<<16 + 256
	// MaxMasterKeySize bounds the writer token.
	MaxMasterKeySize = 1 << 10
	// MaxAuthMethodSize and MaxCredentialsSize bound an AuthRequest.
	MaxAuthMethodSize  = 64
	MaxCredentialsSize = 16 << 10
	// MaxAuthFrameSize is the largest AuthRequest frame: all a bookie that
	// requires authentication reads, and allocates, before a connection
	// has authenticated.
	MaxAuthFrameSize = HeaderSize + 2 + MaxAuthMethodSize + 2 + MaxCredentialsSize
	// MaxMessageSize bounds a response's explanatory text.
	MaxMessageSize = 1 << 10
	// MaxLongPollTimeout bounds a ReadLAC long-poll.
	MaxLongPollTimeout = 10 * time.Minute
)

// MsgType identifies a frame's message.
type MsgType uint8

// Message types. The numeric values are part of the wire format.
const (
	TypeAddEntry  MsgType = 1
	TypeReadEntry MsgType = 2
	TypeReadLAC   MsgType = 3
	TypeFence     MsgType = 4
	TypeWriteLAC  MsgType = 5
	// TypeAuth is the first request on a connection to a bookie that
	// requires authentication (AuthRequest); the bookie answers nothing
	// else before it.
	TypeAuth MsgType = 6

	// ResponseBit marks a response to the request type in the low bits.
	ResponseBit MsgType = 0x80
)

func (t MsgType) String() string {
	name := ""
	switch t &^ ResponseBit {
	case TypeAddEntry:
		name = "AddEntry"
	case TypeReadEntry:
		name = "ReadEntry"
	case TypeReadLAC:
		name = "ReadLAC"
	case TypeFence:
		name = "Fence"
	case TypeWriteLAC:
		name = "WriteLAC"
	case TypeAuth:
		name = "Auth"
	default:
		return fmt.Sprintf("MsgType(%#x)", uint8(t))
	}
	if t&ResponseBit != 0 {
		return name + "Response"
	}
	return name
}

// Message is one request or response body.
type Message interface {
	// Type is the message's frame type.
	Type() MsgType
	appendBody(dst []byte) []byte
	decodeBody(d *decoder)
}

// AppendFrame appends m, framed with requestID, to dst.
func AppendFrame(dst []byte, requestID uint64, m Message) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, Version, byte(m.Type()))
	dst = binary.BigEndian.AppendUint64(dst, requestID)
	dst = m.appendBody(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// Frame is one undecoded frame.
type Frame struct {
	Type      MsgType
	RequestID uint64
	Body      []byte
}

// ReadFrame reads one frame from r. A length above maxSize (MaxFrameSize when
// maxSize <= 0) fails with ErrFrameTooLarge before anything is allocated, and
// a frame of an unknown version with ErrUnsupportedVersion. io.EOF means a
// clean end between frames; a stream cut inside a frame gives
// io.ErrUnexpectedEOF. The body is a fresh allocation the caller may keep.
func ReadFrame(r *bufio.Reader, maxSize int) (Frame, error) {
	if maxSize <= 0 || maxSize > MaxFrameSize {
		maxSize = MaxFrameSize
	}
	var hdr [HeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		return Frame{}, err // io.EOF at a frame boundary is a clean close
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if uint64(n)+4 > uint64(maxSize) {
		return Frame{}, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, uint64(n)+4, maxSize)
	}
	if n < HeaderSize-4 {
		return Frame{}, fmt.Errorf("%w: length %d shorter than the header", ErrMalformedFrame, n)
	}
	if _, err := io.ReadFull(r, hdr[4:]); err != nil {
		return Frame{}, unexpectedEOF(err)
	}
	if hdr[4] != Version {
		return Frame{}, fmt.Errorf("%w: %d (we speak %d)", ErrUnsupportedVersion, hdr[4], Version)
	}
	f := Frame{
		Type:      MsgType(hdr[5]),
		RequestID: binary.BigEndian.Uint64(hdr[6:]),
		Body:      make([]byte, int(n)-(HeaderSize-4)),
	}
	if _, err := io.ReadFull(r, f.Body); err != nil {
		return Frame{}, unexpectedEOF(err)
	}
	return f, nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Decode decodes a frame's body according to its type. The returned message's
// byte slices (payloads, keys) alias f.Body.
func Decode(f Frame) (Message, error) {
	var m Message
	switch f.Type {
	case TypeAddEntry:
		m = &AddRequest{}
	case TypeReadEntry:
		m = &ReadRequest{}
	case TypeReadLAC:
		m = &ReadLACRequest{}
	case TypeFence:
		m = &FenceRequest{}
	case TypeWriteLAC:
		m = &WriteLACRequest{}
	case TypeAuth:
		m = &AuthRequest{}
	case TypeAddEntry | ResponseBit:
		m = &AddResponse{}
	case TypeReadEntry | ResponseBit:
		m = &ReadResponse{}
	case TypeReadLAC | ResponseBit:
		m = &ReadLACResponse{}
	case TypeFence | ResponseBit:
		m = &FenceResponse{}
	case TypeWriteLAC | ResponseBit:
		m = &WriteLACResponse{}
	case TypeAuth | ResponseBit:
		m = &AuthResponse{}
	default:
		return nil, fmt.Errorf("%w: unknown message type %#x", ErrMalformedFrame, uint8(f.Type))
	}
	d := decoder{buf: f.Body}
	m.decodeBody(&d)
	if d.err == nil && len(d.buf) != 0 {
		d.fail("%d trailing bytes", len(d.buf))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrMalformedFrame, f.Type, d.err)
	}
	return m, nil
}

// decoder reads big-endian fields from a body; the first failure sticks and
// later reads return zero values, so decodeBody methods need no error checks.
type decoder struct {
	buf []byte
	err error
}

type decodeError string

func (e decodeError) Error() string { return string(e) }

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = decodeError(fmt.Sprintf(format, args...))
	}
	d.buf = nil
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.buf) < n {
		d.fail("truncated %s", what)
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

func (d *decoder) u8(what string) uint8 {
	if b := d.take(1, what); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) u16(what string) uint16 {
	if b := d.take(2, what); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (d *decoder) u32(what string) uint32 {
	if b := d.take(4, what); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) i64(what string) int64 {
	if b := d.take(8, what); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// bytes16 reads a u16-length-prefixed byte string of at most limit bytes.
func (d *decoder) bytes16(what string, limit int) []byte {
	n := int(d.u16(what + " length"))
	if d.err == nil && n > limit {
		d.fail("%s of %d bytes exceeds %d", what, n, limit)
	}
	b := d.take(n, what)
	if len(b) == 0 {
		return nil
	}
	return b
}

// bytes32 reads a u32-length-prefixed byte string of at most limit bytes.
func (d *decoder) bytes32(what string, limit int) []byte {
	n := d.u32(what + " length")
	if d.err == nil && n > uint32(limit) {
		d.fail("%s of %d bytes exceeds %d", what, n, limit)
	}
	return d.take(int(n), what)
}

func appendI64(dst []byte, v int64) []byte { return binary.BigEndian.AppendUint64(dst, uint64(v)) }

func appendBytes16(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(b)))
	return append(dst, b...)
}

func appendBytes32(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}
