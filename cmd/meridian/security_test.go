package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/meridian-mq/meridian/cluster/node"
)

// TestRequireBookieToken: standalone's and dev's --bookie-auth-token-file
// turns token authentication on for every bookie of the process and hands
// the token to every region's ledger client; an empty file is refused
// rather than turning authentication off without a word.
func TestRequireBookieToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := node.Dev(dir, []string{"a", "b"}, 0, 0)
	if err := requireBookieToken(&cfg, ""); err != nil || cfg.Regions[0].Bookies[0].AuthToken != "" {
		t.Fatalf("no file: %v, token %q", err, cfg.Regions[0].Bookies[0].AuthToken)
	}
	if err := requireBookieToken(&cfg, file); err != nil {
		t.Fatal(err)
	}
	for _, r := range cfg.Regions {
		if r.Bookies[0].AuthToken != "s3cret" || r.BookieClient.TokenFile != file {
			t.Fatalf("region %s: bookie token %q, client token file %q", r.Name, r.Bookies[0].AuthToken, r.BookieClient.TokenFile)
		}
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := requireBookieToken(&cfg, empty); err == nil {
		t.Fatal("an empty token file was taken")
	}
}
