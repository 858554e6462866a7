package chart

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	corev1 "k8s.io/api/core/v1"
)

// secretsDir is where the chart mounts every Secret: a setting that names
// a file under it names one of a Secret.
const secretsDir = "/etc/meridian/"

// checkSecretFiles: every file a container's settings name under
// secretsDir (a flag's path, or a Pulsar setting's file:// URL) lies in a
// read-only mount of a Secret volume of its pod, and every Secret volume
// is mounted.
func checkSecretFiles(t *testing.T, r rendering) {
	for _, w := range r.workloads() {
		secretVolumes := map[string]bool{}
		for _, v := range w.pod.Spec.Volumes {
			if v.Secret != nil {
				secretVolumes[v.Name] = true
			}
		}
		mounted := map[string]bool{}
		for _, c := range slices.Concat(w.pod.Spec.InitContainers, w.pod.Spec.Containers) {
			for _, m := range c.VolumeMounts {
				mounted[m.Name] = true
			}
			for name, e := range containerEnv(t, r, c) {
				path := strings.TrimPrefix(e.Value, "file://")
				if !strings.HasPrefix(path, secretsDir) {
					continue
				}
				if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
					return secretVolumes[m.Name] && m.ReadOnly && strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
				}) {
					t.Errorf("%s %s: %s's %s names %s, which no read-only mount of a Secret holds", w.kind, w.name, c.Name, name, path)
				}
			}
		}
		for v := range secretVolumes {
			if !mounted[v] {
				t.Errorf("%s %s: Secret volume %s is mounted by no container", w.kind, w.name, v)
			}
		}
	}
}

// TestSecureValues renders every tls and auth value on
// (testdata/secure.yaml) and checks that each reaches the processes it
// concerns: the flags and Pulsar settings, the Secrets they are read
// from, the brokers' TLS ports on their pods and Services, https:// etcd
// URLs, and probes and scrapes that still answer. (TestChartRenders and
// TestChartCommandsFlagsAndImage check the same rendering's objects and
// that every setting is one the binary takes.)
func TestSecureValues(t *testing.T) {
	vals, err := chartcommon.ReadValuesFile(secureValues)
	if err != nil {
		t.Fatal(err)
	}
	r := render(t, "secure", vals)

	// role -> setting -> value, and role -> Secret mounted.
	want := map[string]map[string]string{
		"bookie": {
			"MERIDIAN_FLAG_AUTH_TOKEN_FILE": "/etc/meridian/auth/bookie/token",
			"MERIDIAN_FLAG_ETCD_CACERT":     "/etc/meridian/tls/etcd-client/ca.crt",
			"MERIDIAN_FLAG_ETCD_CERT":       "/etc/meridian/tls/etcd-client/tls.crt",
			"MERIDIAN_FLAG_ETCD_KEY":        "/etc/meridian/tls/etcd-client/tls.key",
		},
		"broker": {
			"MERIDIAN_FLAG_BROKER_TLS_LISTEN":       "0.0.0.0:6651",
			"MERIDIAN_FLAG_WEB_TLS_LISTEN":          "0.0.0.0:8443",
			"MERIDIAN_FLAG_BROKER_LISTEN":           "0.0.0.0:6650",
			"MERIDIAN_FLAG_WEB_LISTEN":              "0.0.0.0:8080",
			"MERIDIAN_FLAG_TLS_CERT_FILE":           "/etc/meridian/tls/broker/tls.crt",
			"MERIDIAN_FLAG_TLS_KEY_FILE":            "/etc/meridian/tls/broker/tls.key",
			"MERIDIAN_FLAG_TLS_TRUST_CERTS_FILE":    "/etc/meridian/tls/broker/ca.crt",
			"MERIDIAN_FLAG_BOOKIE_AUTH_TOKEN_FILE":  "/etc/meridian/auth/bookie/token",
			"MERIDIAN_FLAG_ETCD_CERT":               "/etc/meridian/tls/etcd-client/tls.crt",
			"MERIDIAN_FLAG_GLOBAL_ETCD_CACERT":      "/etc/meridian/tls/global-etcd-client/ca.crt",
			"MERIDIAN_FLAG_GLOBAL_ETCD_CERT":        "/etc/meridian/tls/global-etcd-client/tls.crt",
			"MERIDIAN_FLAG_GLOBAL_ETCD_KEY":         "/etc/meridian/tls/global-etcd-client/tls.key",
			"PULSAR_PREFIX_authenticationEnabled":   "true",
			"PULSAR_PREFIX_authenticationProviders": "token",
			"PULSAR_PREFIX_tokenSecretKey":          "file:///etc/meridian/auth/token-key/SECRETKEY",
			"PULSAR_PREFIX_authorizationEnabled":    "true",
			"PULSAR_PREFIX_superUserRoles":          "admin,us-east-replicator",
		},
		"replicator": {
			"MERIDIAN_FLAG_BOOKIE_AUTH_TOKEN_FILE": "/etc/meridian/auth/bookie/token",
			"MERIDIAN_FLAG_ETCD_CERT":              "/etc/meridian/tls/etcd-client/tls.crt",
			"MERIDIAN_FLAG_GLOBAL_ETCD_CERT":       "/etc/meridian/tls/global-etcd-client/tls.crt",
		},
		"etcd": {
			"MERIDIAN_FLAG_LISTEN_CLIENT_URLS":    "https://0.0.0.0:2379",
			"MERIDIAN_FLAG_LISTEN_PEER_URLS":      "https://0.0.0.0:2380",
			"MERIDIAN_FLAG_CERT_FILE":             "/etc/meridian/tls/etcd-member/tls.crt",
			"MERIDIAN_FLAG_KEY_FILE":              "/etc/meridian/tls/etcd-member/tls.key",
			"MERIDIAN_FLAG_TRUSTED_CA_FILE":       "/etc/meridian/tls/etcd-member/ca.crt",
			"MERIDIAN_FLAG_CLIENT_CERT_AUTH":      "true",
			"MERIDIAN_FLAG_PEER_CERT_FILE":        "/etc/meridian/tls/etcd-member/tls.crt",
			"MERIDIAN_FLAG_PEER_KEY_FILE":         "/etc/meridian/tls/etcd-member/tls.key",
			"MERIDIAN_FLAG_PEER_TRUSTED_CA_FILE":  "/etc/meridian/tls/etcd-member/ca.crt",
			"MERIDIAN_FLAG_PEER_CLIENT_CERT_AUTH": "true",
		},
		"global-etcd": {
			"MERIDIAN_FLAG_ADVERTISE_CLIENT_URLS":       "https://us-east-global-etcd.example.net:2379",
			"MERIDIAN_FLAG_INITIAL_ADVERTISE_PEER_URLS": "https://us-east-global-etcd.example.net:2380",
			"MERIDIAN_FLAG_CERT_FILE":                   "/etc/meridian/tls/etcd-member/tls.crt",
			"MERIDIAN_FLAG_CLIENT_CERT_AUTH":            "true",
			"MERIDIAN_FLAG_PEER_CLIENT_CERT_AUTH":       "true",
		},
		"init": {
			"MERIDIAN_FLAG_TOKEN_FILE": "/etc/meridian/auth/admin-token/TOKEN",
		},
	}
	secrets := map[string][]string{
		"bookie":      {"us-east-bookie-token", "us-east-etcd-client-tls"},
		"broker":      {"us-east-broker-tls", "us-east-bookie-token", "us-east-etcd-client-tls", "us-east-global-etcd-client-tls", "us-east-token-key"},
		"replicator":  {"us-east-bookie-token", "us-east-etcd-client-tls", "us-east-global-etcd-client-tls"},
		"etcd":        {"us-east-etcd-member-tls"},
		"global-etcd": {"us-east-global-etcd-member-tls"},
		"init":        {"us-east-admin-token"},
	}
	for _, role := range slices.Sorted(maps.Keys(want)) {
		w, ok := r.workload(role)
		if !ok {
			t.Errorf("no %s workload", role)
			continue
		}
		for _, c := range slices.Concat(w.pod.Spec.InitContainers, w.pod.Spec.Containers) {
			env := containerEnv(t, r, c)
			for name, value := range want[role] {
				if got := env[name].Value; got != value {
					t.Errorf("%s/%s: %s = %q, want %q", role, c.Name, name, got, value)
				}
			}
		}
		var got []string
		for _, v := range w.pod.Spec.Volumes {
			if v.Secret != nil {
				got = append(got, v.Secret.SecretName)
			}
		}
		if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(secrets[role]))) {
			t.Errorf("%s: mounts Secrets %q, want %q", role, got, secrets[role])
		}
	}

	// The region's etcd URLs are https://, for every component.
	for _, role := range []string{"bookie", "broker", "replicator"} {
		w, _ := r.workload(role)
		for _, u := range strings.Split(containerEnv(t, r, w.pod.Spec.Containers[0])["MERIDIAN_FLAG_ETCD"].Value, ",") {
			if !strings.HasPrefix(u, "https://") {
				t.Errorf("%s: --etcd names %q, want https:// with tls.etcd", role, u)
			}
		}
	}

	// The brokers serve TLS on their pods and both Services, beside the
	// plain ports, on which their probes stay.
	broker, _ := r.workload("broker")
	c := broker.pod.Spec.Containers[0]
	wantPorts := map[string]int32{"pulsar": 6650, "http": 8080, "pulsarssl": 6651, "https": 8443}
	if got := containerPorts(broker.pod); !maps.Equal(got, wantPorts) {
		t.Errorf("broker container ports %v, want %v", got, wantPorts)
	}
	for _, p := range probes(c) {
		if p.probe.HTTPGet == nil || p.probe.HTTPGet.Port.String() != "http" {
			t.Errorf("broker %s probe: %+v, want an HTTP GET on the plain port http", p.kind, p.probe.ProbeHandler)
		}
	}
	services := 0
	for _, o := range r.objects {
		s, ok := o.value.(*corev1.Service)
		if !ok || !selects(s.Spec.Selector, broker.pod.Labels) {
			continue
		}
		services++
		got := map[string]int32{}
		for _, p := range s.Spec.Ports {
			got[p.Name] = p.Port
		}
		if !maps.Equal(got, wantPorts) {
			t.Errorf("Service %s ports %v, want %v", s.Name, got, wantPorts)
		}
	}
	if services != 2 {
		t.Errorf("%d Services select the brokers, want 2 (headless and client)", services)
	}

	// etcd members answer only clients with a certificate on their client
	// port: probes and scrapes use the plain metrics port (runRegion
	// checks that it answers them).
	for _, role := range []string{"etcd", "global-etcd"} {
		w, _ := r.workload(role)
		for _, p := range probes(w.pod.Spec.Containers[0]) {
			if p.probe.HTTPGet == nil || p.probe.HTTPGet.Port.String() != "metrics" {
				t.Errorf("%s %s probe: %+v, want an HTTP GET on the plain port metrics (the kubelet has no client certificate)", role, p.kind, p.probe.ProbeHandler)
			}
		}
	}
	for _, o := range r.objects {
		if pm, ok := o.value.(*monitoringv1.PodMonitor); ok {
			for _, ep := range pm.Spec.PodMetricsEndpoints {
				if *ep.Port == "client" {
					t.Errorf("PodMonitor scrapes etcd's client port, which answers no scrape without a certificate")
				}
			}
		}
	}
}

// TestSecurityValuesNeedTheirSecrets: a tls or auth value turned on
// without what it needs is refused at render, naming the value to set.
func TestSecurityValuesNeedTheirSecrets(t *testing.T) {
	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"tls": map[string]any{"enabled": true, "broker": map[string]any{"enabled": true}}}, "tls.broker.secretName"},
		{map[string]any{"tls": map[string]any{"enabled": true, "etcd": map[string]any{"enabled": true, "clientSecretName": "c"}}}, "tls.etcd.memberSecretName"},
		{map[string]any{"tls": map[string]any{"enabled": true, "etcd": map[string]any{"enabled": true, "memberSecretName": "m"}}}, "tls.etcd.clientSecretName"},
		{map[string]any{
			"globalStore": map[string]any{"endpoints": []any{"https://g:2379"}},
			"tls":         map[string]any{"enabled": true, "globalEtcd": map[string]any{"enabled": true}},
		}, "tls.globalEtcd.clientSecretName"},
		{map[string]any{
			"globalStore": map[string]any{"endpoints": []any{"http://g:2379"}},
			"tls":         map[string]any{"enabled": true, "etcd": map[string]any{"enabled": true, "memberSecretName": "m", "clientSecretName": "c"}},
		}, "tls.etcd with globalStore.endpoints over http://"},
		{map[string]any{"auth": map[string]any{"bookie": map[string]any{"enabled": true}}}, "auth.bookie.secretName"},
		{map[string]any{"auth": map[string]any{"authentication": map[string]any{"enabled": true, "adminTokenSecretName": "a"}}}, "auth.authentication.tokenKeySecretName"},
		{map[string]any{"auth": map[string]any{"authentication": map[string]any{"enabled": true, "tokenKeySecretName": "k"}}}, "auth.authentication.adminTokenSecretName"},
		{map[string]any{"auth": map[string]any{"authorization": map[string]any{"enabled": true}}}, "auth.authorization.enabled needs auth.authentication.enabled"},
		{map[string]any{"auth": map[string]any{
			"authentication": map[string]any{"enabled": true, "tokenKeySecretName": "k", "adminTokenSecretName": "a"},
			"authorization":  map[string]any{"enabled": true},
		}}, "auth.authorization.superUserRoles"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, _, err := renderFiles(tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("values %v: got error %v, want one naming %q", tc.values, err, tc.want)
			}
		})
	}
	// tls.<part>.enabled alone changes nothing: tls.enabled is the master
	// switch, as in Pulsar's chart.
	off, _, err := renderFiles(chartcommon.Values{"tls": map[string]any{"broker": map[string]any{"enabled": true}}})
	if err != nil {
		t.Fatal(err)
	}
	def, _, err := renderFiles(chartcommon.Values{})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(off, def) {
		t.Errorf("tls.broker.enabled without tls.enabled changed the rendering")
	}
}

// pulsarSettingsAccepted runs `meridian <path>` with only the Pulsar
// settings of env (PULSAR_PREFIX_<key>) in its environment and no flags:
// it must name none of them as ignored or unparsable, and stop only for
// its missing --region.
func pulsarSettingsAccepted(t *testing.T, bin string, path []string, env map[string]corev1.EnvVar) error {
	t.Helper()
	var vars []string
	for name, e := range env {
		if strings.HasPrefix(name, "PULSAR_PREFIX_") {
			vars = append(vars, name+"="+e.Value)
		}
	}
	if len(vars) == 0 {
		return nil
	}
	out, _ := runWithEnv(bin, path, vars)
	if strings.Contains(out, "ignored") || !strings.Contains(out, "--region is required") {
		return fmt.Errorf("meridian %s with %q: %s", strings.Join(path, " "), vars, out)
	}
	return nil
}

// TestBookieTokenBeforeItIsRequired: auth.bookie.required false gives the
// token to the bookies' clients only, the first of the two upgrades that
// turn it on in a running region.
func TestBookieTokenBeforeItIsRequired(t *testing.T) {
	r := render(t, "bookie token not yet required", chartcommon.Values{
		"auth": map[string]any{"bookie": map[string]any{"enabled": true, "required": false, "secretName": "us-east-bookie-token"}},
	})
	for role, want := range map[string]string{
		"bookie":     "",
		"broker":     "/etc/meridian/auth/bookie/token",
		"replicator": "/etc/meridian/auth/bookie/token",
	} {
		w, _ := r.workload(role)
		env := containerEnv(t, r, w.pod.Spec.Containers[0])
		got := env["MERIDIAN_FLAG_BOOKIE_AUTH_TOKEN_FILE"].Value + env["MERIDIAN_FLAG_AUTH_TOKEN_FILE"].Value
		if got != want {
			t.Errorf("%s: token file %q, want %q", role, got, want)
		}
	}
	checkSecretFiles(t, r)
}
