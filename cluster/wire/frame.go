package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

const (
	// MagicCRC32C starts a message: its CRC32C and metadata follow.
	MagicCRC32C uint16 = 0x0e01
	// MagicBrokerEntryMetadata starts a BrokerEntryMetadata section, which a
	// broker may put in front of a message.
	MagicBrokerEntryMetadata uint16 = 0x0e02

	// DefaultMaxMessageSize is Pulsar's default maxMessageSize (5 MiB), which
	// a broker announces in CONNECTED.
	DefaultMaxMessageSize = 5 << 20
	// DefaultMaxFrameSize leaves Pulsar's 10 KiB of room for the command and
	// headers around a message of DefaultMaxMessageSize.
	DefaultMaxFrameSize = DefaultMaxMessageSize + 10<<10

	// messageHeaderSize is the magic, the checksum and the metadata size.
	messageHeaderSize = 2 + 4 + 4
)

// castagnoli is the CRC32C table (hardware accelerated where available).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C (Castagnoli) of b, as Pulsar computes it.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Frame is one decoded frame. For a simple frame only Command is set.
//
// Every byte slice in a Frame points into the buffer the frame was read into:
// nothing is copied. Those bytes are never written again by the Reader, so the
// slices stay valid for as long as anyone holds them, also after later
// ReadFrame calls; a layer may store them asynchronously (a ledger add, an
// entry cache) without copying. The price is that a retained slice keeps its
// whole read chunk (at most Reader's chunk size, or the frame's own size if
// larger) alive: a long-lived holder of small slices should copy them.
type Frame struct {
	Command *pb.BaseCommand

	// BrokerEntryMetadata is the serialized pb.BrokerEntryMetadata that
	// preceded the message, or nil.
	BrokerEntryMetadata []byte
	// Message is the message from its 0x0e01 magic to the end of the frame:
	// the bytes a broker stores and dispatches unchanged. Nil for a simple
	// frame. Its checksum has been verified.
	Message []byte
	// Metadata is the serialized pb.MessageMetadata (a part of Message).
	Metadata []byte
	// Payload is the message payload after the metadata (a part of Message):
	// possibly compressed, possibly a batch, possibly encrypted.
	Payload []byte
}

// HasPayload reports whether the frame carries a message.
func (f *Frame) HasPayload() bool { return f.Message != nil }

// DecodeMetadata unmarshals the frame's MessageMetadata.
func (f *Frame) DecodeMetadata() (*pb.MessageMetadata, error) {
	md := &pb.MessageMetadata{}
	if err := proto.Unmarshal(f.Metadata, md); err != nil {
		return nil, fmt.Errorf("%w: message metadata: %v", ErrMalformedFrame, err)
	}
	return md, nil
}

// DecodeFrame decodes one frame, given without its leading total-size field.
// The frame's slices alias b. A payload frame's checksum is verified.
func DecodeFrame(b []byte, f *Frame) error {
	*f = Frame{}
	cmdSize, rest, err := readSize(b, "command")
	if err != nil {
		return err
	}
	cmd := &pb.BaseCommand{}
	if err := proto.Unmarshal(rest[:cmdSize], cmd); err != nil {
		return fmt.Errorf("%w: command: %v", ErrMalformedFrame, err)
	}
	f.Command = cmd
	rest = rest[cmdSize:]
	if len(rest) == 0 {
		return nil
	}
	return decodeMessage(rest, f)
}

// decodeMessage decodes what follows the command in a payload frame: an
// optional BrokerEntryMetadata section, then the message.
func decodeMessage(b []byte, f *Frame) error {
	if len(b) < 2 {
		return fmt.Errorf("%w: %d stray bytes after the command", ErrMalformedFrame, len(b))
	}
	if binary.BigEndian.Uint16(b) == MagicBrokerEntryMetadata {
		size, rest, err := readSize(b[2:], "broker entry metadata")
		if err != nil {
			return err
		}
		f.BrokerEntryMetadata = rest[:size:size]
		b = rest[size:]
	}
	md, payload, err := SplitMessage(b)
	if err != nil {
		return err
	}
	f.Message, f.Metadata, f.Payload = b, md, payload
	return nil
}

// SplitMessage verifies a message ([magic][crc32c][metadataSize][metadata]
// [payload], as stored by a broker) and returns its metadata and payload,
// which alias msg.
func SplitMessage(msg []byte) (metadata, payload []byte, err error) {
	if len(msg) < messageHeaderSize {
		return nil, nil, fmt.Errorf("%w: message header is %d bytes, want at least %d", ErrMalformedFrame, len(msg), messageHeaderSize)
	}
	if magic := binary.BigEndian.Uint16(msg); magic != MagicCRC32C {
		return nil, nil, fmt.Errorf("%w: message magic 0x%04x, want 0x%04x", ErrMalformedFrame, magic, MagicCRC32C)
	}
	want := binary.BigEndian.Uint32(msg[2:])
	if got := Checksum(msg[6:]); got != want {
		return nil, nil, fmt.Errorf("%w: received 0x%08x, computed 0x%08x", ErrChecksum, want, got)
	}
	size, rest, err := readSize(msg[6:], "message metadata")
	if err != nil {
		return nil, nil, err
	}
	return rest[:size:size], rest[size:], nil
}

// DecodeMessageMetadata verifies a stored message (SplitMessage) and
// unmarshals its MessageMetadata.
func DecodeMessageMetadata(msg []byte) (*pb.MessageMetadata, error) {
	md, _, err := DecodeMessage(msg)
	return md, err
}

// DecodeMessage verifies a stored message (SplitMessage) and returns its
// unmarshalled MessageMetadata and its payload, which aliases msg.
func DecodeMessage(msg []byte) (*pb.MessageMetadata, []byte, error) {
	b, payload, err := SplitMessage(msg)
	if err != nil {
		return nil, nil, err
	}
	f := Frame{Metadata: b}
	md, err := f.DecodeMetadata()
	return md, payload, err
}

// readSize reads a u32 size field and checks that that many bytes follow.
func readSize(b []byte, what string) (size uint32, rest []byte, err error) {
	if len(b) < 4 {
		return 0, nil, fmt.Errorf("%w: %s size field truncated", ErrMalformedFrame, what)
	}
	size = binary.BigEndian.Uint32(b)
	if uint64(size) > uint64(len(b)-4) {
		return 0, nil, fmt.Errorf("%w: %s of %d bytes, only %d left", ErrMalformedFrame, what, size, len(b)-4)
	}
	return size, b[4:], nil
}

// AppendCommand appends a simple frame carrying cmd to dst.
func AppendCommand(dst []byte, cmd *pb.BaseCommand) ([]byte, error) {
	return appendFrame(dst, cmd, nil, nil)
}

// AppendPayloadCommand appends a payload frame: cmd, then, when
// brokerEntryMetadata is not nil, that serialized BrokerEntryMetadata section,
// then message exactly as given (from its 0x0e01 magic on; see Frame.Message).
func AppendPayloadCommand(dst []byte, cmd *pb.BaseCommand, brokerEntryMetadata, message []byte) ([]byte, error) {
	if message == nil {
		message = []byte{}
	}
	return appendFrame(dst, cmd, brokerEntryMetadata, message)
}

func appendFrame(dst []byte, cmd *pb.BaseCommand, bem, message []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // total size, command size
	var err error
	if dst, err = (proto.MarshalOptions{}).MarshalAppend(dst, cmd); err != nil {
		return dst[:start], fmt.Errorf("wire: marshal command: %w", err)
	}
	binary.BigEndian.PutUint32(dst[start+4:], uint32(len(dst)-start-8))
	if message != nil {
		if bem != nil {
			dst = binary.BigEndian.AppendUint16(dst, MagicBrokerEntryMetadata)
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(bem)))
			dst = append(dst, bem...)
		}
		dst = append(dst, message...)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst, nil
}

// AppendMessage appends a message ([magic][crc32c][metadataSize][metadata]
// [payload]) with its checksum computed, as a producer sends it.
func AppendMessage(dst []byte, md *pb.MessageMetadata, payload []byte) ([]byte, error) {
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, MagicCRC32C)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // checksum, metadata size
	var err error
	if dst, err = (proto.MarshalOptions{}).MarshalAppend(dst, md); err != nil {
		return dst[:start], fmt.Errorf("wire: marshal message metadata: %w", err)
	}
	binary.BigEndian.PutUint32(dst[start+6:], uint32(len(dst)-start-messageHeaderSize))
	dst = append(dst, payload...)
	binary.BigEndian.PutUint32(dst[start+2:], Checksum(dst[start+6:]))
	return dst, nil
}

// Reader reads frames from a byte stream. It is not safe for concurrent use:
// one goroutine owns a connection's reading side.
//
// It reads into chunks that it never reuses: a frame's bytes are carved out of
// the current chunk, and when a frame does not fit, a new chunk is allocated
// and only the partial frame is moved into it. One read from the network
// therefore fills many small frames, and handed-out slices stay valid forever
// (see Frame).
//
// Memory follows the bytes that arrived, never a size the peer declared: the
// first chunk is small and each new one doubles up to maxChunkSize, so a
// connection that sends little holds little; and a frame larger than a chunk
// grows its buffer as its bytes arrive, to at most twice what has arrived. A
// peer that sends a four-byte size and nothing more costs one small chunk,
// whatever the size says (a broker must not reserve memory for a client that
// has not yet said who it is).
type Reader struct {
	r            io.Reader
	maxFrameSize int
	chunkSize    int    // the size of the next chunk, doubling to maxChunkSize
	buf          []byte // the current chunk; buf[start:end] is read but not yet decoded
	start, end   int
}

// firstChunkSize and maxChunkSize bound the read chunks: the first holds a
// CONNECT and a few small commands; the largest is big enough that a read
// from a busy connection brings many frames, small enough that a pinned
// chunk costs little.
const (
	firstChunkSize = 4 << 10
	maxChunkSize   = 64 << 10
)

// NewReader returns a Reader that refuses frames larger than maxFrameSize
// (the total-size field; DefaultMaxFrameSize when maxFrameSize <= 0).
func NewReader(r io.Reader, maxFrameSize int) *Reader {
	rd := &Reader{r: r, chunkSize: firstChunkSize}
	rd.SetMaxFrameSize(maxFrameSize)
	return rd
}

// SetMaxFrameSize changes the limit for the frames read from now on
// (DefaultMaxFrameSize when maxFrameSize <= 0): a server reads with a small
// limit until the client has authenticated, and the full one after.
func (r *Reader) SetMaxFrameSize(maxFrameSize int) {
	if maxFrameSize <= 0 {
		maxFrameSize = DefaultMaxFrameSize
	}
	r.maxFrameSize = maxFrameSize
}

// ReadFrame reads and decodes the next frame into f. It returns io.EOF at a
// clean end of stream, io.ErrUnexpectedEOF inside a frame, and an error
// wrapping ErrFrameTooLarge, ErrMalformedFrame or ErrChecksum for bad input;
// after any error the stream is not at a frame boundary and must be closed.
func (r *Reader) ReadFrame(f *Frame) error {
	if err := r.fill(4); err != nil {
		return err
	}
	total := binary.BigEndian.Uint32(r.buf[r.start:])
	if uint64(total) > uint64(r.maxFrameSize) {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, total, r.maxFrameSize)
	}
	n := 4 + int(total)
	if err := r.fill(n); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	frame := r.buf[r.start+4 : r.start+n : r.start+n]
	r.start += n
	return DecodeFrame(frame, f)
}

// fill makes at least n undecoded bytes available in buf[start:end].
func (r *Reader) fill(n int) error {
	for r.end-r.start < n {
		// A frame that does not fit in what is left of this chunk moves to a
		// new one: at once if it fits in a chunk, and otherwise only once this
		// chunk is full, so that its buffer grows with its bytes.
		if len(r.buf)-r.start < n && (n <= r.chunkSize || r.end == len(r.buf)) {
			r.moveToNewChunk(n)
		}
		read, err := r.r.Read(r.buf[r.end:])
		r.end += read
		if err != nil {
			if r.end-r.start >= n {
				return nil
			}
			if err == io.EOF && r.end > r.start {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// moveToNewChunk starts a new chunk for a frame of n bytes and moves the
// frame's partial bytes into it. The old chunk is never written again
// because frames already handed out may point into it.
func (r *Reader) moveToNewChunk(n int) {
	have := r.end - r.start
	size := r.chunkSize
	if n > size {
		size = min(n, max(size, 2*have))
	}
	next := make([]byte, size)
	copy(next, r.buf[r.start:r.end])
	r.buf, r.start, r.end = next, 0, have
	r.chunkSize = min(2*r.chunkSize, maxChunkSize)
}

// Writer buffers frames and writes them out on Flush, so that a connection's
// writing goroutine can coalesce everything it has queued into one write. It is
// not safe for concurrent use.
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer over w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteCommand buffers a simple frame.
func (w *Writer) WriteCommand(cmd *pb.BaseCommand) error {
	var err error
	w.buf, err = AppendCommand(w.buf, cmd)
	return err
}

// WritePayloadCommand buffers a payload frame (see AppendPayloadCommand).
func (w *Writer) WritePayloadCommand(cmd *pb.BaseCommand, brokerEntryMetadata, message []byte) error {
	var err error
	w.buf, err = AppendPayloadCommand(w.buf, cmd, brokerEntryMetadata, message)
	return err
}

// Buffered returns the number of bytes waiting for Flush.
func (w *Writer) Buffered() int { return len(w.buf) }

// Flush writes every buffered frame.
func (w *Writer) Flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.w.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}
