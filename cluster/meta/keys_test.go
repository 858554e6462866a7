package meta

import (
	"errors"
	"strings"
	"testing"
)

func TestKeys(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Key("meridian", "regions", "us-east", "ledgers", "42"), "/meridian/regions/us-east/ledgers/42"},
		{GlobalKey("tenants", "acme"), "/meridian/global/tenants/acme"},
		{GlobalKey("namespaces", "acme", "ns"), "/meridian/global/namespaces/acme/ns"},
		{RegionKey("eu-west", "bookies", "10.0.0.1:3181"), "/meridian/regions/eu-west/bookies/10.0.0.1:3181"},
		{RegionKey("r", "cursors", "persistent://t/n/x", "sub"), "/meridian/regions/r/cursors/persistent:%2F%2Ft%2Fn%2Fx/sub"},
		{Key("a b", "ü", "%"), "/a%20b/%C3%BC/%25"},
		{Prefix(GlobalKey("tenants")), "/meridian/global/tenants/"},
		{Prefix("/x/"), "/x/"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	// A name that contains a "/" or is a prefix of another never puts its
	// key under another name's prefix.
	for _, names := range [][2]string{{"t", "t2"}, {"t", "t/2"}, {"a", "a%2F"}} {
		if k := RegionKey("r", "x", names[1]); strings.HasPrefix(k, Prefix(RegionKey("r", "x", names[0]))) {
			t.Errorf("key of %q is under the prefix of %q: %s", names[1], names[0], k)
		}
	}
	for _, name := range []string{"plain", "persistent://t/n/x", "a%b", "ü"} {
		got, err := Name(RegionKey("r", "topics", name))
		if err != nil || got != name {
			t.Errorf("Name(RegionKey(%q)) = %q, %v", name, got, err)
		}
	}
	if _, err := Name("/x/%zz"); err == nil {
		t.Error("Name accepted a bad escape")
	}
}

func TestVersionedJSON(t *testing.T) {
	type bookie struct {
		Rack string `json:"rack"`
	}
	data, err := EncodeJSON(1, bookie{Rack: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"v":1,"rack":"r1"}` {
		t.Fatalf("EncodeJSON = %s", data)
	}
	if data, _ := EncodeJSON(2, struct{}{}); string(data) != `{"v":2}` {
		t.Fatalf("EncodeJSON of an empty struct = %s", data)
	}
	if _, err := EncodeJSON(1, []int{1}); err == nil {
		t.Fatal("EncodeJSON accepted a non-object")
	}
	var b bookie
	if v, err := DecodeJSON(data, 1, &b); err != nil || v != 1 || b.Rack != "r1" {
		t.Fatalf("DecodeJSON = %d, %+v, %v", v, b, err)
	}
	for _, in := range []string{`{"v":2,"rack":"x"}`, `{"rack":"x"}`} {
		if _, err := DecodeJSON([]byte(in), 1, &b); !errors.Is(err, ErrValueVersion) {
			t.Errorf("DecodeJSON(%s): %v, want ErrValueVersion", in, err)
		}
	}
	if _, err := DecodeJSON([]byte(`{"v":`), 1, &b); err == nil || errors.Is(err, ErrValueVersion) {
		t.Errorf("DecodeJSON of broken JSON: %v", err)
	}
}
