package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The meridian standalone the server pass runs against: its conf, made
// from the client module's, and the set-up steps of the module's
// pulsar-test-service-start.sh, done with `meridian admin`.

func (r *runner) startMeridian(ctx context.Context, bin string) error {
	conf, err := r.writeConf()
	if err != nil {
		return err
	}
	args := []string{"standalone", "--data-dir", filepath.Join(r.tmp, "data"), "--config", conf}
	// As the client's Dockerfile does: basic authentication's htpasswd file.
	env := append(os.Environ(), "PULSAR_EXTRA_OPTS=-Dpulsar.auth.basic.conf="+
		filepath.Join(r.copyDir, "integration-tests", "conf", ".htpasswd"))
	p, err := r.startProcess(bin, "meridian", env, args...)
	if err != nil {
		return err
	}
	r.meridian = p
	if err := r.waitReady(ctx, p.exited); err != nil {
		r.stopMeridian()
		logText, _ := os.ReadFile(p.logPath)
		return fmt.Errorf("meridian standalone: %w; its log:\n%s", err, tail(string(logText), 40))
	}
	return nil
}

func (r *runner) waitReady(ctx context.Context, exited <-chan struct{}) error {
	deadline := time.Now().Add(r.opts.readyTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get("http://" + webAddr + "/metrics")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("exited before serving /metrics")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not serving http://%s/metrics after %v", webAddr, r.opts.readyTimeout)
		}
	}
}

// stopMeridian stops the standalone server (see process.stop). It may be
// called more than once.
func (r *runner) stopMeridian() {
	if r.meridian == nil {
		return
	}
	r.meridian.stop()
	r.meridian = nil
}

// writeConf writes the module's standalone.conf with its container paths
// pointed at the copy's certificates and tokens.
func (r *runner) writeConf() (string, error) {
	b, err := os.ReadFile(filepath.Join(r.copyDir, "integration-tests", "conf", "standalone.conf"))
	if err != nil {
		return "", err
	}
	it := filepath.Join(r.copyDir, "integration-tests")
	s := strings.NewReplacer("/pulsar/certs/", filepath.Join(it, "certs")+"/",
		"/pulsar/tokens/", filepath.Join(it, "tokens")+"/").Replace(string(b))
	path := filepath.Join(r.tmp, "standalone.conf")
	return path, os.WriteFile(path, []byte(s), 0o644)
}

// setupSteps are scripts/pulsar-test-service-start.sh's, as meridian admin
// commands.
var setupSteps = [][]string{
	{"tenants", "update", "public", "-r", "anonymous"},
	{"namespaces", "grant-permission", "public/default", "--actions", "produce,consume", "--role", "anonymous"},
	{"tenants", "create", "private"},
	{"namespaces", "create", "private/auth"},
	{"namespaces", "grant-permission", "private/auth", "--actions", "produce,consume", "--role", "token-principal"},
}

func (r *runner) setUp(ctx context.Context, bin string) {
	r.printf("compat: set-up steps of scripts/pulsar-test-service-start.sh\n")
	// The module's admin token: the service enforces authentication on
	// admin calls when its config says so; it is the superuser "admin".
	tok, _ := os.ReadFile(filepath.Join(r.copyDir, "integration-tests", "tokens", "admin-token"))
	r.adminSteps(ctx, bin, "http://"+webAddr, strings.TrimSpace(string(tok)), setupSteps)
}

// adminSteps runs each step as `meridian admin` against adminURL (with
// token, unless it is ""), printing how each went; a failed step is
// printed, and the tests that needed it will fail and say so.
func (r *runner) adminSteps(ctx context.Context, bin, adminURL, token string, steps [][]string) {
	for _, step := range steps {
		args := []string{"admin", "--admin-url", adminURL}
		if token != "" {
			args = append(args, "--token", token)
		}
		args = append(args, step...)
		out, err := command(ctx, r.tmp, nil, bin, args...).CombinedOutput()
		status := "ok"
		if err != nil {
			status = "FAILED: " + strings.TrimSpace(string(out))
		}
		r.printf("  meridian admin %s: %s\n", strings.Join(step, " "), status)
	}
}
