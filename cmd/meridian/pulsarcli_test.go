package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCommandLine: the image's command lines. Pulsar's `bin/pulsar
// standalone -nfw` (as testcontainers starts apachepulsar/pulsar) is a
// standalone on Pulsar's ports; a Meridian command runs as given, after
// the binary's name or not; Pulsar's other commands and flags are refused
// with what to do instead.
func TestCommandLine(t *testing.T) {
	t.Chdir(t.TempDir())
	standalone := append([]string{"standalone"}, pulsarStandaloneDefaults...)
	for _, c := range []struct {
		argv0 string
		args  []string
		want  []string
		err   string
	}{
		{"/usr/local/bin/meridian", []string{"bin/pulsar", "standalone", "-nfw"}, standalone, ""},
		{"/usr/local/bin/meridian", []string{"/pulsar/bin/pulsar", "standalone", "--no-functions-worker", "-nss", "--zookeeper-port", "2181"}, standalone, ""},
		{"/pulsar/bin/pulsar", []string{"standalone", "-a", "pulsar.example.com", "--config=my.conf"},
			append(slices.Clone(standalone), "--advertised-address", "pulsar.example.com", "--config", "my.conf"), ""},
		{"meridian", []string{"broker", "--region", "r"}, []string{"broker", "--region", "r"}, ""},
		{"/usr/local/bin/meridian", []string{"meridian", "version"}, []string{"version"}, ""},
		{"meridian", nil, nil, ""},
		{"meridian", []string{"bin/pulsar", "broker"}, nil, "runs only `bin/pulsar standalone`"},
		{"pulsar", []string{"standalone", "--stream-storage-port"}, nil, "--stream-storage-port needs a value"},
		{"pulsar", []string{"standalone", "--metadata-url", "zk:z:2181"}, nil, `does not take Pulsar's flag "--metadata-url"`},
	} {
		got, err := commandLine(c.argv0, c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %v: %v, want an error containing %q", c.argv0, c.args, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s %v = %v, %v; want %v", c.argv0, c.args, got, err, c.want)
		}
	}

	// A standalone.conf where Pulsar's standalone reads it is --config.
	if err := os.MkdirAll("conf", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("conf", "standalone.conf"), []byte("clusterName=standalone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := commandLine("meridian", []string{"bin/pulsar", "standalone", "-nfw"})
	if want := append(slices.Clone(standalone), "--config", filepath.Join("conf", "standalone.conf")); err != nil || !slices.Equal(got, want) {
		t.Errorf("with conf/standalone.conf: %v, %v; want %v", got, err, want)
	}
}
