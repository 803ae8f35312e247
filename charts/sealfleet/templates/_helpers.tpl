{{/* Chart name. */}}
{{- define "sealfleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Resource name prefix. */}}
{{- define "sealfleet.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "sealfleet.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "sealfleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sealfleet
{{- end -}}

{{/* Selector labels of one component: include with (dict "ctx" . "component" "operator"). */}}
{{- define "sealfleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sealfleet.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* An image reference: repository@digest when a digest pins it, else repository:tag. */}}
{{- define "sealfleet.imageRef" -}}
{{- if .img.digest -}}
{{- printf "%s@%s" .img.repository .img.digest -}}
{{- else -}}
{{- printf "%s:%s" .img.repository (default .ctx.Chart.AppVersion .img.tag) -}}
{{- end -}}
{{- end -}}

{{- define "sealfleet.operatorImage" -}}
{{- include "sealfleet.imageRef" (dict "img" .Values.image "ctx" .) -}}
{{- end -}}

{{- define "sealfleet.sealerImage" -}}
{{- include "sealfleet.imageRef" (dict "img" .Values.sealerImage "ctx" .) -}}
{{- end -}}

{{- define "sealfleet.operatorServiceAccount" -}}
{{- printf "%s-operator" (include "sealfleet.fullname" .) -}}
{{- end -}}

{{- define "sealfleet.nodeAgentServiceAccount" -}}
{{- printf "%s-node-agent" (include "sealfleet.fullname" .) -}}
{{- end -}}

{{/* Labels of monitoring objects (common labels plus monitoring.labels). */}}
{{- define "sealfleet.monitoringLabels" -}}
{{ include "sealfleet.labels" . }}
{{- with .Values.monitoring.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
Namespace of the operator's node pods: .ns when set, else .preferred when the operator serves
it, else the first namespace it serves.
*/}}
{{- define "sealfleet.nodePodNamespace" -}}
{{- $watch := .ctx.Values.operator.watchNamespaces -}}
{{- if .ns -}}
{{- .ns -}}
{{- else if or (not $watch) (has .preferred $watch) -}}
{{- .preferred -}}
{{- else -}}
{{- first $watch -}}
{{- end -}}
{{- end }}

{{/* Namespace of the parent-cache builder pods (operator.parentCacheNamespace; preferred: the operator's own). */}}
{{- define "sealfleet.parentCacheNamespace" -}}
{{- include "sealfleet.nodePodNamespace" (dict "ctx" . "ns" .Values.operator.parentCacheNamespace "preferred" .Release.Namespace) -}}
{{- end }}

{{/* Namespace of the sealer and C1 pods, their ConfigMaps and budgets (operator.sealerNamespace; preferred: the operator's own); empty in the legacy mode operator.podRightsInBatchNamespaces, where they live in each batch's own namespace. */}}
{{- define "sealfleet.sealerNamespace" -}}
{{- if .Values.operator.podRightsInBatchNamespaces -}}
{{- if .Values.operator.sealerNamespace -}}
{{- fail (printf "operator.sealerNamespace %q and operator.podRightsInBatchNamespaces=true contradict each other: the latter runs sealer pods in each SealBatch's own namespace; unset one" .Values.operator.sealerNamespace) -}}
{{- end -}}
{{- else -}}
{{- include "sealfleet.nodePodNamespace" (dict "ctx" . "ns" .Values.operator.sealerNamespace "preferred" .Release.Namespace) -}}
{{- end -}}
{{- end }}

{{/* Pod Security level of the batch namespace: batchNamespace.podSecurity, or when empty
privileged only where the operator runs its pods there (the legacy mode, or a node-pod
namespace set to it) and restricted otherwise: tenants there get no privileged pods. */}}
{{- define "sealfleet.batchNamespacePodSecurity" -}}
{{- $ns := .Values.batchNamespace.name -}}
{{- $pods := list (include "sealfleet.sealerNamespace" .) (include "sealfleet.scrubNamespace" .) (include "sealfleet.parentCacheNamespace" .) -}}
{{- if .Values.batchNamespace.podSecurity -}}
{{- .Values.batchNamespace.podSecurity -}}
{{- else if or .Values.operator.podRightsInBatchNamespaces (has $ns $pods) -}}
privileged
{{- else -}}
restricted
{{- end -}}
{{- end }}

{{/* Name of the Role that grants the operator its pod rights in each node-pod namespace. */}}
{{- define "sealfleet.operatorPodsRole" -}}
{{- printf "%s-operator-pods" (include "sealfleet.fullname" .) -}}
{{- end }}

{{/* Namespace of the scrub pods (operator.scrubNamespace; preferred: the operator's own, out of tenants' reach). */}}
{{- define "sealfleet.scrubNamespace" -}}
{{- include "sealfleet.nodePodNamespace" (dict "ctx" . "ns" .Values.operator.scrubNamespace "preferred" .Release.Namespace) -}}
{{- end }}

{{/* A Role of the operator's in one namespace, bound to its ServiceAccount: dict ctx, namespace, name, rules. */}}
{{- define "sealfleet.operatorRole" -}}
{{- $ctx := .ctx }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "sealfleet.labels" $ctx | nindent 4 }}
    app.kubernetes.io/component: operator
rules:
  {{- toYaml .rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "sealfleet.labels" $ctx | nindent 4 }}
    app.kubernetes.io/component: operator
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .name }}
subjects:
  - kind: ServiceAccount
    name: {{ include "sealfleet.operatorServiceAccount" $ctx }}
    namespace: {{ $ctx.Release.Namespace }}
{{- end }}

{{/* Namespace of the SealOrders and the batches formed from them. */}}
{{- define "sealfleet.remoteSealNamespace" -}}
{{- default .Values.batchNamespace.name .Values.remoteSeal.namespace -}}
{{- end }}

{{/* The Secret holding the key that signs sector data URLs (operator and node agents): the one named in remoteSeal.sectorData.keySecret, or the chart's. */}}
{{- define "sealfleet.sectorDataKeySecret" -}}
{{- .Values.remoteSeal.sectorData.keySecret | default (printf "%s-sector-data-key" (include "sealfleet.fullname" .)) -}}
{{- end }}

{{/* The Secret holding the CA node agents issue their sector data certificates from (modes ChartCA and CertManager): the one named in remoteSeal.sectorData.tls.caSecretName, or the chart's (or its Certificate's). */}}
{{- define "sealfleet.sectorDataCASecret" -}}
{{- $t := .Values.remoteSeal.sectorData.tls -}}
{{- if and (eq $t.mode "CertManager") $t.caSecretName -}}
{{- fail (printf "remoteSeal.sectorData.tls.caSecretName %q: with mode CertManager the chart's Certificate writes the CA Secret; unset caSecretName, or use mode ChartCA to name a CA Secret you keep" $t.caSecretName) -}}
{{- end -}}
{{- $t.caSecretName | default (printf "%s-sector-data-ca" (include "sealfleet.fullname" .)) -}}
{{- end }}

{{/* The Secret mounted as the node agents' sector data TLS material ("" for plain HTTP). */}}
{{- define "sealfleet.sectorDataTLSSecret" -}}
{{- $t := .Values.remoteSeal.sectorData.tls -}}
{{- if or (eq $t.mode "ChartCA") (eq $t.mode "CertManager") -}}
{{- include "sealfleet.sectorDataCASecret" . -}}
{{- else if eq $t.mode "Secret" -}}
{{- required "remoteSeal.sectorData.tls.secretName: name the kubernetes.io/tls Secret (release namespace) whose certificate names every node agent's sector data address (or use mode ChartCA)" $t.secretName -}}
{{- else if ne $t.mode "None" -}}
{{- fail (printf "remoteSeal.sectorData.tls.mode %q: use ChartCA (default), CertManager, Secret or None" $t.mode) -}}
{{- end -}}
{{- end }}
