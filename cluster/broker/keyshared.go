package broker

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/meridian-mq/meridian/cluster/wire"
)

// hashSpace is Pulsar's Key_Shared hash range size: a key's hash is
// Murmur3_32(key) & MaxInt32, modulo 65536.
const hashSpace = 1 << 16

// keyHash is the Key_Shared hash of a sticky key, as Pulsar computes it, so
// that ranges declared by STICKY consumers mean the same keys here.
func keyHash(key []byte) uint32 {
	return (murmur3(key) & math.MaxInt32) % hashSpace
}

// murmur3 is MurmurHash3's x86 32-bit hash with seed 0 (Austin Appleby's
// public-domain algorithm), which Pulsar's Murmur3_32Hash computes.
func murmur3(data []byte) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	var h uint32
	n := len(data)
	for ; len(data) >= 4; data = data[4:] {
		k := binary.LittleEndian.Uint32(data)
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch len(data) {
	case 3:
		k ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(data[0])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// keyRange is one consumer's slice of the hash space, [start, end].
type keyRange struct {
	start, end uint32
	c          *consumer
}

// keySharedSelector maps key hashes to consumers.
//
// AUTO_SPLIT (Pulsar's HashRangeAutoSplitStickyKeyConsumerSelector): the
// first consumer takes the whole space; each consumer that joins splits the
// largest range in two and takes its lower half; one that leaves hands its
// range to the neighbour above (or below, for the top range). Ranges stay
// contiguous and cover the whole space while there is a consumer.
//
// STICKY: each consumer declares its ranges; overlapping declarations are
// refused, and a hash nobody declared has no consumer (its messages wait).
type keySharedSelector struct {
	ranges []keyRange // sorted by start, disjoint
}

// add places c: declared ranges for STICKY, a split for AUTO_SPLIT.
func (s *keySharedSelector) add(c *consumer, declared [][2]uint32) error {
	if declared != nil {
		for _, d := range declared {
			if d[0] > d[1] || d[1] >= hashSpace {
				return fmt.Errorf("%w: hash range [%d, %d] is not within [0, %d]", wire.ErrConsumerAssign, d[0], d[1], hashSpace-1)
			}
			for _, r := range s.ranges {
				if d[0] <= r.end && r.start <= d[1] {
					return fmt.Errorf("%w: hash range [%d, %d] overlaps consumer %q's [%d, %d]",
						wire.ErrConsumerAssign, d[0], d[1], r.c.name, r.start, r.end)
				}
			}
		}
		for _, d := range declared {
			s.ranges = append(s.ranges, keyRange{d[0], d[1], c})
		}
		slices.SortFunc(s.ranges, func(a, b keyRange) int { return int(a.start) - int(b.start) })
		return nil
	}
	if len(s.ranges) == 0 {
		s.ranges = []keyRange{{0, hashSpace - 1, c}}
		return nil
	}
	big := 0
	for i, r := range s.ranges {
		if r.end-r.start > s.ranges[big].end-s.ranges[big].start {
			big = i
		}
	}
	r := s.ranges[big]
	if r.start == r.end {
		return fmt.Errorf("%w: no hash range left to split", wire.ErrConsumerAssign)
	}
	mid := r.start + (r.end-r.start)/2
	s.ranges[big].start = mid + 1
	s.ranges = slices.Insert(s.ranges, big, keyRange{r.start, mid, c})
	return nil
}

// remove takes c's ranges away; in AUTO_SPLIT mode a neighbour absorbs
// each, keeping the space covered.
func (s *keySharedSelector) remove(c *consumer, autoSplit bool) {
	for i := 0; i < len(s.ranges); {
		if s.ranges[i].c != c {
			i++
			continue
		}
		r := s.ranges[i]
		s.ranges = slices.Delete(s.ranges, i, i+1)
		if !autoSplit || len(s.ranges) == 0 {
			continue
		}
		if i < len(s.ranges) {
			s.ranges[i].start = r.start
		} else {
			s.ranges[i-1].end = r.end
		}
	}
}

// pick returns the consumer of hash h, or nil.
func (s *keySharedSelector) pick(h uint32) *consumer {
	i, _ := slices.BinarySearchFunc(s.ranges, h, func(r keyRange, h uint32) int {
		switch {
		case r.end < h:
			return -1
		case r.start > h:
			return 1
		}
		return 0
	})
	if i < len(s.ranges) && s.ranges[i].start <= h && h <= s.ranges[i].end {
		return s.ranges[i].c
	}
	return nil
}
