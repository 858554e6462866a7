{{/*
meridian.etcdMember is the StatefulSet of etcd members that the region's
etcd and the region's global-store member share: .ctx (root and role),
.name, .replicas, .storage, .resources, .config (its ConfigMap's data, whose
checksum restarts the members when it changes), .secrets (its Secrets, of
meridian.security: with TLS on, its certificate) and .env, the member's own
variables (its name and advertised URLs, which may name $(POD_NAME)), if any.
*/}}
{{- define "meridian.etcdMember" -}}
{{- $root := .ctx.root }}
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .name }}
  labels:
    {{- include "meridian.labels" .ctx | nindent 4 }}
spec:
  serviceName: {{ .name }}
  replicas: {{ .replicas }}
  podManagementPolicy: Parallel
  selector:
    matchLabels:
      {{- include "meridian.selectorLabels" .ctx | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "meridian.labels" .ctx | nindent 8 }}
      annotations:
        checksum/config: {{ .config | sha256sum | trunc 16 }}
    spec:
      {{- include "meridian.podCommon" $root | nindent 6 }}
      terminationGracePeriodSeconds: 30
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector:
                  matchLabels:
                    {{- include "meridian.selectorLabels" .ctx | nindent 20 }}
      containers:
        - name: etcd
          image: {{ include "meridian.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args: ["etcd"]
          envFrom:
            - configMapRef:
                name: {{ .name }}
          {{- with .env }}
          env:
            {{- include "meridian.podNameEnv" $ | nindent 12 }}
            {{- toYaml . | nindent 12 }}
          {{- end }}
          ports:
            - name: client
              containerPort: 2379
            - name: peer
              containerPort: 2380
            # --listen-metrics-urls: plain HTTP serving only /metrics and
            # the health endpoints, so that the kubelet and Prometheus,
            # which hold no client certificate, reach them when the
            # client port requires one (TLS).
            - name: metrics
              containerPort: 2381
          # etcd's /health fails while the member has no leader: not ready
          # then, but alive. Liveness is etcd's /livez, which needs no
          # quorum (a probe that did would restart every member of a
          # cluster that lost its quorum).
          readinessProbe:
            {{- include "meridian.httpProbe" (dict "path" "/health" "port" "metrics") | nindent 12 }}
          livenessProbe:
            {{- include "meridian.httpProbe" (dict "path" "/livez" "port" "metrics" "failures" 6) | nindent 12 }}
          {{- include "meridian.containerSecurity" . | nindent 10 }}
          {{- with .resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          volumeMounts:
            - name: data
              mountPath: /var/lib/meridian
            - name: tmp
              mountPath: /tmp
            {{- with .secrets }}{{ include "meridian.secretMounts" . | trim | nindent 12 }}{{ end }}
      volumes:
        - name: tmp
          emptyDir: {}
        {{- with .secrets }}{{ include "meridian.secretVolumes" . | trim | nindent 8 }}{{ end }}
  volumeClaimTemplates:
    - metadata:
        name: data
      spec:
        accessModes: ["ReadWriteOnce"]
        {{- with .storage.storageClassName }}
        storageClassName: {{ . }}
        {{- end }}
        resources:
          requests:
            storage: {{ .storage.size }}
{{- end -}}
