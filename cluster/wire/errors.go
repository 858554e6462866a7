package wire

import "errors"

// Frame decoding errors. Each is returned wrapped with details; classify with
// errors.Is. After any of them the byte stream cannot be trusted to be at a
// frame boundary, so the connection must be closed.
var (
	// ErrFrameTooLarge: a size field exceeds the configured maximum frame size.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrMalformedFrame: sizes that do not add up, a truncated section, or a
	// command that does not decode.
	ErrMalformedFrame = errors.New("wire: malformed frame")
	// ErrChecksum: a message's CRC32C does not match its bytes.
	ErrChecksum = errors.New("wire: checksum mismatch")
	// ErrMalformedBatch: a batch payload whose entries do not match its
	// declared message count or whose sizes run past its end.
	ErrMalformedBatch = errors.New("wire: malformed batch")
)
