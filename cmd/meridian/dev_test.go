package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/global"
)

// TestDevTwoRegions runs `meridian dev` with two regions on free ports:
// the ready file names both, each region serves producers and consumers
// on its own, public/default lists both as replication clusters, and
// SIGTERM stops everything with exit status 0.
func TestDevTwoRegions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts meridian dev")
	}
	ctx := t.Context()
	dir := t.TempDir()
	readyFile := filepath.Join(dir, "ready.json")
	p := startProcess(t, "dev", filepath.Join(dir, "dev.log"), "dev", "--regions", "us-east,eu-west",
		"--data-dir", filepath.Join(dir, "data"), "--port-base", "0", "--web-port-base", "0",
		"--advertised-address", "127.0.0.1", "--ready-file", readyFile)
	line := p.waitReady(ctx, t)
	etcd := line[strings.LastIndex(line, "etcd=")+len("etcd="):]

	b, err := os.ReadFile(readyFile)
	if err != nil {
		t.Fatalf("ready file: %v", err)
	}
	var ready struct {
		Regions []struct {
			Name, ServiceURL, WebServiceURL string
		}
	}
	if err := json.Unmarshal(b, &ready); err != nil {
		t.Fatalf("ready file %s: %v", b, err)
	}
	if len(ready.Regions) != 2 || ready.Regions[0].Name != "us-east" || ready.Regions[1].Name != "eu-west" {
		t.Fatalf("ready file: %s", b)
	}
	var raw map[string][]map[string]string
	if err := json.Unmarshal(b, &raw); err != nil || len(raw["regions"][0]) != 3 {
		t.Fatalf("ready file keys: %s (%v)", b, err)
	}
	for _, r := range ready.Regions {
		if !strings.HasPrefix(r.ServiceURL, "pulsar://127.0.0.1:") || !strings.HasPrefix(r.WebServiceURL, "http://127.0.0.1:") ||
			!strings.Contains(line, r.Name+"="+r.ServiceURL+","+r.WebServiceURL) {
			t.Fatalf("region %+v (ready line %q)", r, line)
		}
	}

	store := metatest.Dial(t, strings.Split(etcd, ","))
	defer store.Close()
	gs, err := global.NewStore(store, global.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ns, err := gs.Namespace(ctx, "public", "default")
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(ns.ReplicationClusters)); !slices.Equal(got, []string{"eu-west", "us-east"}) {
		t.Errorf("public/default replicates to %v, want both regions", got)
	}
	for _, r := range ready.Regions {
		cd, err := gs.Cluster(ctx, r.Name)
		if err != nil || cd.BrokerServiceURL != r.ServiceURL || cd.ServiceURL != r.WebServiceURL {
			t.Errorf("cluster record of %s: %+v, %v", r.Name, cd, err)
		}
		t.Run(r.Name, func(t *testing.T) {
			c := clientWith(t, pulsar.ClientOptions{URL: r.ServiceURL})
			if err := produceConsume(ctx, c, "persistent://public/default/dev-"+r.Name, 20); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := p.stop(t, 30*time.Second); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if _, err := os.Stat(readyFile); !os.IsNotExist(err) {
		t.Errorf("ready file after a clean stop: %v, want it removed", err)
	}
}
