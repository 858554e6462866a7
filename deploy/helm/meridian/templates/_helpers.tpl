{{/*
Names. Every object is named <release>-<role>; with a release named after
the region (helm install us-east ...) the names say which region they run.
*/}}
{{- define "meridian.name" -}}
{{- printf "%s-%s" .root.Release.Name .role | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels every object carries, and the subset that selects a role's pods. */}}
{{- define "meridian.selectorLabels" -}}
app.kubernetes.io/name: meridian
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "meridian.labels" -}}
{{ include "meridian.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Values.image.tag | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
meridian.io/region: {{ .root.Values.region | quote }}
{{- end -}}

{{- define "meridian.image" -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- end -}}

{{/* The DNS domain of a headless service's pods: <service>.<namespace>.svc.<clusterDomain>. */}}
{{- define "meridian.podDomain" -}}
{{- printf "%s.%s.svc.%s" (include "meridian.name" .) .root.Release.Namespace .root.Values.clusterDomain -}}
{{- end -}}

{{/* The region's etcd client URLs (--etcd): the chart's members, or the given endpoints. */}}
{{- define "meridian.etcdEndpoints" -}}
{{- if .Values.etcd.enabled -}}
{{- $domain := include "meridian.podDomain" (dict "root" . "role" "etcd") -}}
{{- $scheme := include "meridian.scheme" (dict "root" . "part" "etcd") -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.etcd.replicas) -}}
{{- $urls = append $urls (printf "%s://%s-%d.%s:2379" $scheme (include "meridian.name" (dict "root" $ "role" "etcd")) $i $domain) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else -}}
{{- required "etcd.endpoints: the region's etcd client URLs, when etcd.enabled is false" (join "," .Values.etcd.endpoints) -}}
{{- end -}}
{{- end -}}

{{/* The global store's client URLs (--global-etcd): globalStore.endpoints, or the region's etcd. */}}
{{- define "meridian.globalEndpoints" -}}
{{- if .Values.globalStore.endpoints -}}
{{- join "," .Values.globalStore.endpoints -}}
{{- else -}}
{{- include "meridian.etcdEndpoints" . -}}
{{- end -}}
{{- end -}}

{{/* The regions the init Job's namespace replicates to. */}}
{{- define "meridian.replicationClusters" -}}
{{- join "," (default (list .Values.region) .Values.init.replicationClusters) -}}
{{- end -}}

{{/*
A role's ConfigMap data: its MERIDIAN_FLAG_ variables, the chart's
settings (a dict of flag: value) then the user's flags (which win), and
the Pulsar settings of .pulsar (key: value), if any, as Pulsar's images
take them (PULSAR_PREFIX_<key>; README, Configuration).
*/}}
{{- define "meridian.flagEnv" -}}
{{- range $flag, $value := merge (dict) .user .chart }}
{{ printf "MERIDIAN_FLAG_%s" ($flag | upper | replace "-" "_") }}: {{ $value | toString | quote }}
{{- end }}
{{- range $key, $value := .pulsar }}
{{ printf "PULSAR_PREFIX_%s" $key }}: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{/* "true" when TLS of .part (broker, etcd, globalEtcd) is on: tls.enabled and its own enabled, as in Pulsar's chart; else "". */}}
{{- define "meridian.tlsOn" -}}
{{- if and .root.Values.tls.enabled (index .root.Values.tls .part).enabled -}}true{{- end -}}
{{- end -}}

{{/* The URL scheme of .part's listeners: https with its TLS on, else http. */}}
{{- define "meridian.scheme" -}}
{{- if include "meridian.tlsOn" . -}}https{{- else -}}http{{- end -}}
{{- end -}}

{{/*
meridian.security is what the tls and auth values give the process of
.role, as YAML: flags (flag: value, for its ConfigMap), pulsar (Pulsar
settings: key: value) and secrets (the Secrets it mounts read-only, each
{name, secret, path}). Every path a flag names lies in one of those
mounts; this is the one place that maps a value onto a role's flags.
*/}}
{{- define "meridian.security" -}}
{{- $v := .root.Values -}}
{{- $role := .role -}}
{{- $flags := dict -}}
{{- $pulsar := dict -}}
{{- $secrets := list -}}
{{- $storeClient := has $role (list "bookie" "broker" "replicator") -}}
{{- $globalClient := has $role (list "broker" "replicator") -}}
{{- if and $storeClient (include "meridian.tlsOn" (dict "root" .root "part" "etcd")) -}}
{{- $dir := "/etc/meridian/tls/etcd-client" -}}
{{- $secrets = append $secrets (dict "name" "etcd-client-tls" "path" $dir "secret" (required "tls.etcd.clientSecretName: the Secret of the components' etcd client certificate (tls.crt, tls.key, ca.crt)" $v.tls.etcd.clientSecretName)) -}}
{{- $_ := set $flags "etcd-cacert" (printf "%s/ca.crt" $dir) -}}
{{- $_ = set $flags "etcd-cert" (printf "%s/tls.crt" $dir) -}}
{{- $_ = set $flags "etcd-key" (printf "%s/tls.key" $dir) -}}
{{- end -}}
{{- $globalTLS := include "meridian.tlsOn" (dict "root" .root "part" "globalEtcd") -}}
{{- if and $globalClient $v.globalStore.endpoints (include "meridian.tlsOn" (dict "root" .root "part" "etcd")) (not $globalTLS) (contains "http://" (join "," $v.globalStore.endpoints)) -}}
{{- fail "tls.etcd with globalStore.endpoints over http://: the components would reach the global store with the region's etcd certificate (no --global-etcd-* flag given, the --etcd-* ones apply), which meridian refuses over http://; secure the global store too (tls.globalEtcd, https:// endpoints)" -}}
{{- end -}}
{{- if and $globalClient $v.globalStore.endpoints $globalTLS -}}
{{- $dir := "/etc/meridian/tls/global-etcd-client" -}}
{{- $secrets = append $secrets (dict "name" "global-etcd-client-tls" "path" $dir "secret" (required "tls.globalEtcd.clientSecretName: the Secret of the components' certificate for the global store (tls.crt, tls.key, ca.crt)" $v.tls.globalEtcd.clientSecretName)) -}}
{{- $_ := set $flags "global-etcd-cacert" (printf "%s/ca.crt" $dir) -}}
{{- $_ = set $flags "global-etcd-cert" (printf "%s/tls.crt" $dir) -}}
{{- $_ = set $flags "global-etcd-key" (printf "%s/tls.key" $dir) -}}
{{- end -}}
{{- if and $storeClient $v.auth.bookie.enabled (or (ne $role "bookie") $v.auth.bookie.required) -}}
{{- $dir := "/etc/meridian/auth/bookie" -}}
{{- $secrets = append $secrets (dict "name" "bookie-token" "path" $dir "secret" (required "auth.bookie.secretName: the Secret holding the region's bookie token (key token)" $v.auth.bookie.secretName)) -}}
{{- $_ := set $flags (ternary "auth-token-file" "bookie-auth-token-file" (eq $role "bookie")) (printf "%s/token" $dir) -}}
{{- end -}}
{{- if and (eq $role "broker") (include "meridian.tlsOn" (dict "root" .root "part" "broker")) -}}
{{- $dir := "/etc/meridian/tls/broker" -}}
{{- $secrets = append $secrets (dict "name" "broker-tls" "path" $dir "secret" (required "tls.broker.secretName: the brokers' kubernetes.io/tls Secret (tls.crt, tls.key, ca.crt)" $v.tls.broker.secretName)) -}}
{{- $_ := set $flags "broker-tls-listen" "0.0.0.0:6651" -}}
{{- $_ = set $flags "web-tls-listen" "0.0.0.0:8443" -}}
{{- $_ = set $flags "tls-cert-file" (printf "%s/tls.crt" $dir) -}}
{{- $_ = set $flags "tls-key-file" (printf "%s/tls.key" $dir) -}}
{{- $_ = set $flags "tls-trust-certs-file" (printf "%s/ca.crt" $dir) -}}
{{- end -}}
{{- if and $v.auth.authorization.enabled (not $v.auth.authentication.enabled) -}}
{{- fail "auth.authorization.enabled needs auth.authentication.enabled: without it every client is anonymous" -}}
{{- end -}}
{{- if and (eq $role "broker") $v.auth.authentication.enabled -}}
{{- $dir := "/etc/meridian/auth/token-key" -}}
{{- $secrets = append $secrets (dict "name" "token-key" "path" $dir "secret" (required "auth.authentication.tokenKeySecretName: the Secret of the token key (SECRETKEY or PUBLICKEY)" $v.auth.authentication.tokenKeySecretName)) -}}
{{- $_ := set $pulsar "authenticationEnabled" "true" -}}
{{- $_ = set $pulsar "authenticationProviders" "token" -}}
{{- if $v.auth.authentication.usingSecretKey -}}
{{- $_ = set $pulsar "tokenSecretKey" (printf "file://%s/SECRETKEY" $dir) -}}
{{- else -}}
{{- $_ = set $pulsar "tokenPublicKey" (printf "file://%s/PUBLICKEY" $dir) -}}
{{- end -}}
{{- if $v.auth.authorization.enabled -}}
{{- $_ = set $pulsar "authorizationEnabled" "true" -}}
{{- $_ = set $pulsar "superUserRoles" (required "auth.authorization.superUserRoles: the roles that may do everything (the init Job's token's among them)" (join "," $v.auth.authorization.superUserRoles)) -}}
{{- end -}}
{{- end -}}
{{- $memberPart := get (dict "etcd" "etcd" "global-etcd" "globalEtcd") $role -}}
{{- if and $memberPart (include "meridian.tlsOn" (dict "root" .root "part" $memberPart)) -}}
{{- $dir := "/etc/meridian/tls/etcd-member" -}}
{{- $secrets = append $secrets (dict "name" "etcd-member-tls" "path" $dir "secret" (required (printf "tls.%s.memberSecretName: the Secret of the members' certificate (tls.crt, tls.key, ca.crt)" $memberPart) (index $v.tls $memberPart).memberSecretName)) -}}
{{- range $prefix := list "" "peer-" -}}
{{- $_ := set $flags (printf "%scert-file" $prefix) (printf "%s/tls.crt" $dir) -}}
{{- $_ = set $flags (printf "%skey-file" $prefix) (printf "%s/tls.key" $dir) -}}
{{- $_ = set $flags (printf "%strusted-ca-file" $prefix) (printf "%s/ca.crt" $dir) -}}
{{- $_ = set $flags (printf "%sclient-cert-auth" $prefix) true -}}
{{- end -}}
{{- end -}}
{{- if and (eq $role "init") $v.auth.authentication.enabled -}}
{{- $dir := "/etc/meridian/auth/admin-token" -}}
{{- $secrets = append $secrets (dict "name" "admin-token" "path" $dir "secret" (required "auth.authentication.adminTokenSecretName: the Secret of a superuser's token (TOKEN) for the init Job" $v.auth.authentication.adminTokenSecretName)) -}}
{{- $_ := set $flags "token-file" (printf "%s/TOKEN" $dir) -}}
{{- end -}}
{{- toYaml (dict "flags" $flags "pulsar" $pulsar "secrets" $secrets) -}}
{{- end -}}

{{/* The volumeMounts and volumes of a role's Secrets (.secrets of meridian.security). */}}
{{- define "meridian.secretMounts" -}}
{{- range . }}
- name: {{ .name }}
  mountPath: {{ .path }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "meridian.secretVolumes" -}}
{{- range . }}
- name: {{ .name }}
  secret:
    secretName: {{ .secret }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{/* The pod spec's parts every role shares. */}}
{{- define "meridian.podCommon" -}}
enableServiceLinks: false
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "meridian.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: ["ALL"]
{{- end -}}

{{/* POD_NAME, for the variables that name the pod ($(POD_NAME) expands in later ones). */}}
{{- define "meridian.podNameEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end -}}

{{/* A probe on an HTTP path of a named port. */}}
{{- define "meridian.httpProbe" -}}
httpGet:
  path: {{ .path }}
  port: {{ .port }}
periodSeconds: {{ .period | default 10 }}
timeoutSeconds: 5
failureThreshold: {{ .failures | default 3 }}
{{- end -}}

{{/*
One step of the init Job: a container running one `meridian admin` command
against the region's brokers, with the Job's .security (its token, with
authentication on).
*/}}
{{- define "meridian.initStep" -}}
- name: {{ .step.name }}
  image: {{ include "meridian.image" .root }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  args:
    {{- toYaml .step.args | nindent 4 }}
  env:
    - name: MERIDIAN_FLAG_ADMIN_URL
      value: {{ .adminURL }}
    {{- range $flag, $value := .security.flags }}
    - name: {{ printf "MERIDIAN_FLAG_%s" ($flag | upper | replace "-" "_") }}
      value: {{ $value | toString | quote }}
    {{- end }}
  {{- include "meridian.containerSecurity" . | nindent 2 }}
  {{- with .security.secrets }}
  volumeMounts:
    {{- include "meridian.secretMounts" . | trim | nindent 4 }}
  {{- end }}
{{- end -}}
