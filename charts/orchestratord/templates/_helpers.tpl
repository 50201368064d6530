{{/* The chart's name, or nameOverride: the app.kubernetes.io/name label. */}}
{{- define "orchestratord.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of every name the chart derives (<fullname>-webhook,
<fullname>-controllers, ...): fullnameOverride, else the release name when it
contains the name, else <release>-<name>; as Helm's scaffold and upstream's
chart, but cut to 50 characters, leaving room for the suffixes.
*/}}
{{- define "orchestratord.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "orchestratord.webhook.name" -}}{{ include "orchestratord.fullname" . }}-webhook{{- end -}}
{{- define "orchestratord.controllers.name" -}}{{ include "orchestratord.fullname" . }}-controllers{{- end -}}
{{/* environmentd's ClusterRole, passed to the controllers as --environmentd-cluster-role. */}}
{{- define "orchestratord.environmentdClusterRole" -}}{{ include "orchestratord.controllers.name" . }}-environmentd{{- end -}}

{{- define "orchestratord.labels" -}}
{{ include "orchestratord.commonLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* orchestratord.labels but the instance, which selectorLabels carries:
beside them (a key twice is refused by kustomize and Flux's post-render). */}}
{{- define "orchestratord.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/part-of: orchestratord
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* selector labels of one component: (list . "webhook") */}}
{{- define "orchestratord.selectorLabels" -}}
app.kubernetes.io/name: {{ include "orchestratord.name" (index . 0) }}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/*
Whether the chart creates a component's ServiceAccount: (list . "webhook").
The component's serviceAccount.create, else the top-level serviceAccount.create
(upstream's key). "true" or "".
*/}}
{{- define "orchestratord.createServiceAccount" -}}
{{- $root := index . 0 -}}{{- $own := (index $root.Values (index . 1)).serviceAccount -}}
{{- $create := $own.create -}}
{{- if kindIs "invalid" $create -}}{{- $create = $root.Values.serviceAccount.create -}}{{- end -}}
{{- if $create -}}true{{- end -}}
{{- end -}}

{{/*
The ServiceAccount a component runs as: (list . "webhook"). The component's
serviceAccount.name, else the top-level serviceAccount.name (upstream's key:
one ServiceAccount for both), else <fullname>-<component> when the chart
creates it. Without a name and without create there is nothing to run as:
upstream falls back to the namespace's default ServiceAccount, which this
chart refuses to bind its roles to unless named.
*/}}
{{- define "orchestratord.serviceAccountName" -}}
{{- $root := index . 0 -}}{{- $component := index . 1 -}}
{{- $name := default $root.Values.serviceAccount.name (index $root.Values $component).serviceAccount.name -}}
{{- if $name -}}
{{- $name -}}
{{- else if include "orchestratord.createServiceAccount" . -}}
{{- include "orchestratord.fullname" $root }}-{{ $component -}}
{{- else -}}
{{- fail (printf "%s.serviceAccount.create is false: set serviceAccount.name or %s.serviceAccount.name to the ServiceAccount it runs as (\"default\" for the namespace's own)" $component $component) -}}
{{- end -}}
{{- end -}}

{{/* The pull secrets of this chart's pods: global.imagePullSecrets and imagePullSecrets. */}}
{{- define "orchestratord.imagePullSecrets" -}}
{{- $all := concat (default list .Values.global.imagePullSecrets) (default list .Values.imagePullSecrets) | uniq -}}
{{- with $all }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* image reference of one component: (list . .Values.webhook.image) */}}
{{- define "orchestratord.image" -}}
{{- $root := index . 0 -}}{{- $image := index . 1 -}}
{{- $repo := $image.repository -}}
{{- if $root.Values.global.imageRegistry -}}{{- $repo = printf "%s/%s" $root.Values.global.imageRegistry $repo -}}{{- end -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $repo $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default $root.Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The restricted Pod Security Standard, for every pod and container. */}}
{{- define "orchestratord.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}
{{- define "orchestratord.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Spread by hostname unless the user says otherwise: (list . "webhook" .Values.webhook) */}}
{{- define "orchestratord.spread" -}}
{{- $root := index . 0 -}}{{- $component := index . 1 -}}{{- $values := index . 2 -}}
{{- if $values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml $values.topologySpreadConstraints | nindent 2 }}
{{- else }}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "orchestratord.selectorLabels" (list $root $component) | nindent 8 }}
{{- end }}
{{- end -}}

{{/* Scheduling and pull settings shared by both pod specs: (list . .Values.webhook) */}}
{{- define "orchestratord.scheduling" -}}
{{- $root := index . 0 -}}{{- $values := index . 1 -}}
{{- include "orchestratord.imagePullSecrets" $root }}
{{- with $values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* "true" when the webhook autoscales; safe on values without the key. */}}
{{- define "orchestratord.webhook.autoscaled" -}}
{{- if dig "autoscaling" "enabled" false .Values.webhook }}true{{ end -}}
{{- end -}}

{{/*
The webhook autoscaler's minReplicas: set, it must be above an integer
minAvailable (else an eviction at the minimum could leave no ready replica);
empty, it is minAvailable + 1, or 2.
*/}}
{{- define "orchestratord.webhook.minReplicas" -}}
{{- $v := .Values.webhook -}}
{{- $reuse := "(helm upgrade --reuse-values keeps the values of the chart the release was installed with, which had no webhook.autoscaling: use --reset-then-reuse-values)" -}}
{{- if kindIs "invalid" $v.autoscaling.maxReplicas }}{{ fail (printf "webhook.autoscaling.maxReplicas is not set %s" $reuse) }}{{ end -}}
{{- if kindIs "invalid" $v.autoscaling.targetCPUUtilizationPercentage }}{{ fail (printf "webhook.autoscaling.targetCPUUtilizationPercentage is not set %s" $reuse) }}{{ end -}}
{{- $pdb := $v.podDisruptionBudget -}}
{{- $floor := 1 -}}
{{- if and $pdb.enabled (kindIs "float64" $pdb.minAvailable) }}{{ $floor = add (int $pdb.minAvailable) 1 }}{{ end -}}
{{- if and $pdb.enabled (kindIs "int64" $pdb.minAvailable) }}{{ $floor = add (int $pdb.minAvailable) 1 }}{{ end -}}
{{- /* maxUnavailable k lets k go at once: k + 1 leave one ready. */ -}}
{{- $bound := printf "podDisruptionBudget.minAvailable (%v)" $pdb.minAvailable -}}
{{- if and $pdb.enabled (or (kindIs "float64" $pdb.maxUnavailable) (kindIs "int64" $pdb.maxUnavailable)) }}{{ $floor = add (int $pdb.maxUnavailable) 1 }}{{ $bound = printf "podDisruptionBudget.maxUnavailable (%v)" $pdb.maxUnavailable }}{{ end -}}
{{- if kindIs "invalid" $v.autoscaling.minReplicas -}}
{{- if gt (max $floor 2) (int $v.autoscaling.maxReplicas) -}}
{{- fail (printf "webhook.autoscaling.maxReplicas (%v) is below the autoscaler's floor, %s + 1 (%v)" $v.autoscaling.maxReplicas $bound (max $floor 2)) -}}
{{- end -}}
{{ max $floor 2 }}
{{- else -}}
{{- if lt (int $v.autoscaling.minReplicas) (int $floor) -}}
{{- fail (printf "webhook.autoscaling.minReplicas (%v) must be above webhook.%s: at the minimum a voluntary eviction would leave no ready replica" $v.autoscaling.minReplicas $bound) -}}
{{- end -}}
{{- if gt (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas) -}}
{{- fail (printf "webhook.autoscaling.minReplicas (%v) is above maxReplicas (%v)" $v.autoscaling.minReplicas $v.autoscaling.maxReplicas) -}}
{{- end -}}
{{ $v.autoscaling.minReplicas }}
{{- end -}}
{{- end -}}

{{/*
The webhook Deployment's replicas. Under the autoscaler the count it chose
is kept across upgrades (the live Deployment's; minReplicas on install and
in helm template), so an upgrade neither resets it nor drops it to 1.
*/}}
{{- define "orchestratord.webhook.replicas" -}}
{{- $v := .Values.webhook -}}
{{- if include "orchestratord.webhook.autoscaled" . -}}
{{- $min := int (include "orchestratord.webhook.minReplicas" .) -}}
{{- $live := lookup "apps/v1" "Deployment" .Release.Namespace (include "orchestratord.webhook.name" .) -}}
{{- if and $live $live.spec.replicas -}}
{{ min (max (int $live.spec.replicas) $min) (int $v.autoscaling.maxReplicas) }}
{{- else -}}
{{ $min }}
{{- end -}}
{{- else -}}
{{ $v.replicas }}
{{- end -}}
{{- end -}}

{{/* A PodDisruptionBudget when there is more than one replica, or the webhook autoscales: (list . "webhook" .Values.webhook) */}}
{{- define "orchestratord.pdb" -}}
{{- $root := index . 0 -}}{{- $component := index . 1 -}}{{- $values := index . 2 -}}
{{- $autoscaled := and (eq $component "webhook") (include "orchestratord.webhook.autoscaled" $root) -}}
{{- $pdb := $values.podDisruptionBudget -}}
{{- with ($values.updateStrategy | default dict).rollingUpdate -}}
{{- $none := list "0" "0%" -}}
{{- if and (has (toString .maxUnavailable) $none) (has (toString .maxSurge) $none) -}}
{{- fail (printf "%s.updateStrategy.rollingUpdate: maxUnavailable and maxSurge cannot both be 0" $component) -}}
{{- end -}}
{{- end -}}
{{- if and $pdb.enabled (or $autoscaled (gt (int $values.replicas) 1)) }}
{{- if and (not (kindIs "invalid" $pdb.minAvailable)) (not (kindIs "invalid" $pdb.maxUnavailable)) -}}
{{- fail (printf "%s.podDisruptionBudget sets both minAvailable (%v) and maxUnavailable (%v): set the other one to null (--set %s.podDisruptionBudget.maxUnavailable=null, say)" $component $pdb.minAvailable $pdb.maxUnavailable $component) -}}
{{- end }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "orchestratord.fullname" $root }}-{{ $component }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "orchestratord.commonLabels" $root | nindent 4 }}
    {{- include "orchestratord.selectorLabels" (list $root $component) | nindent 4 }}
spec:
  {{- if not (kindIs "invalid" $values.podDisruptionBudget.maxUnavailable) }}
  maxUnavailable: {{ $values.podDisruptionBudget.maxUnavailable }}
  {{- else }}
  minAvailable: {{ $values.podDisruptionBudget.minAvailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "orchestratord.selectorLabels" (list $root $component) | nindent 6 }}
{{- end }}
{{- end -}}

{{- define "orchestratord.leaseNamespace" -}}{{ default .Release.Namespace .Values.controllers.leaderElection.namespace }}{{- end -}}
{{- define "orchestratord.tlsSecretName" -}}{{ default (printf "%s-tls" (include "orchestratord.webhook.name" .)) .Values.tls.secretName }}{{- end -}}

{{/*
The cluster replica sizes as upstream's chart computes them
(materialize.processClusterSizes): disk_limit "0" without a storage class or
with swap, swap_enabled defaulted, the swap or scratch-fs node selector merged
into the selectors, is_cc true. Renders YAML; the caller converts it to JSON.
*/}}
{{- define "orchestratord.clusterSizes" -}}
{{- $result := dict -}}
{{- range $size, $config := .Values.clusters.sizes -}}
  {{- $newConfig := deepCopy $config -}}
  {{- if or (not $.Values.storage.storageClass.name) $.Values.clusters.swap_enabled -}}
    {{- $_ := set $newConfig "disk_limit" "0" -}}
  {{- end -}}
  {{- if not (hasKey $newConfig "swap_enabled") -}}
    {{- $_ := set $newConfig "swap_enabled" $.Values.clusters.swap_enabled -}}
  {{- end -}}
  {{- if not (hasKey $newConfig "selectors") -}}
    {{- $_ := set $newConfig "selectors" dict -}}
  {{- end -}}
  {{- if $newConfig.swap_enabled -}}
    {{- if $.Values.clusterd.swapNodeSelector -}}
      {{- $_ := merge $newConfig.selectors $.Values.clusterd.swapNodeSelector -}}
    {{- end -}}
  {{- else if $.Values.storage.storageClass.name -}}
    {{- if $.Values.clusterd.scratchfsNodeSelector -}}
      {{- $_ := merge $newConfig.selectors $.Values.clusterd.scratchfsNodeSelector -}}
    {{- end -}}
  {{- end -}}
  {{- $_ := set $newConfig "is_cc" true -}}
  {{- $_ := set $result $size $newConfig -}}
{{- end -}}
{{- $result | toYaml -}}
{{- end -}}

{{/*
The controllers' flags for the environments they run: upstream orchestratord's
flags, rendered from upstream's value names as upstream's chart renders them
(JSON values single-quoted, one flag per toleration). A YAML list.
*/}}
{{- define "orchestratord.environmentArgs" -}}
{{- $v := .Values -}}
- "--helm-chart-version={{ .Chart.Version }}"
- "--cloud-provider={{ $v.cloudProvider.type }}"
- "--region={{ $v.cloudProvider.region }}"
- "--secrets-controller={{ $v.secretsController }}"
{{- with $v.console.imageTagDefault }}
- "--console-image-tag-default={{ . }}"
{{- end }}
{{- range $key, $value := $v.console.imageTagMapOverride }}
- "--console-image-tag-map={{ $key }}={{ $value }}"
{{- end }}
{{- if eq $v.cloudProvider.type "aws" }}
{{- with $v.cloudProvider.providers.aws }}
{{- if .accountID }}
- "--aws-account-id={{ .accountID }}"
{{- end }}
{{- if .iam.roles.environment }}
- "--environmentd-iam-role-arn={{ .iam.roles.environment }}"
{{- end }}
{{- if .iam.roles.connection }}
- "--environmentd-connection-role-arn={{ .iam.roles.connection }}"
{{- end }}
{{- end }}
{{- end }}
{{- if eq $v.cloudProvider.type "gcp" }}
{{- with $v.cloudProvider.providers.gcp.nodeUpgradeRolloutTrigger }}
{{- if .enabled }}
- "--enable-gcp-node-upgrade-rollout-trigger"
- "--gcp-node-upgrade-notification-subscription={{ required "nodeUpgradeRolloutTrigger.notificationSubscription is required when nodeUpgradeRolloutTrigger is enabled" .notificationSubscription }}"
- "--gcp-cluster-name={{ required "nodeUpgradeRolloutTrigger.clusterName is required when nodeUpgradeRolloutTrigger is enabled" .clusterName }}"
- "--gcp-cluster-location={{ required "nodeUpgradeRolloutTrigger.clusterLocation is required when nodeUpgradeRolloutTrigger is enabled" .clusterLocation }}"
{{- range .watchedNodePools }}
- "--gcp-node-upgrade-watched-node-pool={{ . }}"
{{- end }}
{{- end }}
{{- end }}
{{- end }}
- "--orchestratord-namespace={{ .Release.Namespace }}"
{{- range $key, $value := include "orchestratord.selectorLabels" (list . "controllers") | fromYaml }}
- "--orchestratord-pod-selector-labels={{ $key }}={{ $value }}"
{{- end }}
{{- with $v.environmentd.statementLogging }}
{{- if .disableStatementLogging }}
- "--disable-statement-logging"
{{- end }}
{{- if .enableInternalStatementLogging }}
- "--enable-internal-statement-logging"
{{- end }}
{{- end }}
- "--enable-security-context"
- "--image-pull-policy={{ kebabcase $v.environmentd.imagePullPolicy }}"
{{- range $v.imagePullSecrets }}
- "--image-pull-secrets={{ .name }}"
{{- end }}
{{- with $v.clusters }}
{{- if .sizes }}
- '--environmentd-cluster-replica-sizes={{ include "orchestratord.clusterSizes" $ | fromYaml | toJson }}'
{{- end }}
{{- with .defaultSizes }}
{{- if .default }}
- "--bootstrap-default-cluster-replica-size={{ .default }}"
{{- end }}
{{- if .system }}
- "--bootstrap-builtin-system-cluster-replica-size={{ .system }}"
{{- end }}
{{- if .probe }}
- "--bootstrap-builtin-probe-cluster-replica-size={{ .probe }}"
{{- end }}
{{- if .support }}
- "--bootstrap-builtin-support-cluster-replica-size={{ .support }}"
{{- end }}
{{- if .catalogServer }}
- "--bootstrap-builtin-catalog-server-cluster-replica-size={{ .catalogServer }}"
{{- end }}
{{- if .analytics }}
- "--bootstrap-builtin-analytics-cluster-replica-size={{ .analytics }}"
{{- end }}
{{- end }}
{{- with .defaultReplicationFactor }}
{{- if ne .system nil }}
- "--bootstrap-builtin-system-cluster-replication-factor={{ .system }}"
{{- end }}
{{- if ne .probe nil }}
- "--bootstrap-builtin-probe-cluster-replication-factor={{ .probe }}"
{{- end }}
{{- if ne .support nil }}
- "--bootstrap-builtin-support-cluster-replication-factor={{ .support }}"
{{- end }}
{{- if ne .analytics nil }}
- "--bootstrap-builtin-analytics-cluster-replication-factor={{ .analytics }}"
{{- end }}
{{- end }}
{{- end }}
{{- with $v.environmentd }}
{{- range $key, $value := .nodeSelector }}
- "--environmentd-node-selector={{ $key }}={{ $value }}"
{{- end }}
{{- with .affinity }}
- '--environmentd-affinity={{ toJson . }}'
{{- end }}
{{- range .tolerations }}
- '--environmentd-toleration={{ toJson . }}'
{{- end }}
{{- with .defaultResources }}
- '--environmentd-default-resources={{ toJson . }}'
{{- end }}
{{- end }}
{{- range $component := list "balancerd" "console" }}
{{- with index $v $component }}
{{- range $key, $value := .nodeSelector }}
- "--{{ $component }}-node-selector={{ $key }}={{ $value }}"
{{- end }}
{{- with .affinity }}
- '--{{ $component }}-affinity={{ toJson . }}'
{{- end }}
{{- range .tolerations }}
- '--{{ $component }}-toleration={{ toJson . }}'
{{- end }}
{{- with .defaultResources }}
- '--{{ $component }}-default-resources={{ toJson . }}'
{{- end }}
{{- end }}
{{- end }}
{{- with $v.tls.defaultCertificateSpecs }}
- '--default-certificate-specs={{ toJson . }}'
{{- end }}
{{- with $v.clusterd }}
{{- range $key, $value := .nodeSelector }}
- "--clusterd-node-selector={{ $key }}={{ $value }}"
{{- end }}
{{- with .affinity }}
- '--clusterd-affinity={{ toJson . }}'
{{- end }}
{{- range .tolerations }}
- '--clusterd-toleration={{ toJson . }}'
{{- end }}
{{- end }}
{{- with $v.storage.storageClass.name }}
- "--ephemeral-volume-class={{ . }}"
{{- end }}
{{- with $v.networkPolicies }}
{{- if .enabled }}
{{- if .internal.enabled }}
- "--network-policies-internal-enabled"
{{- end }}
{{- if .ingress.enabled }}
- "--network-policies-ingress-enabled"
{{- range .ingress.cidrs }}
- "--network-policies-ingress-cidrs={{ . }}"
{{- end }}
{{- end }}
{{- if .egress.enabled }}
- "--network-policies-egress-enabled"
{{- range .egress.cidrs }}
- "--network-policies-egress-cidrs={{ . }}"
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- with $v.observability }}
{{- if .enabled }}
{{- if .podMetrics.enabled }}
- "--collect-pod-metrics"
{{- end }}
{{- if .prometheus.scrapeAnnotations.enabled }}
- "--enable-prometheus-scrape-annotations"
{{- end }}
{{- end }}
{{- end }}
{{- with $v.telemetry }}
{{- if .enabled }}
- "--segment-api-key={{ required "telemetry.enabled needs telemetry.segmentApiKey" .segmentApiKey }}"
{{- if .segmentClientSide }}
- "--segment-client-side"
{{- end }}
{{- end }}
{{- end }}
{{- with $v.schedulerName }}
- "--scheduler-name={{ . }}"
{{- end }}
{{- end -}}

{{/*
Both components' tracing flags (upstream orchestratord's), from
.Values.tracing; the OpenTelemetry ones only with an endpoint.
*/}}
{{- define "orchestratord.tracingArgs" -}}
{{- with .Values.tracing.startupLogFilter }}
- {{ printf "--startup-log-filter=%s" . | quote }}
{{- end }}
{{- with .Values.tracing.opentelemetry }}
{{- if .endpoint }}
{{- if and .headers .headersSecret }}
{{- fail "tracing.opentelemetry: set headers or headersSecret, not both (the flag would hide the Secret's variable)" }}
{{- end }}
- {{ printf "--opentelemetry-endpoint=%s" .endpoint | quote }}
- {{ printf "--opentelemetry-protocol=%s" .protocol | quote }}
{{- range $name, $value := .headers }}
- {{ printf "--opentelemetry-header=%s=%s" $name $value | quote }}
{{- end }}
{{- range $name, $value := .resource }}
- {{ printf "--opentelemetry-resource=%s=%s" $name $value | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The environment of the tracing flags: headers from a Secret. */}}
{{- define "orchestratord.tracingEnv" -}}
{{- with .Values.tracing.opentelemetry }}
{{- if and .endpoint .headersSecret }}
- name: ORCHESTRATORD_OPENTELEMETRY_HEADER
  valueFrom: {secretKeyRef: {name: {{ .headersSecret.name | quote }}, key: {{ .headersSecret.key | quote }}}}
{{- end }}
{{- end }}
{{- end -}}

{{/*
Whether the controllers run a node trigger, which lists nodes and pods
cluster wide: the GKE node upgrade rollout trigger (enabled with the gcp
cloud provider, as the flags above render it) or the node removal one.
*/}}
{{- define "orchestratord.nodeTriggers" -}}
{{- if or (and (eq .Values.cloudProvider.type "gcp") .Values.cloudProvider.providers.gcp.nodeUpgradeRolloutTrigger.enabled) .Values.controllers.nodeRemovalRolloutTrigger -}}
true
{{- end -}}
{{- end -}}
