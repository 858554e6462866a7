package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// TestEtcdReadyLineNamesMetricsURLs: `meridian etcd` with
// --listen-metrics-urls names them in its ready line, and they serve
// /metrics.
func TestEtcdReadyLineNamesMetricsURLs(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 3)
	p := startProcess(t, "etcd", filepath.Join(dir, "etcd.log"), "etcd", "--name", "m1",
		"--data-dir", filepath.Join(dir, "m1"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		"--listen-metrics-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[2]))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	line := p.waitReady(ctx, t)
	m := regexp.MustCompile(`, metrics \[(http://127\.0\.0\.1:[0-9]+)\]$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("ready line %q names no metrics URL", line)
	}
	if want := fmt.Sprintf("http://127.0.0.1:%d", ports[2]); m[1] != want {
		t.Fatalf("ready line names metrics URL %s, want %s", m[1], want)
	}
	resp, err := http.Get(m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: %s", m[1], resp.Status)
	}
}
