package broker

import "testing"

// TestMurmur3 checks the hash against MurmurHash3_x86_32's published
// test vectors (seed 0).
func TestMurmur3(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint32
	}{
		{"", 0},
		{"a", 0x3c2569b2},
		{"abc", 0xb3dd93fa},
		{"abcd", 0x43ed676a},
		{"Hello, world!", 0xc0363e43},
		{"The quick brown fox jumps over the lazy dog", 0x2e4ff723},
	} {
		if got := murmur3([]byte(c.in)); got != c.want {
			t.Errorf("murmur3(%q) = %#x, want %#x", c.in, got, c.want)
		}
	}
}

// TestKeySharedAutoSplit: ranges stay contiguous and cover the hash space
// as consumers join and leave, and every hash has a consumer.
func TestKeySharedAutoSplit(t *testing.T) {
	var s keySharedSelector
	cs := make([]*consumer, 5)
	check := func() {
		t.Helper()
		if len(s.ranges) == 0 {
			return
		}
		if s.ranges[0].start != 0 || s.ranges[len(s.ranges)-1].end != hashSpace-1 {
			t.Fatalf("ranges do not cover the space: %+v", s.ranges)
		}
		for i := 1; i < len(s.ranges); i++ {
			if s.ranges[i].start != s.ranges[i-1].end+1 {
				t.Fatalf("gap or overlap: %+v", s.ranges)
			}
		}
		for _, h := range []uint32{0, 1, 12345, 32768, hashSpace - 1} {
			if s.pick(h) == nil {
				t.Fatalf("hash %d has no consumer: %+v", h, s.ranges)
			}
		}
	}
	for i := range cs {
		cs[i] = &consumer{name: string(rune('a' + i))}
		if err := s.add(cs[i], nil); err != nil {
			t.Fatal(err)
		}
		check()
	}
	for _, i := range []int{2, 4, 0, 1} {
		s.remove(cs[i], true)
		check()
	}
	if got := s.pick(777); got != cs[3] {
		t.Fatalf("the last consumer should own everything, got %v", got)
	}
	if err := s.add(cs[0], [][2]uint32{{0, 10}}); err == nil {
		t.Fatal("a sticky range overlapping another consumer's was accepted")
	}
}
