{{/* Names: <release>-webhook and <release>-controllers, or the chart name when the release carries it. */}}
{{- define "orchestratord.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "orchestratord.webhook.name" -}}{{ include "orchestratord.fullname" . }}-webhook{{- end -}}
{{- define "orchestratord.controllers.name" -}}{{ include "orchestratord.fullname" . }}-controllers{{- end -}}

{{- define "orchestratord.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/part-of: orchestratord
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* selector labels of one component: (list . "webhook") */}}
{{- define "orchestratord.selectorLabels" -}}
app.kubernetes.io/name: orchestratord
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
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
{{- with $root.Values.global.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
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

{{/* A PodDisruptionBudget when there is more than one replica: (list . "webhook" .Values.webhook) */}}
{{- define "orchestratord.pdb" -}}
{{- $root := index . 0 -}}{{- $component := index . 1 -}}{{- $values := index . 2 -}}
{{- if and $values.podDisruptionBudget.enabled (gt (int $values.replicas) 1) }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "orchestratord.fullname" $root }}-{{ $component }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "orchestratord.labels" $root | nindent 4 }}
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
