{{/*
Object names. Kubernetes names are DNS labels here (at most 63 characters), so every
name is cut to 63 and never ends in "-". The full name is `<release>-<chart>`, or just
the release name when it already contains the chart name (`helm install
dynamo-pool-operator ...` gives objects named dynamo-pool-operator, as
`dynamo-pool-operator manifests rbac` does). Cluster-scoped names add the release
namespace: see "clusterScoped" below.
*/}}
{{- define "dynamo-pool-operator.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dynamo-pool-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "dynamo-pool-operator.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A name derived from the full name: `<fullname>-<suffix>`, still at most 63. */}}
{{- define "dynamo-pool-operator.suffixed" -}}
{{- $base := include "dynamo-pool-operator.fullname" .root | trunc (int (sub 62 (len .suffix))) | trimSuffix "-" -}}
{{- printf "%s-%s" $base .suffix -}}
{{- end -}}

{{/*
A cluster-scoped object's name: `<name>.<release namespace>`. Without the namespace,
releases of one name in two namespaces (one per team, each restricted to its own)
would claim the same ClusterRole, and Helm refuses to install the second. Namespaces
have no dots, so the part after the last dot is always the namespace and no two
releases can share a name. RBAC names are DNS subdomains (253 characters): no cut.
*/}}
{{- define "dynamo-pool-operator.clusterScoped" -}}
{{- printf "%s.%s" .name .root.Release.Namespace -}}
{{- end -}}

{{/* The ClusterRole a Prometheus is bound to, to scrape secure metrics. */}}
{{- define "dynamo-pool-operator.metricsReader" -}}
{{- include "dynamo-pool-operator.clusterScoped" (dict "root" . "name" (include "dynamo-pool-operator.suffixed" (dict "root" . "suffix" "metrics-reader"))) -}}
{{- end -}}

{{/*
The Secret served on secure /metrics: `metrics.certSecret`, else (a ServiceMonitor
scrapes, and must verify what it reaches) the one the chart makes; empty otherwise
(the operator makes a self-signed certificate at start).
*/}}
{{- define "dynamo-pool-operator.metricsTLSSecret" -}}
{{- if .Values.metrics.secure -}}
{{- if .Values.metrics.certSecret -}}
{{- .Values.metrics.certSecret -}}
{{- else if .Values.metrics.serviceMonitor.enabled -}}
{{- include "dynamo-pool-operator.suffixed" (dict "root" . "suffix" "metrics-tls") -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The metrics Service's name, and the DNS name its certificate is verified by. */}}
{{- define "dynamo-pool-operator.metricsService" -}}
{{- include "dynamo-pool-operator.suffixed" (dict "root" . "suffix" "metrics") -}}
{{- end -}}

{{- define "dynamo-pool-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "dynamo-pool-operator.labels" -}}
helm.sh/chart: {{ include "dynamo-pool-operator.chart" . }}
{{ include "dynamo-pool-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: dynamo-pool-operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The labels the Deployment selects its pods by: never change them in an upgrade. */}}
{{- define "dynamo-pool-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dynamo-pool-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "dynamo-pool-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "dynamo-pool-operator.fullname" .) -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "dynamo-pool-operator.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The namespace the operator is restricted to, or "" (cluster-wide). */}}
{{- define "dynamo-pool-operator.restrictedNamespace" -}}
{{- if .Values.namespaceRestriction.enabled -}}
{{- required "namespaceRestriction.targetNamespace is required when namespaceRestriction.enabled is true" .Values.namespaceRestriction.targetNamespace -}}
{{- end -}}
{{- end -}}

{{/*
The Lease's namespace. Restricted, the operator may write only in its target namespace,
so the Lease (and its Role) live there; otherwise in the release namespace. The
ConfigMap names it explicitly, so the Role and the operator always agree.
*/}}
{{- define "dynamo-pool-operator.leaseNamespace" -}}
{{- include "dynamo-pool-operator.restrictedNamespace" . | default .Release.Namespace -}}
{{- end -}}

{{/*
The operator's rules, generated from src/dynamo_pool_operator/rbac.py into
files/rbac-rules.yaml: the chart never spells a permission itself.
*/}}
{{- define "dynamo-pool-operator.rules" -}}
{{- $rules := .Files.Get "files/rbac-rules.yaml" | fromYaml -}}
{{- if or (hasKey $rules "Error") (not $rules.manager) -}}
{{- fail "files/rbac-rules.yaml is missing or invalid: run `uv run python tools/generate_manifests.py`" -}}
{{- end -}}
{{- toJson $rules -}}
{{- end -}}

{{/* Refuse values that would deploy something broken. */}}
{{- define "dynamo-pool-operator.validate" -}}
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.replicaCount) 1) -}}
{{- fail "leaderElection.enabled=false with replicaCount > 1: several replicas would write at once; enable leader election or set replicaCount to 1" -}}
{{- end -}}
{{- $_ := include "dynamo-pool-operator.restrictedNamespace" . -}}
{{- $pdb := .Values.podDisruptionBudget -}}
{{- if $pdb.enabled -}}
{{- if not (kindIs "invalid" $pdb.maxUnavailable) -}}
{{- if eq (toString $pdb.maxUnavailable) "0" "0%" -}}
{{- fail "podDisruptionBudget.maxUnavailable=0: no pod could ever be evicted and node drains would hang; allow at least 1" -}}
{{- end -}}
{{- else if and (not (kindIs "string" $pdb.minAvailable)) (ge (int $pdb.minAvailable) (int .Values.replicaCount)) -}}
{{- fail (printf "podDisruptionBudget.minAvailable=%d with replicaCount=%d: no pod could ever be evicted and node drains would hang; lower minAvailable or raise replicaCount" (int $pdb.minAvailable) (int .Values.replicaCount)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
