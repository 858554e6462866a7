package chart

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "../../deploy/helm/meridian"
	examplesDir = "../../deploy/helm/examples"
	// secureValues turns every tls and auth value on.
	secureValues = "testdata/secure.yaml"
	// releaseName and releaseNamespace are the examples' (helm install
	// meridian ... -n meridian).
	releaseName      = "meridian"
	releaseNamespace = "meridian"
)

// object is one rendered manifest, decoded into its Go type.
type object struct {
	source string // the template it came from
	kind   string // apiVersion/kind
	name   string
	value  any // *corev1.ConfigMap, *appsv1.StatefulSet, ...
}

// rendering is the chart rendered for one set of values.
type rendering struct {
	name    string
	values  chartcommon.Values // the chart's values with the given ones over them
	image   string             // the image every container must run
	objects []object
}

// kinds are the types the chart may render, by apiVersion/kind. A kind
// missing here fails the test: add its type, never skip it.
var kinds = map[string]func() any{
	"v1/ConfigMap":                        func() any { return &corev1.ConfigMap{} },
	"v1/Service":                          func() any { return &corev1.Service{} },
	"apps/v1/StatefulSet":                 func() any { return &appsv1.StatefulSet{} },
	"apps/v1/Deployment":                  func() any { return &appsv1.Deployment{} },
	"batch/v1/Job":                        func() any { return &batchv1.Job{} },
	"policy/v1/PodDisruptionBudget":       func() any { return &policyv1.PodDisruptionBudget{} },
	"monitoring.coreos.com/v1/PodMonitor": func() any { return &monitoringv1.PodMonitor{} },
}

// renderings are the chart's default values, each release of the
// three-region example, and every tls and auth value on.
func renderings(t *testing.T) []rendering {
	t.Helper()
	out := []rendering{render(t, "default", chartcommon.Values{})}
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example values in %s (%v)", examplesDir, err)
	}
	for _, f := range append(files, secureValues) {
		vals, err := chartcommon.ReadValuesFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, render(t, filepath.Base(f), vals))
	}
	return out
}

// render renders the chart with Helm's template engine, as `helm install`
// and `helm template` do for a new release (hooks included: the engine
// renders every template; Helm sorts hooks out afterwards), and decodes
// every object strictly. It uses the engine rather than an install
// action's dry run because the action brings Helm's Kubernetes client,
// registry and storage drivers, which nearly double what this module
// compiles (1158 packages against 641).
func render(t *testing.T, name string, vals chartcommon.Values) rendering {
	t.Helper()
	files, merged, err := renderFiles(vals)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	image, _ := merged.Table("image")
	out := rendering{name: name, values: merged, image: fmt.Sprintf("%v:%v", image["repository"], image["tag"])}
	sources := slices.Sorted(maps.Keys(files))
	for _, source := range sources {
		if strings.HasPrefix(filepath.Base(source), "_") || !strings.HasSuffix(source, ".yaml") {
			continue // partials, as Helm skips them
		}
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(files[source], -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			o, err := decode(doc)
			if err != nil {
				t.Errorf("%s: %s: %v", name, source, err)
				continue
			}
			o.source = source
			out.objects = append(out.objects, o)
		}
	}
	return out
}

// renderFiles renders the chart for vals: each template's text, and the
// chart's values with vals over them.
func renderFiles(vals chartcommon.Values) (map[string]string, chartcommon.Values, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, nil, err
	}
	release := chartcommon.ReleaseOptions{Name: releaseName, Namespace: releaseNamespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(ch, vals, release, chartcommon.DefaultCapabilities)
	if err != nil {
		return nil, nil, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return nil, nil, fmt.Errorf("rendering: %w", err)
	}
	merged, err := top.Table("Values")
	if err != nil {
		return nil, nil, err
	}
	return files, merged, nil
}

func stripComments(doc string) string {
	return regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")
}

// decode decodes one manifest into its type, strictly: a field the type
// does not have, or one given twice, is an error.
func decode(doc string) (object, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
		return object{}, err
	}
	kind := head.APIVersion + "/" + head.Kind
	newValue, ok := kinds[kind]
	if !ok {
		return object{}, fmt.Errorf("%s %q: a kind the test does not know", kind, head.Metadata.Name)
	}
	v := newValue()
	if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
		return object{}, fmt.Errorf("%s %q: %w", kind, head.Metadata.Name, err)
	}
	return object{kind: kind, name: head.Metadata.Name, value: v}, nil
}

// workload is a rendered pod template with what owns it.
type workload struct {
	kind, name string
	pod        *corev1.PodTemplateSpec
}

func (r rendering) workloads() []workload {
	var out []workload
	for _, o := range r.objects {
		switch v := o.value.(type) {
		case *appsv1.StatefulSet:
			out = append(out, workload{"StatefulSet", v.Name, &v.Spec.Template})
		case *appsv1.Deployment:
			out = append(out, workload{"Deployment", v.Name, &v.Spec.Template})
		case *batchv1.Job:
			out = append(out, workload{"Job", v.Name, &v.Spec.Template})
		}
	}
	return out
}

// component is a workload's app.kubernetes.io/component label: its role.
func (w workload) component() string { return w.pod.Labels["app.kubernetes.io/component"] }

func (r rendering) configMap(name string) *corev1.ConfigMap {
	for _, o := range r.objects {
		if cm, ok := o.value.(*corev1.ConfigMap); ok && cm.Name == name {
			return cm
		}
	}
	return nil
}

func (r rendering) workload(component string) (workload, bool) {
	for _, w := range r.workloads() {
		if w.component() == component {
			return w, true
		}
	}
	return workload{}, false
}

// selects reports whether selector matches every label it names in labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// containerPorts are the named ports of a pod's containers.
func containerPorts(pod *corev1.PodTemplateSpec) map[string]int32 {
	out := map[string]int32{}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			out[p.Name] = p.ContainerPort
		}
	}
	return out
}

// TestChartRenders renders the chart for the default values and each
// example release, and checks what the chart promises of its objects.
func TestChartRenders(t *testing.T) {
	for _, r := range renderings(t) {
		t.Run(r.name, func(t *testing.T) {
			seen := map[string]bool{}
			count := map[string]int{}
			for _, o := range r.objects {
				count[o.kind]++
				key := o.kind + "/" + o.name
				if seen[key] {
					t.Errorf("%s rendered twice", key)
				}
				seen[key] = true
			}
			t.Logf("%d objects: %v", len(r.objects), count)
			for _, role := range []string{"bookie", "broker", "replicator", "etcd", "init"} {
				if _, ok := r.workload(role); !ok {
					t.Errorf("no %s workload", role)
				}
			}
			checkPods(t, r)
			checkSecretFiles(t, r)
			checkServices(t, r)
			checkBookies(t, r)
			checkBrokers(t, r)
			checkInitJob(t, r)
			checkDisruptionBudgets(t, r)
			checkPodMonitor(t, r)
		})
	}
}

// checkPods: every pod runs the values' image, without Kubernetes' service
// links (whose variables would land among the process's environment), as
// the image's non-root user; every probe names a port of its container;
// every envFrom names a rendered ConfigMap.
func checkPods(t *testing.T, r rendering) {
	for _, w := range r.workloads() {
		spec := w.pod.Spec
		if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
			t.Errorf("%s %s: enableServiceLinks must be false", w.kind, w.name)
		}
		if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 10000 {
			t.Errorf("%s %s: want runAsNonRoot as the image's user 10000", w.kind, w.name)
		}
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			if c.Image != r.image {
				t.Errorf("%s %s: container %s runs %q, want the values' image %q", w.kind, w.name, c.Name, c.Image, r.image)
			}
			ports := map[string]bool{}
			for _, p := range c.Ports {
				ports[p.Name] = true
			}
			for _, p := range probes(c) {
				var port string
				switch {
				case p.probe.HTTPGet != nil:
					port = p.probe.HTTPGet.Port.String()
				case p.probe.TCPSocket != nil:
					port = p.probe.TCPSocket.Port.String()
				default:
					t.Errorf("%s %s: %s's %s probe is neither an HTTP GET nor a TCP check", w.kind, w.name, c.Name, p.kind)
					continue
				}
				if !ports[port] {
					t.Errorf("%s %s: %s's %s probe names port %q, which the container does not have", w.kind, w.name, c.Name, p.kind, port)
				}
			}
			for _, from := range c.EnvFrom {
				if from.ConfigMapRef == nil || r.configMap(from.ConfigMapRef.Name) == nil {
					t.Errorf("%s %s: %s takes its environment from %+v, which is no rendered ConfigMap", w.kind, w.name, c.Name, from)
				}
			}
		}
	}
}

// namedProbe is one of a container's probes.
type namedProbe struct {
	kind  string // readiness, liveness, startup
	probe *corev1.Probe
}

func probes(c corev1.Container) []namedProbe {
	var out []namedProbe
	for _, p := range []namedProbe{{"readiness", c.ReadinessProbe}, {"liveness", c.LivenessProbe}, {"startup", c.StartupProbe}} {
		if p.probe != nil {
			out = append(out, p)
		}
	}
	return out
}

// checkServices: every Service selects the pods of one workload and
// targets ports they have; every StatefulSet's serviceName is rendered.
func checkServices(t *testing.T, r rendering) {
	services := map[string]*corev1.Service{}
	for _, o := range r.objects {
		s, ok := o.value.(*corev1.Service)
		if !ok {
			continue
		}
		services[s.Name] = s
		var target *workload
		for _, w := range r.workloads() {
			if selects(s.Spec.Selector, w.pod.Labels) {
				target = &w
				break
			}
		}
		if target == nil {
			t.Errorf("Service %s selects no rendered pods", s.Name)
			continue
		}
		named := containerPorts(target.pod)
		for _, p := range s.Spec.Ports {
			if _, ok := named[p.TargetPort.String()]; !ok {
				t.Errorf("Service %s: port %s targets %q, which %s's pods do not have", s.Name, p.Name, p.TargetPort.String(), target.name)
			}
		}
	}
	for _, o := range r.objects {
		if ss, ok := o.value.(*appsv1.StatefulSet); ok && services[ss.Spec.ServiceName] == nil {
			t.Errorf("StatefulSet %s: serviceName %q is not rendered", ss.Name, ss.Spec.ServiceName)
		}
	}
}

// podEnvSource is how a variable of a container gets its value: literally,
// or from the pod's own fields.
func envVar(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// checkBookies: a StatefulSet with a volume claim per bookie, whose id is
// its pod's name and whose rack is its node's zone label on the pod.
func checkBookies(t *testing.T, r rendering) {
	w, ok := r.workload("bookie")
	if !ok {
		return
	}
	for _, o := range r.objects {
		if ss, ok := o.value.(*appsv1.StatefulSet); ok && ss.Name == w.name {
			if len(ss.Spec.VolumeClaimTemplates) == 0 {
				t.Errorf("bookies: no volumeClaimTemplates")
			}
		}
	}
	c := w.pod.Spec.Containers[0]
	if id, ok := envVar(c, "MERIDIAN_FLAG_ID"); !ok || id.Value != "$(POD_NAME)" {
		t.Errorf("bookies: --id must be the pod's name, got %+v", id)
	}
	if pod, ok := envVar(c, "POD_NAME"); !ok || pod.ValueFrom == nil || pod.ValueFrom.FieldRef == nil || pod.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("bookies: POD_NAME must come from metadata.name, got %+v", pod)
	}
	rack, ok := envVar(c, "MERIDIAN_FLAG_RACK")
	if !ok || rack.ValueFrom == nil || rack.ValueFrom.FieldRef == nil ||
		rack.ValueFrom.FieldRef.FieldPath != "metadata.labels['topology.kubernetes.io/zone']" {
		t.Errorf("bookies: --rack must come from the pod's topology.kubernetes.io/zone label, got %+v", rack)
	}
}

// minBrokerGrace is what a broker's stop takes at most (README, Slow,
// frozen and hostile peers): DrainTimeout (30s), then its connections
// (10s) and its topics (10s).
const minBrokerGrace = 50

// checkBrokers: a StatefulSet behind a headless service, advertising its
// pod's stable name, given the time its drain takes.
func checkBrokers(t *testing.T, r rendering) {
	w, ok := r.workload("broker")
	if !ok {
		return
	}
	var ss *appsv1.StatefulSet
	for _, o := range r.objects {
		if v, ok := o.value.(*appsv1.StatefulSet); ok && v.Name == w.name {
			ss = v
		}
	}
	if ss == nil {
		t.Fatalf("brokers: %s is no StatefulSet", w.name)
	}
	var headless *corev1.Service
	for _, o := range r.objects {
		if s, ok := o.value.(*corev1.Service); ok && s.Name == ss.Spec.ServiceName {
			headless = s
		}
	}
	if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("brokers: serviceName %q must be a headless Service that publishes pods before they are ready", ss.Spec.ServiceName)
	}
	if g := w.pod.Spec.TerminationGracePeriodSeconds; g == nil || *g < minBrokerGrace {
		t.Errorf("brokers: terminationGracePeriodSeconds %v does not cover a drain (%ds)", g, minBrokerGrace)
	}
	c := w.pod.Spec.Containers[0]
	adv, ok := envVar(c, "MERIDIAN_FLAG_ADVERTISED_ADDRESS")
	if !ok || !strings.HasPrefix(adv.Value, "$(POD_NAME).") {
		t.Errorf("brokers: --advertised-address must be the pod's stable name, got %+v", adv)
	}
	if domain, _ := r.values["broker"].(map[string]any)["advertisedDomain"].(string); domain == "" {
		want := fmt.Sprintf("$(POD_NAME).%s.%s.svc.cluster.local", ss.Spec.ServiceName, releaseNamespace)
		if adv.Value != want {
			t.Errorf("brokers: --advertised-address %q, want the headless service's %q", adv.Value, want)
		}
	}
}

// checkInitJob: a post-install hook whose steps are retried in place, in
// order (restartPolicy OnFailure), and whose first step waits for the
// region's own record.
func checkInitJob(t *testing.T, r rendering) {
	w, ok := r.workload("init")
	if !ok {
		return
	}
	if w.pod.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("init Job: restartPolicy %q, want OnFailure (a failed step is retried in place)", w.pod.Spec.RestartPolicy)
	}
	for _, o := range r.objects {
		if j, ok := o.value.(*batchv1.Job); ok && j.Annotations["helm.sh/hook"] != "post-install" {
			t.Errorf("init Job %s: want a post-install hook, got %q", j.Name, j.Annotations["helm.sh/hook"])
		}
	}
	steps := slices.Concat(w.pod.Spec.InitContainers, w.pod.Spec.Containers)
	if first := steps[0].Args; !slices.Equal(first[:3], []string{"admin", "clusters", "get"}) {
		t.Errorf("init Job: the first step must wait for the region's record, got %q", first)
	}
}

// checkDisruptionBudgets: at most one pod of a role down by choice, and
// every budget selects a workload.
func checkDisruptionBudgets(t *testing.T, r rendering) {
	covered := map[string]bool{}
	for _, o := range r.objects {
		pdb, ok := o.value.(*policyv1.PodDisruptionBudget)
		if !ok {
			continue
		}
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("PodDisruptionBudget %s: want maxUnavailable 1", pdb.Name)
		}
		for _, w := range r.workloads() {
			if selects(pdb.Spec.Selector.MatchLabels, w.pod.Labels) {
				covered[w.component()] = true
			}
		}
	}
	for _, role := range []string{"bookie", "broker", "etcd"} {
		if !covered[role] {
			t.Errorf("no PodDisruptionBudget covers the %ss", role)
		}
	}
}

// checkPodMonitor: every endpoint's port is a port of some selected pods.
func checkPodMonitor(t *testing.T, r rendering) {
	for _, o := range r.objects {
		pm, ok := o.value.(*monitoringv1.PodMonitor)
		if !ok {
			continue
		}
		for _, ep := range pm.Spec.PodMetricsEndpoints {
			found := false
			for _, w := range r.workloads() {
				if _, ok := containerPorts(w.pod)[*ep.Port]; ok && selects(pm.Spec.Selector.MatchLabels, w.pod.Labels) {
					found = true
				}
			}
			if !found {
				t.Errorf("PodMonitor %s: port %q is on no pod it selects", pm.Name, *ep.Port)
			}
		}
	}
}
