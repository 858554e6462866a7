package chart

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// repoRoot is the repository, whose cmd/meridian the test builds.
const repoRoot = "../.."

var (
	buildOnce   sync.Once
	builtBinary string
	buildErr    error
	binaryDir   string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "meridian-chart-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binaryDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// meridianBinary is the repository's meridian, built once as the image
// builds it (static, no cgo).
func meridianBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		builtBinary = filepath.Join(binaryDir, "meridian")
		cmd := exec.Command("go", "build", "-o", builtBinary, "./cmd/meridian")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/meridian: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBinary
}

// cobraTree answers what the binary's command tree holds, through cobra's
// own completion command (`meridian __complete ARGS`), which lists a
// command's subcommands or, after "--", its flags (inherited ones
// included), one per line, then a ":directive" line.
type cobraTree struct {
	bin   string
	mu    sync.Mutex
	cache map[string][]string
}

func newCobraTree(t *testing.T) *cobraTree {
	return &cobraTree{bin: meridianBinary(t), cache: map[string][]string{}}
}

func (c *cobraTree) complete(t *testing.T, args ...string) []string {
	t.Helper()
	key := strings.Join(args, "\x00")
	c.mu.Lock()
	defer c.mu.Unlock()
	if out, ok := c.cache[key]; ok {
		return out
	}
	cmd := exec.Command(c.bin, append([]string{"__complete"}, args...)...)
	cmd.Env = []string{} // no MERIDIAN_FLAG_ variable of ours changes the answer
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("meridian __complete %q: %v", args, err)
	}
	var names []string
	for _, line := range strings.Split(string(stdout), "\n") {
		if line == "" || strings.HasPrefix(line, ":") {
			continue
		}
		name, _, _ := strings.Cut(line, "\t")
		names = append(names, name)
	}
	c.cache[key] = names
	return names
}

// command splits a container's args into the meridian command they name
// (["bookie"], ["admin", "clusters", "get"]) and the rest, and fails when
// the first argument names no command.
func (c *cobraTree) command(t *testing.T, args []string) (path, rest []string) {
	t.Helper()
	for i, a := range args {
		if strings.HasPrefix(a, "-") || !slices.Contains(c.complete(t, append(slices.Clone(path), "")...), a) {
			rest = args[i:]
			break
		}
		path = append(path, a)
	}
	if len(path) == 0 {
		t.Fatalf("args %q name no meridian command", args)
	}
	return path, rest
}

// flags are the flag names (without dashes) that the command at path takes.
func (c *cobraTree) flags(t *testing.T, path []string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, f := range c.complete(t, append(slices.Clone(path), "--")...) {
		out[strings.TrimPrefix(f, "--")] = true
	}
	if len(out) == 0 {
		t.Fatalf("meridian %s: no flags listed", strings.Join(path, " "))
	}
	return out
}

// flagOfVariable is the flag a MERIDIAN_FLAG_ variable sets (README,
// Configuration: --some-flag is MERIDIAN_FLAG_SOME_FLAG), or "".
func flagOfVariable(name string) string {
	rest, ok := strings.CutPrefix(name, "MERIDIAN_FLAG_")
	if !ok {
		return ""
	}
	return strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
}

var variableReference = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// TestChartCommandsFlagsAndImage checks every container of every rendering
// against the binary: its args name a meridian command, every flag in its
// args and every MERIDIAN_FLAG_ variable it gets (its own and its
// ConfigMap's) is a flag of that command, every PULSAR_PREFIX_ variable a
// Pulsar setting it takes (run with them, it names none as ignored or
// unparsable), and any other variable exists only to be referenced by one
// of those ($(POD_NAME)). With the default
// values, the image is the one deploy/build-image.sh tags, and every
// container port is one deploy/Containerfile exposes.
func TestChartCommandsFlagsAndImage(t *testing.T) {
	tree := newCobraTree(t)
	defaultTag, exposed := imageFacts(t)
	for _, r := range renderings(t) {
		t.Run(r.name, func(t *testing.T) {
			if r.name == "default" && r.image != defaultTag {
				t.Errorf("the default image %q is not the tag deploy/build-image.sh builds, %q", r.image, defaultTag)
			}
			for _, w := range r.workloads() {
				for _, c := range slices.Concat(w.pod.Spec.InitContainers, w.pod.Spec.Containers) {
					where := w.name + "/" + c.Name
					path, rest := tree.command(t, c.Args)
					flags := tree.flags(t, path)
					for _, a := range rest {
						if name, ok := strings.CutPrefix(a, "--"); ok {
							name, _, _ = strings.Cut(name, "=")
							if !flags[name] {
								t.Errorf("%s: meridian %s has no flag --%s", where, strings.Join(path, " "), name)
							}
						}
					}
					env := containerEnv(t, r, c)
					for name := range env {
						switch flag := flagOfVariable(name); {
						case flag != "":
							if !flags[flag] {
								t.Errorf("%s: %s names no flag of meridian %s (--%s)", where, name, strings.Join(path, " "), flag)
							}
						case strings.HasPrefix(name, "PULSAR_PREFIX_"):
							if !slices.Contains(pulsarSettingsCommands, strings.Join(path, " ")) {
								t.Errorf("%s: %s is a Pulsar setting, which meridian %s does not read", where, name, strings.Join(path, " "))
							}
						case !referenced(c, name):
							t.Errorf("%s: variable %s is no MERIDIAN_FLAG_ or PULSAR_PREFIX_ setting and nothing references it", where, name)
						}
					}
					if err := pulsarSettingsAccepted(t, tree.bin, path, env); err != nil {
						t.Errorf("%s: %v", where, err)
					}
					if r.name != "default" {
						continue
					}
					for _, p := range c.Ports {
						if !exposed[p.ContainerPort] {
							t.Errorf("%s: port %s (%d) is not among the image's EXPOSE %v", where, p.Name, p.ContainerPort, exposed)
						}
					}
				}
			}
		})
	}
}

// pulsarSettingsCommands are the commands that take Pulsar's settings
// from the environment (README, Configuration).
var pulsarSettingsCommands = []string{"broker", "standalone"}

// runWithEnv runs `meridian args...` with exactly the environment env and
// returns what it printed, stdout and stderr together.
func runWithEnv(bin string, args, env []string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// referenced reports whether another variable of c names $(name).
func referenced(c corev1.Container, name string) bool {
	for _, e := range c.Env {
		for _, m := range variableReference.FindAllStringSubmatch(e.Value, -1) {
			if m[1] == name && e.Name != name {
				return true
			}
		}
	}
	return false
}

// containerEnv is c's environment as the kubelet gives it, by name: its
// ConfigMaps' keys, then its own variables (which win), unresolved.
func containerEnv(t *testing.T, r rendering, c corev1.Container) map[string]corev1.EnvVar {
	t.Helper()
	out := map[string]corev1.EnvVar{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			continue
		}
		cm := r.configMap(from.ConfigMapRef.Name)
		if cm == nil {
			t.Fatalf("%s: ConfigMap %s is not rendered", c.Name, from.ConfigMapRef.Name)
		}
		for k, v := range cm.Data {
			out[k] = corev1.EnvVar{Name: k, Value: v}
		}
	}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

// imageFacts reads deploy/build-image.sh's default tag and
// deploy/Containerfile's exposed ports.
func imageFacts(t *testing.T) (tag string, exposed map[int32]bool) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "build-image.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^tag=\$\{1:-([^}]+)\}`).FindSubmatch(script)
	if m == nil {
		t.Fatal("deploy/build-image.sh: no default tag (tag=${1:-...})")
	}
	containerfile, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	exposed = map[int32]bool{}
	sc := bufio.NewScanner(bytes.NewReader(containerfile))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "EXPOSE" {
			continue
		}
		for _, f := range fields[1:] {
			var port int32
			if _, err := fmt.Sscanf(strings.TrimSuffix(f, "/tcp"), "%d", &port); err != nil {
				t.Fatalf("deploy/Containerfile: EXPOSE %q: %v", f, err)
			}
			exposed[port] = true
		}
	}
	if len(exposed) == 0 {
		t.Fatal("deploy/Containerfile exposes no port")
	}
	return string(m[1]), exposed
}
