package topology

import (
	"errors"
	"strings"
	"testing"
)

func TestParseTopicName(t *testing.T) {
	for _, tc := range []struct {
		in, want, namespace string
		partition           int
	}{
		{"my-topic", "persistent://public/default/my-topic", "public/default", -1},
		{"tenant/ns/t", "persistent://tenant/ns/t", "tenant/ns", -1},
		{"persistent://tenant/ns/t", "persistent://tenant/ns/t", "tenant/ns", -1},
		{"non-persistent://tenant/ns/t", "non-persistent://tenant/ns/t", "tenant/ns", -1},
		{"persistent://tenant/us-east/ns/t", "persistent://tenant/us-east/ns/t", "tenant/us-east/ns", -1},
		{"persistent://tenant/c/ns/a/b", "persistent://tenant/c/ns/a/b", "tenant/c/ns", -1},
		{"t-partition-7", "persistent://public/default/t-partition-7", "public/default", 7},
		{"t-partition-x", "persistent://public/default/t-partition-x", "public/default", -1},
	} {
		got, err := ParseTopicName(tc.in)
		if err != nil {
			t.Errorf("ParseTopicName(%q): %v", tc.in, err)
			continue
		}
		if got.String() != tc.want || got.NamespaceName() != tc.namespace || got.Partition != tc.partition {
			t.Errorf("ParseTopicName(%q) = %s (namespace %s, partition %d), want %s (%s, %d)",
				tc.in, got, got.NamespaceName(), got.Partition, tc.want, tc.namespace, tc.partition)
		}
	}
}

func TestParseTopicNameRefuses(t *testing.T) {
	for _, in := range []string{
		"", "a/b", "a/b/c/d", "queue://t/ns/x", "persistent://t/ns", "persistent://t/ns/",
		"persistent://t!/ns/x", "persistent:///ns/x", "persistent://t/n s/x",
		"persistent://t/ns/a\x00b", "persistent://t/ns/\xff\xfe", "persistent://t/ns/line\nbreak",
		"persistent://t/ns/" + strings.Repeat("x", MaxLocalNameLength+1),
		"persistent://" + strings.Repeat("t", MaxNameLength+1) + "/ns/x",
	} {
		if _, err := ParseTopicName(in); !errors.Is(err, ErrInvalidTopicName) {
			t.Errorf("ParseTopicName(%q) = %v, want ErrInvalidTopicName", in, err)
		}
	}
}

// TestParseTopicNameAccepts: the bounds leave Pulsar's names alone: other
// scripts, punctuation, and names up to the limits.
func TestParseTopicNameAccepts(t *testing.T) {
	for _, in := range []string{
		"persistent://t/ns/заказы", "persistent://t/ns/orders.v2@eu#1",
		"persistent://t/ns/" + strings.Repeat("x", MaxLocalNameLength),
		"persistent://" + strings.Repeat("t", MaxNameLength) + "/ns/x",
	} {
		if _, err := ParseTopicName(in); err != nil {
			t.Errorf("ParseTopicName(%.40q...) = %v", in, err)
		}
	}
}

func TestPartitions(t *testing.T) {
	base, err := ParseTopicName("persistent://t/ns/orders")
	if err != nil {
		t.Fatal(err)
	}
	p := base.PartitionN(3)
	if p.String() != "persistent://t/ns/orders-partition-3" || !p.IsPartition() {
		t.Fatalf("PartitionN(3) = %s", p)
	}
	if p.Base() != base || base.Base() != base {
		t.Fatalf("Base() = %s, want %s", p.Base(), base)
	}
}

func TestBundles(t *testing.T) {
	four, err := EvenBundles(DefaultBundleCount)
	if err != nil {
		t.Fatal(err)
	}
	// Pulsar's boundaries for a namespace of four bundles.
	want := []string{"0x00000000_0x40000000", "0x40000000_0x80000000", "0x80000000_0xc0000000", "0xc0000000_0xffffffff"}
	for i, b := range four {
		if b.String() != want[i] {
			t.Errorf("bundle %d = %s, want %s", i, b, want[i])
		}
		if parsed, err := ParseBundle(want[i]); err != nil || parsed != b {
			t.Errorf("ParseBundle(%s) = %v, %v", want[i], parsed, err)
		}
	}
	if !four[3].Contains(0xffffffff) || four[0].Contains(0x40000000) || !four[1].Contains(0x40000000) {
		t.Error("bundle bounds are not [lower, upper) with the last one closed")
	}

	// Expected hashes from an independent CRC32 (Python's zlib.crc32).
	for _, tc := range []struct {
		topic  string
		hash   uint32
		bundle string
	}{
		{"my-topic", 0x2bad45f7, "0x00000000_0x40000000"},
		{"my-topic-partition-3", 0xa442138f, "0x80000000_0xc0000000"},
	} {
		name, err := ParseTopicName(tc.topic)
		if err != nil {
			t.Fatal(err)
		}
		if h := TopicHash(name); h != tc.hash {
			t.Errorf("TopicHash(%s) = 0x%08x, want 0x%08x", name, h, tc.hash)
		}
		if b, err := BundleOf(name, four); err != nil || b.String() != tc.bundle {
			t.Errorf("BundleOf(%s) = %v, %v, want %s", name, b, err, tc.bundle)
		}
	}

	for _, bad := range []string{"0x10", "0x20_0x10", "zz_0x10", "0x0_0x100000000"} {
		if _, err := ParseBundle(bad); !errors.Is(err, ErrInvalidBundle) {
			t.Errorf("ParseBundle(%q) = %v, want ErrInvalidBundle", bad, err)
		}
	}
	if _, err := EvenBundles(0); !errors.Is(err, ErrInvalidBundle) {
		t.Errorf("EvenBundles(0) = %v", err)
	}
	one, _ := EvenBundles(1)
	if one[0].String() != "0x00000000_0xffffffff" {
		t.Errorf("one bundle = %s", one[0])
	}
}
