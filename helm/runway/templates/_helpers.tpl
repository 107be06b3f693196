{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "runway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the runway objects (Deployment, Service, ConfigMap, ...). */}}
{{- define "runway.fullname" -}}
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

{{/* Name of the bundled kube-scheduler's objects. */}}
{{- define "runway.schedulerFullname" -}}
{{- printf "%s-scheduler" (include "runway.fullname" . | trunc 53 | trimSuffix "-") }}
{{- end }}

{{- define "runway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "runway.labels" -}}
app.kubernetes.io/name: {{ include "runway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{ include "runway.commonLabels" . }}
{{- end }}

{{/* Labels that are not part of any selector. */}}
{{- define "runway.commonLabels" -}}
helm.sh/chart: {{ include "runway.chart" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: runway
{{- end }}

{{/* Selector of the runway (extender) pods. */}}
{{- define "runway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "runway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: extender
{{- end }}

{{/* Selector of the bundled kube-scheduler pods. */}}
{{- define "runway.schedulerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "runway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end }}

{{- define "runway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "runway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "runway.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* http or https, as the runway container serves. */}}
{{- define "runway.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end }}
{{- end }}

{{/* The Service's in-cluster DNS name. */}}
{{- define "runway.serviceHost" -}}
{{- printf "%s.%s.svc" (include "runway.fullname" .) .Release.Namespace }}
{{- end }}

{{/* The extender urlPrefix: scheme://service.namespace.svc:port + runway's server.urlPrefix. */}}
{{- define "runway.extenderURL" -}}
{{- $prefix := dig "server" "urlPrefix" "/scheduler" .Values.config }}
{{- printf "%s://%s:%v%s" (include "runway.scheme" .) (include "runway.serviceHost" .) .Values.service.port $prefix }}
{{- end }}

{{/* policy/v1 where served (Kubernetes >= 1.21), else policy/v1beta1. Discovery decides on a
live install; offline (helm template) the --kube-version decides. */}}
{{- define "runway.pdbApiVersion" -}}
{{- if .Capabilities.APIVersions.Has "policy/v1/PodDisruptionBudget" }}
{{- "policy/v1" }}
{{- else if .Capabilities.APIVersions.Has "policy/v1beta1/PodDisruptionBudget" }}
{{- "policy/v1beta1" }}
{{- else if semverCompare ">=1.21-0" .Capabilities.KubeVersion.Version }}
{{- "policy/v1" }}
{{- else }}
{{- "policy/v1beta1" }}
{{- end }}
{{- end }}

{{/* The kube-scheduler image: its tag defaults to the cluster's vMAJOR.MINOR.0. */}}
{{- define "runway.schedulerImage" -}}
{{- $tag := .Values.scheduler.image.tag }}
{{- if not $tag }}
{{- $tag = printf "v%s.%s.0" .Capabilities.KubeVersion.Major (trimSuffix "+" .Capabilities.KubeVersion.Minor) }}
{{- end }}
{{- printf "%s:%s" .Values.scheduler.image.repository $tag }}
{{- end }}

{{/* A probe from values, with the scheme set to HTTPS when runway serves TLS. */}}
{{- define "runway.probe" -}}
{{- $probe := deepCopy .probe }}
{{- $mtls := dig "server" "tls" "requireClientCert" false .root.Values.config }}
{{- if and $probe.httpGet $mtls }}
{{- /* kubelet's HTTPS probes present no client certificate: with mutual TLS a probe can only
     check that the port accepts connections. */}}
{{- $port := $probe.httpGet.port }}
{{- $_ := unset $probe "httpGet" }}
{{- $_ := set $probe "tcpSocket" (dict "port" $port) }}
{{- else if and $probe.httpGet .root.Values.tls.enabled }}
{{- $_ := set $probe.httpGet "scheme" "HTTPS" }}
{{- end }}
{{- toYaml $probe }}
{{- end }}

{{/* The Lease runway's replicas elect a leader on (config kubernetes.leaderElection). */}}
{{- define "runway.leaseName" -}}
{{- dig "kubernetes" "leaderElection" "leaseName" "runway" .Values.config }}
{{- end }}

{{- define "runway.leaseNamespace" -}}
{{- dig "kubernetes" "leaderElection" "leaseNamespace" .Release.Namespace .Values.config | default .Release.Namespace }}
{{- end }}
