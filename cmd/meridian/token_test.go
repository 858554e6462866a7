package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker/auth"
)

// runToken runs `meridian token args...` and returns its stdout.
func runToken(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newTokenCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), err
}

func mustRunToken(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runToken(t, args...)
	if err != nil {
		t.Fatalf("meridian token %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func TestTokenCLISecretKey(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "secret.key")
	mustRunToken(t, "create-secret-key", "--output", keyFile)
	raw, err := os.ReadFile(keyFile)
	if err != nil || len(raw) != 32 {
		t.Fatalf("secret key file: %d bytes, %v; want 32 raw bytes", len(raw), err)
	}
	if fi, _ := os.Stat(keyFile); fi.Mode().Perm() != 0o600 {
		t.Errorf("secret key file mode %v; want 0600", fi.Mode().Perm())
	}
	if _, err := runToken(t, "create-secret-key", "--output", keyFile); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("overwriting a key: %v; want refused", err)
	}

	tok := strings.TrimSpace(mustRunToken(t, "create", "--secret-key", "file://"+keyFile, "--subject", "alice", "--expiry-time", "30d", "--header", "kid=k1"))
	out := mustRunToken(t, "validate", tok, "--secret-key", keyFile)
	if !strings.HasPrefix(out, `valid: role "alice", expires 20`) {
		t.Errorf("validate printed %q", out)
	}
	// The same key given inline, and the token from a file.
	tokFile := filepath.Join(dir, "tok")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inline := "data:;base64," + base64.StdEncoding.EncodeToString(raw)
	mustRunToken(t, "validate", "--token-file", tokFile, "--secret-key", inline)

	var shown struct {
		Header map[string]any
		Claims map[string]any
	}
	if err := json.Unmarshal([]byte(mustRunToken(t, "show", tok)), &shown); err != nil {
		t.Fatal(err)
	}
	exp, _ := shown.Claims["exp"].(float64)
	if shown.Header["alg"] != "HS256" || shown.Header["kid"] != "k1" ||
		time.Until(time.Unix(int64(exp), 0)) < 29*24*time.Hour || time.Until(time.Unix(int64(exp), 0)) > 31*24*time.Hour {
		t.Errorf("show: %+v; want HS256, kid k1, exp in 30 days", shown)
	}
	if !strings.Contains(mustRunToken(t, "show", "--token-file", tokFile), `"sub": "alice"`) {
		t.Error("show --token-file does not print the subject")
	}

	// --base64 to stdout is the inline form's payload.
	b64 := strings.TrimSpace(mustRunToken(t, "create-secret-key", "--base64"))
	if k, err := base64.StdEncoding.DecodeString(b64); err != nil || len(k) != 32 {
		t.Errorf("--base64 printed %q (%v)", b64, err)
	}
	// A token made with another key does not validate.
	other := "data:;base64," + b64
	if _, err := runToken(t, "validate", tok, "--secret-key", other); err == nil || !strings.Contains(err.Error(), "signature does not verify") {
		t.Errorf("validate with another key: %v", err)
	}
}

func TestTokenCLIKeyPair(t *testing.T) {
	for _, alg := range []string{"RS256", "ES256"} {
		t.Run(alg, func(t *testing.T) {
			dir := t.TempDir()
			priv, pub := filepath.Join(dir, "private.key"), filepath.Join(dir, "public.key")
			mustRunToken(t, "create-key-pair", "--algorithm", alg, "--output-private-key", priv, "--output-public-key", pub)
			tok := strings.TrimSpace(mustRunToken(t, "create", "--private-key", priv, "--subject", "ci-bot"))
			if out := mustRunToken(t, "validate", tok, "--public-key", "file://"+pub); out != "valid: role \"ci-bot\", expires never\n" {
				t.Errorf("validate printed %q", out)
			}
			h, _, err := auth.DecodeUnverified(tok)
			if err != nil || h["alg"] != alg {
				t.Errorf("token header %v (%v); want alg %s", h, err, alg)
			}
			// The private key cannot stand in for the public one.
			if _, err := runToken(t, "validate", tok, "--public-key", priv); err == nil {
				t.Error("validate with the private key as public key succeeded")
			}
		})
	}
}

func TestTokenCLIErrors(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	mustRunToken(t, "create-secret-key", "-o", key)
	tok := strings.TrimSpace(mustRunToken(t, "create", "--secret-key", key, "-s", "a"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "--secret-key", key}, "--subject is required"},
		{[]string{"create", "-s", "a"}, "a key is required"},
		{[]string{"create", "-s", "a", "--secret-key", key, "--private-key", key}, "not both"},
		{[]string{"create", "-s", "a", "--secret-key", filepath.Join(dir, "missing")}, "does not exist"},
		{[]string{"create", "-s", "a", "--secret-key", key, "--expiry-time", "10x"}, "--expiry-time"},
		{[]string{"create", "-s", "a", "--secret-key", key, "--expiry-time", "-1d"}, "positive number"},
		{[]string{"create", "-s", "a", "--secret-key", key, "--expiry-time", "500y"}, "200 years"},
		{[]string{"create", "-s", "a", "--secret-key", key, "--algorithm", "HS512"}, "at least 64 bytes"},
		{[]string{"create", "-s", "a", "--private-key", key}, "private key"},
		{[]string{"create", "-s", "a", "--private-key", key, "-a", "HS256"}, "needs --secret-key"},
		{[]string{"create-key-pair", "--output-private-key", filepath.Join(dir, "p")}, "both required"},
		{[]string{"create-key-pair", "-a", "HS256", "--output-private-key", filepath.Join(dir, "p"), "--output-public-key", filepath.Join(dir, "q")}, "cannot make a key pair"},
		{[]string{"show"}, "no token"},
		{[]string{"show", "abc"}, "3 dot-separated parts"},
		{[]string{"show", tok, "--token-file", key}, "not both"},
		{[]string{"validate", tok}, "a key is required"},
		{[]string{"validate", tok, "--secret-key", key, "--role-claim", "role"}, `claim "role" is missing`},
		{[]string{"validate", "x.y.z", "--secret-key", key}, "malformed"},
	} {
		_, err := runToken(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("meridian token %s: %v; want an error mentioning %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func TestParseRelativeTime(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"60": time.Minute, "90s": 90 * time.Second, "10m": 10 * time.Minute, "2h": 2 * time.Hour,
		"30d": 30 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "1y": 365 * 24 * time.Hour,
	} {
		if got, err := parseRelativeTime(in); err != nil || got != want {
			t.Errorf("parseRelativeTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "d", "0", "-5m", "1.5h", "3mo"} {
		if _, err := parseRelativeTime(bad); err == nil {
			t.Errorf("parseRelativeTime(%q) succeeded", bad)
		}
	}
}
