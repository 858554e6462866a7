package deploy

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// composeDir holds the compose plane: compose.yaml and what its monitoring
// profile mounts.
var composeDir = filepath.Join(deployDir, "compose")

// composeService is what the tests read of a compose service.
type composeService struct {
	Image       string
	Profiles    []string
	Command     []string
	Networks    []string
	Ports       []string
	Volumes     []string
	Restart     string
	Healthcheck struct {
		Test []string
	}
	DependsOn map[string]struct {
		Condition string
	} `yaml:"depends_on"`
}

type composeFile struct {
	Services map[string]composeService
	Networks map[string]any
	Volumes  map[string]any
}

func loadCompose(t *testing.T) composeFile {
	var f composeFile
	decodeYAML(t, "compose.yaml", &f, false)
	return f
}

// decodeYAML decodes the file at path (relative to deploy/compose) into
// v; strict: a field v does not name fails.
func decodeYAML(t *testing.T, path string, v any, strict bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(composeDir, path))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(strict)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// planeServices are the services `up` starts without a profile: Meridian's
// own, which the compose test runs (the monitoring profile's images cannot
// be pulled where it runs).
func (f composeFile) planeServices() []string {
	var out []string
	for name, s := range f.Services {
		if len(s.Profiles) == 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// TestComposeFile checks deploy/compose against the rules the plane keeps,
// without starting it (TestComposePlane, behind -tags e2e, does): every
// service of the plane runs Meridian's image, restarts on failure and is
// either a server with a `meridian probe` health check or an init step
// (`meridian admin`); every port is published on 127.0.0.1 only; networks
// and volumes are declared and used; the monitoring services are behind
// the profile, their mounts exist, and Prometheus's configuration reads
// deploy/prometheus's rules and scrapes every server of the plane, each
// on a network Prometheus shares.
func TestComposeFile(t *testing.T) {
	f := loadCompose(t)
	if len(f.planeServices()) != 3*8+2 {
		t.Errorf("%d services without a profile, want 3 regions of 8 (etcd, global member, 3 bookies, 2 brokers, replicator) and 2 init steps", len(f.planeServices()))
	}
	usedNets := map[string]bool{}
	usedVols := map[string]bool{}
	for name, s := range f.Services {
		for _, n := range s.Networks {
			usedNets[n] = true
			if _, ok := f.Networks[n]; !ok {
				t.Errorf("%s: network %s is not declared", name, n)
			}
		}
		if len(s.Networks) == 0 {
			t.Errorf("%s: no network: it would be put on a default network the file does not declare", name)
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s: port %q is not published on 127.0.0.1 only", name, p)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join(composeDir, src)); err != nil {
					t.Errorf("%s: mounts %s: %v", name, src, err)
				}
				continue
			}
			usedVols[src] = true
			if _, ok := f.Volumes[src]; !ok {
				t.Errorf("%s: volume %s is not declared", name, src)
			}
		}
		for dep := range s.DependsOn {
			if _, ok := f.Services[dep]; !ok {
				t.Errorf("%s: depends on %s, which is no service", name, dep)
			}
		}
		if len(s.Profiles) > 0 {
			if !slices.Equal(s.Profiles, []string{"monitoring"}) {
				t.Errorf("%s: profiles %v, want [monitoring]", name, s.Profiles)
			}
			continue
		}
		if s.Image != "${MERIDIAN_IMAGE:-localhost/meridian:latest}" {
			t.Errorf("%s: image %q, want Meridian's", name, s.Image)
		}
		if s.Restart != "on-failure" {
			t.Errorf("%s: restart %q, want on-failure", name, s.Restart)
		}
		switch {
		case len(s.Command) > 0 && s.Command[0] == "admin":
			if len(s.Healthcheck.Test) > 0 {
				t.Errorf("%s: a one-shot init step with a health check", name)
			}
		case len(s.Healthcheck.Test) != 4 || !slices.Equal(s.Healthcheck.Test[:3], []string{"CMD", "meridian", "probe"}):
			t.Errorf("%s: health check %q, want [CMD meridian probe URL] (the image has no shell)", name, s.Healthcheck.Test)
		}
	}
	for n := range f.Networks {
		if !usedNets[n] {
			t.Errorf("network %s is declared and not used", n)
		}
	}
	for v := range f.Volumes {
		if !usedVols[v] {
			t.Errorf("volume %s is declared and not used", v)
		}
	}

	prom, ok := f.Services["prometheus"]
	if !ok {
		t.Fatal("no prometheus service")
	}
	cfg := loadPrometheusConfig(t)
	if !slices.Equal(prom.Volumes, []string{"../prometheus:/etc/prometheus:ro"}) ||
		!slices.Equal(prom.Command, []string{"--config.file=/etc/prometheus/prometheus-compose.yml"}) ||
		!slices.Equal(cfg.RuleFiles, []string{"alerts.yml"}) {
		t.Errorf("Prometheus: command %v, mounts %v, rule files %v; want deploy/prometheus mounted as /etc/prometheus, its prometheus-compose.yml and alerts.yml", prom.Command, prom.Volumes, cfg.RuleFiles)
	}
	scraped := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, g := range sc.StaticConfigs {
			for _, target := range g.Targets {
				host, _, err := net.SplitHostPort(target)
				if err != nil {
					t.Errorf("job %s: target %s: %v", sc.JobName, target, err)
					continue
				}
				scraped[host] = true
				s, ok := f.Services[host]
				if !ok {
					t.Errorf("job %s scrapes %s, which is no service", sc.JobName, host)
					continue
				}
				if !slices.ContainsFunc(s.Networks, func(n string) bool { return slices.Contains(prom.Networks, n) }) {
					t.Errorf("job %s scrapes %s, which shares no network with Prometheus", sc.JobName, host)
				}
			}
		}
	}
	for _, name := range f.planeServices() {
		if !strings.HasPrefix(name, "init-") && !scraped[name] {
			t.Errorf("Prometheus does not scrape %s", name)
		}
	}
}

// promConfig is the part of Prometheus's configuration that
// deploy/prometheus/prometheus-compose.yml uses, decoded strictly: a field it does not
// name (a typo) fails. Prometheus's own loader (its config package) would
// bring the cloud SDKs of its service discoveries into this module's
// default test run.
type promConfig struct {
	Global struct {
		ScrapeInterval     string `yaml:"scrape_interval"`
		EvaluationInterval string `yaml:"evaluation_interval"`
	}
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		HonorLabels   bool   `yaml:"honor_labels"`
		StaticConfigs []struct {
			Targets []string
			Labels  map[string]string
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

func loadPrometheusConfig(t *testing.T) promConfig {
	t.Helper()
	var c promConfig
	decodeYAML(t, "../prometheus/prometheus-compose.yml", &c, true)
	for _, sc := range c.ScrapeConfigs {
		for _, g := range sc.StaticConfigs {
			if g.Labels["cluster"] == "" {
				t.Errorf("job %s: targets %v without the cluster label", sc.JobName, g.Targets)
			}
		}
	}
	return c
}
