package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestAutoRecoveryFlagErrors: a broker's auto-recovery flags out of bounds
// are refused before anything starts, naming the flag or the setting.
func TestAutoRecoveryFlagErrors(t *testing.T) {
	base := []string{"broker", "--region", "r", "--etcd", "http://127.0.0.1:1", "--advertised-address", "h"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--autorecovery-rate", "0"}, "--autorecovery-rate 0: the re-replication rate must be a positive number"},
		{[]string{"--autorecovery-rate", "-5"}, "--autorecovery-rate -5"},
		{[]string{"--lost-bookie-recovery-delay", "48h"}, "LostBookieRecoveryDelay 48h0m0s out of range 0..24h"},
		{[]string{"--autorecovery-check-sample", "0"}, "CheckSampleRate 0 out of range (0, 1]"},
		{[]string{"--autorecovery-workers", "100"}, "Workers 100 out of range 0..64"},
	} {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		args := append(append([]string{}, base...), tc.args...)
		cmd.SetArgs(args)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("meridian %s: %v, want an error containing %q", strings.Join(args, " "), err, tc.want)
		}
	}
}
