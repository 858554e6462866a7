package topology

import (
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// A namespace's topics are grouped into bundles: ranges of a 32-bit hash of
// the full topic name. Ownership is per bundle (DESIGN §1), so a broker takes
// over or gives up a whole range of topics at once. The hash and the default
// boundaries are Pulsar's, so that `bundle-range` answers match a Pulsar
// cluster's: CRC32 (IEEE) of the UTF-8 canonical name, partitions hashed
// separately, and n equal ranges with the last one closed at 0xffffffff.

// DefaultBundleCount is Pulsar's defaultNumberOfNamespaceBundles.
const DefaultBundleCount = 4

// Bundle is the hash range [Lower, Upper), closed at Upper when it is the
// namespace's last bundle (Upper == 0xffffffff).
type Bundle struct {
	Lower, Upper uint32
}

// String is Pulsar's bundle range name, "0x00000000_0x40000000".
func (b Bundle) String() string { return fmt.Sprintf("0x%08x_0x%08x", b.Lower, b.Upper) }

// Contains reports whether hash falls in the bundle.
func (b Bundle) Contains(hash uint32) bool {
	return hash >= b.Lower && (hash < b.Upper || b.Upper == 0xffffffff)
}

// ParseBundle parses a bundle range name.
func ParseBundle(s string) (Bundle, error) {
	lo, hi, ok := strings.Cut(s, "_")
	if !ok {
		return Bundle{}, fmt.Errorf("%w %q: want 0xLOWER_0xUPPER", ErrInvalidBundle, s)
	}
	l, err1 := strconv.ParseUint(lo, 0, 32)
	u, err2 := strconv.ParseUint(hi, 0, 32)
	if err1 != nil || err2 != nil || l >= u {
		return Bundle{}, fmt.Errorf("%w %q: want 0xLOWER_0xUPPER with LOWER < UPPER", ErrInvalidBundle, s)
	}
	return Bundle{Lower: uint32(l), Upper: uint32(u)}, nil
}

// TopicHash is the hash that places a topic in a bundle.
func TopicHash(t TopicName) uint32 { return crc32.ChecksumIEEE([]byte(t.String())) }

// EvenBundles splits the hash space into n equal bundles, as Pulsar does
// for a new namespace.
func EvenBundles(n int) ([]Bundle, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d bundles, want at least 1", ErrInvalidBundle, n)
	}
	step := (uint64(1) << 32) / uint64(n)
	bundles := make([]Bundle, n)
	for i := range bundles {
		bundles[i].Lower = uint32(uint64(i) * step)
		if i == n-1 {
			bundles[i].Upper = 0xffffffff
		} else {
			bundles[i].Upper = uint32(uint64(i+1) * step)
		}
	}
	return bundles, nil
}

// BundleOf returns the bundle among bundles (a namespace's, covering the
// whole hash space in order) that holds t.
func BundleOf(t TopicName, bundles []Bundle) (Bundle, error) {
	h := TopicHash(t)
	for _, b := range bundles {
		if b.Contains(h) {
			return b, nil
		}
	}
	return Bundle{}, fmt.Errorf("%w: no bundle holds hash 0x%08x of %s", ErrInvalidBundle, h, t)
}
