package auth

import (
	"strings"
	"testing"
	"time"
)

// FuzzTokenVerify: whatever arrives in CONNECT's auth_data, Verify never
// panics, and accepts nothing but tokens signed with the key.
func FuzzTokenVerify(f *testing.F) {
	secret := []byte("fuzz-secret-fuzz-secret-fuzz-secret-32")
	good, err := CreateToken(secret, "HS256", "alice", epoch.Add(time.Hour), nil)
	if err != nil {
		f.Fatal(err)
	}
	p, err := NewToken(TokenConfig{SecretKey: dataURL(secret), Now: fixedClock})
	if err != nil {
		f.Fatal(err)
	}
	parts := strings.Split(good, ".")
	for _, s := range []string{good, "", ".", "..", "a.b.c", parts[0] + "." + parts[1] + ".", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.", good + "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		info, err := p.Verify(tok)
		if err != nil {
			return
		}
		// Accepted: it must carry the only signature the key makes for
		// its header and claims.
		h, _, derr := DecodeUnverified(strings.TrimSpace(tok))
		if derr == nil && h["alg"] == "none" {
			t.Fatalf("accepted an unsigned token %q as %q", tok, info.Role)
		}
		if info.Role == "" {
			t.Fatalf("accepted %q with an empty role", tok)
		}
	})
}
