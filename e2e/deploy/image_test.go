//go:build e2e

package deploy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/meridian-mq/meridian/testkit"
)

// podman runs podman with deploy/podman/containers.conf, as the
// project's scripts do, and returns its trimmed standard output.
func podman(t *testing.T, args ...string) string {
	t.Helper()
	out, err := podmanCommand(args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

func podmanCommand(args ...string) *exec.Cmd {
	return podmanCommandContext(context.Background(), args...)
}

func podmanCommandContext(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "podman", args...)
	conf, _ := filepath.Abs(filepath.Join(deployDir, "podman", "containers.conf"))
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	return cmd
}

// buildImage builds the image with deploy/build-image.sh as
// localhost/meridian-test:SUFFIX, removed again when the test ends.
func buildImage(t *testing.T, suffix string) string {
	t.Helper()
	tag := "localhost/meridian-test:" + suffix
	build := exec.Command("bash", filepath.Join(deployDir, "build-image.sh"), tag)
	build.Stderr = io.Discard
	out, err := build.Output()
	if err != nil {
		t.Fatalf("deploy/build-image.sh: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != tag {
		t.Fatalf("build-image.sh printed %q, want the tag %q", got, tag)
	}
	t.Cleanup(func() { _ = podmanCommand("rmi", "-f", tag).Run() })
	return tag
}

// TestImageDropIn builds the image with deploy/build-image.sh (which
// installs podman from Debian's packages where it is missing) and uses it
// as a Pulsar user's test would use apachepulsar/pulsar: `bin/pulsar
// standalone -nfw` on a network the test creates, ports published on
// loopback only, ready within 3 s, a message produced and consumed through
// the published port (not the advertised one), and a clean exit on stop.
// Run it with
//
//	cd e2e/deploy && flock /tmp/meridian-e2e.lock go test -tags e2e -run TestImageDropIn ./...
func TestImageDropIn(t *testing.T) {
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	tag := buildImage(t, suffix)

	if got := podman(t, "image", "inspect", tag, "--format", "{{.Config.User}} {{.Config.WorkingDir}}"); got != "10000:10000 /pulsar" {
		t.Errorf("image user and working directory %q, want 10000:10000 /pulsar", got)
	}
	rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	if v := podman(t, "run", "--rm", "--network", "none", tag, "version"); !strings.Contains(v, "revision "+string(rev[:12])) {
		t.Errorf("meridian version in the image: %q, want revision %s", v, rev[:12])
	}

	network := "meridian-test-" + suffix
	podman(t, "network", "create", network)
	t.Cleanup(func() { _ = podmanCommand("network", "rm", "-f", network).Run() })
	name := "meridian-test-" + suffix
	started := time.Now()
	podman(t, "run", "-d", "--name", name, "--network", network,
		"-p", "127.0.0.1::6650", "-p", "127.0.0.1::8080", tag, "bin/pulsar", "standalone", "-nfw")
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := podmanCommand("logs", name).CombinedOutput()
			t.Logf("--- container log ---\n%s", logs)
		}
		_ = podmanCommand("rm", "-f", "-t", "0", name).Run()
	})
	hostPort := func(port string) string {
		a := podman(t, "port", name, port)
		return strings.Fields(a)[0]
	}
	web, broker := hostPort("8080/tcp"), hostPort("6650/tcp")
	testkit.WaitFor(t, "/status.html to answer OK", func() bool {
		resp, err := http.Get("http://" + web + "/status.html")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	ready := time.Since(started)
	t.Logf("ready %v after podman run began", ready.Round(time.Millisecond))
	if ready > 3*time.Second {
		t.Errorf("ready after %v, want within 3s", ready)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + broker, OperationTimeout: 10 * time.Second,
		Logger: plog.NewLoggerWithSlog(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const topic = "persistent://public/default/image"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatalf("subscribe through %s: %v", broker, err)
	}
	defer cons.Close()
	prod, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatalf("producer through %s: %v", broker, err)
	}
	defer prod.Close()
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("through the port mapping")}); err != nil {
		t.Fatal(err)
	}
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload()) != "through the port mapping" {
		t.Fatalf("received %q", m.Payload())
	}

	podman(t, "stop", "-t", "30", name)
	if code := podman(t, "inspect", name, "--format", "{{.State.ExitCode}}"); code != "0" {
		t.Errorf("exit code after podman stop: %s, want 0", code)
	}
}
