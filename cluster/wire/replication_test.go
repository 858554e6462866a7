package wire

import "testing"

func TestParseReplicationSource(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ReplicationSource
		ok   bool
	}{
		{"7:0:0", ReplicationSource{7, 0, 0}, true},
		{"12:100:189", ReplicationSource{12, 100, 189}, true},
		{"", ReplicationSource{}, false},
		{"7:1", ReplicationSource{}, false},
		{"7:1:2:3", ReplicationSource{}, false},
		{"7:x:2", ReplicationSource{}, false},
		{"7:-1:2", ReplicationSource{}, false},
		{"7:3:2", ReplicationSource{}, false},
	} {
		got, err := ParseReplicationSource(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseReplicationSource(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("%v prints %q, want %q", got, got.String(), tc.in)
		}
	}
}
