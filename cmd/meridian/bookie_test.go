package main

import (
	"strings"
	"testing"
)

func TestParseStorage(t *testing.T) {
	for _, tc := range []struct {
		in     string
		noSync bool
		err    string
	}{
		{in: "disk"},
		{in: "memory", noSync: true},
		{in: "tmpfs", err: `--storage "tmpfs": want disk or memory`},
		{in: "", err: `--storage "": want disk or memory`},
	} {
		noSync, err := parseStorage(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseStorage(%q) = %v, want error %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || noSync != tc.noSync {
			t.Errorf("parseStorage(%q) = %v, %v, want %v", tc.in, noSync, err, tc.noSync)
		}
	}
}
