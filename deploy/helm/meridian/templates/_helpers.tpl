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
{{- $urls := list -}}
{{- range $i := until (int .Values.etcd.replicas) -}}
{{- $urls = append $urls (printf "http://%s-%d.%s:2379" (include "meridian.name" (dict "root" $ "role" "etcd")) $i $domain) -}}
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
settings (a dict of flag: value) then the user's flags (which win).
*/}}
{{- define "meridian.flagEnv" -}}
{{- range $flag, $value := merge (dict) .user .chart }}
{{ printf "MERIDIAN_FLAG_%s" ($flag | upper | replace "-" "_") }}: {{ $value | toString | quote }}
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

{{/* One step of the init Job: a container running one `meridian admin` command against the region's brokers. */}}
{{- define "meridian.initStep" -}}
- name: {{ .step.name }}
  image: {{ include "meridian.image" .root }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  args:
    {{- toYaml .step.args | nindent 4 }}
  env:
    - name: MERIDIAN_FLAG_ADMIN_URL
      value: {{ .adminURL }}
  {{- include "meridian.containerSecurity" . | nindent 2 }}
{{- end -}}
