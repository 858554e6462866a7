package wire

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// Uncompress returns a message's payload uncompressed, with the codecs
// pulsar-client-go writes. A declared uncompressed size over 64 MiB is
// refused rather than allocated.
func Uncompress(md *pb.MessageMetadata, payload []byte) ([]byte, error) {
	size := int(md.GetUncompressedSize())
	if size > 64<<20 {
		return nil, fmt.Errorf("uncompressed size %d is over 64 MiB", size)
	}
	switch md.GetCompression() {
	case pb.CompressionType_NONE:
		return payload, nil
	case pb.CompressionType_LZ4:
		out := make([]byte, size)
		n, err := lz4.UncompressBlock(payload, out)
		if err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		return out[:n], nil
	case pb.CompressionType_ZLIB:
		zr, err := zlib.NewReader(bytes.NewReader(payload))
		if err != nil {
			return nil, fmt.Errorf("zlib: %w", err)
		}
		defer zr.Close()
		return io.ReadAll(io.LimitReader(zr, int64(size)+1))
	case pb.CompressionType_ZSTD:
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		defer d.Close()
		return d.DecodeAll(payload, make([]byte, 0, size))
	case pb.CompressionType_SNAPPY:
		return snappy.Decode(make([]byte, size), payload)
	}
	return nil, fmt.Errorf("unknown compression %v", md.GetCompression())
}
