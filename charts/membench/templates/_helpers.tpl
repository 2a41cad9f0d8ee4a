{{/* The chart name, overridable. */}}
{{- define "membench.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every resource name. */}}
{{- define "membench.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels every resource carries. */}}
{{- define "membench.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "membench.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: membench
{{- end }}

{{/* Labels that select the operator pod. */}}
{{- define "membench.selectorLabels" -}}
app.kubernetes.io/name: {{ include "membench.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/* The namespaces a namespace-scoped operator watches: rbac.namespaces, or the release's. */}}
{{- define "membench.watchNamespaces" -}}
{{- if .Values.rbac.namespaces }}
{{- join "," .Values.rbac.namespaces }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{/* The operator's ServiceAccount. */}}
{{- define "membench.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "membench.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The membench image: repository with the digest, or the tag (default: appVersion). */}}
{{- define "membench.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The operator's rules: exactly the calls it makes (docs/src/reference/operator-flags.md, "RBAC"). */}}
{{- define "membench.rules" -}}
- apiGroups: ["membench.io"]
  resources: ["memorybenchmarks"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["membench.io"]
  resources: ["memorybenchmarks/status"]
  verbs: ["patch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "create", "delete", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
# create only: each benchmark without spec.auth gets a password Secret the operator makes and
# never reads back.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create"]
# get by name: the prices a benchmark's spec.capacity.pricesConfigMapRef names, and a profile
# workload's configMapRef, read before anything starts; list and watch: a prices ConfigMap
# created or changed later reaches the benchmarks that name it.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch"]
# get by name: an RDB workload's persistentVolumeClaim, looked up before anything starts (the
# client pod mounts it; the operator never reads the file).
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  # get and delete: a policy of the benchmark's name left by an earlier benchmark of that name
  # is read (owner, managed-by label) and, when it is membench's, replaced.
  verbs: ["create", "get", "delete"]
{{- with .Values.rbac.extraRules }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The leader Lease, in the release namespace only: which replica runs the controller.
*/}}
{{- define "membench.leaseRules" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "update"]
{{- end }}
