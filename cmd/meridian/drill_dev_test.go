//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// The drill against `meridian dev` (three regions in one process), behind
// the e2e tag: a run takes about a minute on a quiet 2-core machine.
//
//	flock /tmp/meridian-e2e.lock go test -tags e2e -run TestDrillAgainstDev -v ./cmd/meridian/

// startDev starts `meridian dev` on free ports and returns its regions.
func startDev(t *testing.T) []devRegion {
	t.Helper()
	dir := t.TempDir()
	readyFile := filepath.Join(dir, "ready.json")
	dev := startProcess(t, "dev", filepath.Join(dir, "dev.log"), "dev", "--port-base", "0", "--web-port-base", "0",
		"--data-dir", filepath.Join(dir, "data"), "--advertised-address", "127.0.0.1", "--ready-file", readyFile)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dev.waitReady(ctx, t)
	b, err := os.ReadFile(readyFile)
	if err != nil {
		t.Fatal(err)
	}
	var ready devReady
	if err := json.Unmarshal(b, &ready); err != nil || len(ready.Regions) != 3 {
		t.Fatalf("ready file %s: %v", b, err)
	}
	t.Cleanup(func() {
		if err := dev.stop(t, time.Minute); err != nil {
			t.Errorf("dev: %v", err)
		}
	})
	return ready.Regions
}

// getJSON GETs url into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// drillTopics lists the topics of public/default whose name starts with
// drill- in every region.
func drillTopics(t *testing.T, regions []devRegion) []string {
	t.Helper()
	var out []string
	for _, r := range regions {
		var topics []string
		getJSON(t, r.WebServiceURL+"/admin/v2/namespaces/public/default/topics", &topics)
		for _, n := range topics {
			if strings.Contains(n, "/drill-") {
				out = append(out, r.Name+": "+n)
			}
		}
	}
	return out
}

func fences(t *testing.T, web string) []json.RawMessage {
	t.Helper()
	var list []json.RawMessage
	getJSON(t, web+"/admin/v2/namespaces/public/default/fences", &list)
	return list
}

// awaitOutage waits until the drill logging to log is in its outage, its
// fence in place.
func awaitOutage(t *testing.T, log, web string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(log)
		if strings.Contains(string(b), ": outage") && len(fences(t, web)) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no outage with a fence within 2 minutes:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// bystander produces to and consumes from a topic of public/default
// through us-east's broker alone, for as long as it runs, and records the
// longest gap between receipts and between deliveries, and the send
// errors.
type bystander struct {
	mu                       sync.Mutex
	lastReceipt, lastDeliver time.Time
	receiptGap, deliverGap   time.Duration
	receipts, deliveries     int
	errors                   []string
}

func (b *bystander) run(ctx context.Context, t *testing.T, serviceURL, topic string) (stop func()) {
	t.Helper()
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: serviceURL})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "bystander"})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			msg, err := cons.Receive(ctx)
			if err != nil {
				return
			}
			_ = cons.Ack(msg)
			b.mu.Lock()
			now := time.Now()
			if !b.lastDeliver.IsZero() {
				b.deliverGap = max(b.deliverGap, now.Sub(b.lastDeliver))
			}
			b.lastDeliver = now
			b.deliveries++
			b.mu.Unlock()
		}
	})
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			_, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("still here")})
			b.mu.Lock()
			now := time.Now()
			switch {
			case err != nil && ctx.Err() == nil:
				b.errors = append(b.errors, err.Error())
			case err == nil:
				if !b.lastReceipt.IsZero() {
					b.receiptGap = max(b.receiptGap, now.Sub(b.lastReceipt))
				}
				b.lastReceipt = now
				b.receipts++
			}
			b.mu.Unlock()
		}
	})
	return func() {
		cancel()
		wg.Wait()
		prod.Close()
		cons.Close()
		client.Close()
	}
}

// TestDrillAgainstDev runs the README's drill against `meridian dev`
// (shortened: 3s before, 6s of outage, 3s after) and checks that it exits
// 0, leaves no topic, subscription or fence behind, and that another topic
// of public/default served in us-east without a gap throughout. A second
// drill, sent SIGTERM during its outage, restores and fails back before it
// exits (non-zero), leaving nothing behind. A third is killed with SIGKILL
// during its outage: its fence lapses by itself within its TTL.
func TestDrillAgainstDev(t *testing.T) {
	regions := startDev(t)
	east := regions[0]
	if east.Name != "us-east" {
		t.Fatalf("first region %s, want us-east", east.Name)
	}
	dir := t.TempDir()

	t.Run("completes", func(t *testing.T) {
		var by bystander
		stopBystander := by.run(t.Context(), t, east.ServiceURL, fmt.Sprintf("persistent://public/default/bystander-%d", time.Now().UnixNano()))
		report := filepath.Join(dir, "report")
		drill := startProcess(t, "drill", filepath.Join(dir, "drill.log"), "drill", "--admin-url", east.WebServiceURL,
			"--namespace", "public/default", "--lose", "us-east", "--before", "3s", "--outage", "6s", "--after", "3s", "--report", report)
		select {
		case <-drill.exited:
		case <-time.After(3 * time.Minute):
			t.Fatal("the drill did not end within 3 minutes")
		}
		stopBystander()
		if drill.exitErr != nil {
			t.Fatalf("drill: %v", drill.exitErr)
		}
		var r struct {
			Verdict struct{ Pass bool }
			Figures struct{ Sends, LostForGood int }
		}
		b, err := os.ReadFile(filepath.Join(report, "report.json"))
		if err != nil || json.Unmarshal(b, &r) != nil || !r.Verdict.Pass || r.Figures.Sends == 0 || r.Figures.LostForGood != 0 {
			t.Fatalf("report.json: %v %s", err, b)
		}
		page, err := os.ReadFile(filepath.Join(report, "report.html"))
		if err != nil || !strings.Contains(string(page), "<svg") || !strings.Contains(string(page), `<table id="figures">`) {
			t.Fatalf("report.html: %v", err)
		}
		if left := drillTopics(t, regions); len(left) > 0 {
			t.Errorf("topics left behind (their subscriptions with them): %v", left)
		}
		for _, r := range regions {
			if left := fences(t, r.WebServiceURL); len(left) > 0 {
				t.Errorf("fences left behind, seen from %s: %s", r.Name, left)
			}
		}
		by.mu.Lock()
		defer by.mu.Unlock()
		t.Logf("bystander in us-east: %d receipts (longest gap %v), %d deliveries (longest gap %v), %d send errors",
			by.receipts, by.receiptGap, by.deliveries, by.deliverGap, len(by.errors))
		if len(by.errors) > 0 || by.receipts == 0 || by.receiptGap > 2*time.Second || by.deliverGap > 2*time.Second {
			t.Errorf("the bystander topic did not keep serving in us-east: errors %v, gaps %v and %v", by.errors, by.receiptGap, by.deliverGap)
		}
	})

	t.Run("interrupted", func(t *testing.T) {
		log := filepath.Join(dir, "interrupted.log")
		drill := startProcess(t, "drill", log, "drill", "--admin-url", east.WebServiceURL, "--namespace", "public/default",
			"--lose", "us-east", "--before", "2s", "--outage", "60s", "--report", filepath.Join(dir, "interrupted"))
		awaitOutage(t, log, east.WebServiceURL)
		if err := drill.stop(t, 2*time.Minute); err == nil {
			t.Fatal("an interrupted drill exited 0")
		}
		b, _ := os.ReadFile(log)
		if !strings.Contains(string(b), "interrupted: restoring us-east and failing back") || !strings.Contains(string(b), ": fail back") {
			t.Fatalf("the drill did not restore and fail back:\n%s", b)
		}
		if left := drillTopics(t, regions); len(left) > 0 {
			t.Errorf("topics left behind: %v", left)
		}
		if left := fences(t, east.WebServiceURL); len(left) > 0 {
			t.Errorf("fences left behind: %s", left)
		}
	})

	t.Run("killed", func(t *testing.T) {
		const ttl = 3 * time.Second
		log := filepath.Join(dir, "killed.log")
		drill := startProcess(t, "drill", log, "drill", "--admin-url", east.WebServiceURL, "--namespace", "public/default",
			"--lose", "us-east", "--before", "2s", "--outage", "60s", "--fence-ttl", ttl.String(), "--report", filepath.Join(dir, "killed"))
		awaitOutage(t, log, east.WebServiceURL)
		drill.kill(t)
		killed := time.Now()
		for len(fences(t, east.WebServiceURL)) > 0 {
			// The last renewal was at most ttl/3 before the kill; etcd
			// counts whole seconds and checks expiries every 500ms.
			if time.Since(killed) > ttl+2*time.Second {
				t.Fatalf("the fence outlived its killed drill by %v (TTL %v)", time.Since(killed), ttl)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("the fence lapsed %v after the drill was killed (TTL %v)", time.Since(killed).Round(10*time.Millisecond), ttl)
		// A killed drill leaves its topics, switched to another region;
		// remove them as an operator would.
		for _, n := range drillTopics(t, regions) {
			region, topic, _ := strings.Cut(n, ": ")
			for _, r := range regions {
				if r.Name != region {
					continue
				}
				path := "/admin/v2/persistent/" + strings.TrimPrefix(topic, "persistent://")
				for _, req := range []string{http.MethodDelete + " " + east.WebServiceURL + path + "/activeRegion", http.MethodDelete + " " + r.WebServiceURL + path + "?force=true"} {
					method, url, _ := strings.Cut(req, " ")
					hr, _ := http.NewRequest(method, url, nil)
					if resp, err := http.DefaultClient.Do(hr); err == nil {
						resp.Body.Close()
					}
				}
			}
		}
	})
}
