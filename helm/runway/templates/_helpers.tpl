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

{{/* The KubeSchedulerConfiguration apiVersion of the bundled scheduler: scheduler.configApiVersion
when set, else the one the scheduler's release reads (v1 from 1.25, v1beta3 1.23-1.24, v1beta2
1.22, v1beta1 before), that release read from scheduler.image.tag (the binary that reads the
config), or from the cluster's version (.Capabilities.KubeVersion) when the tag is no version. */}}
{{- define "runway.schedulerConfigApiVersion" -}}
{{- $s := .Values.scheduler }}
{{- if $s.configApiVersion }}
{{- $s.configApiVersion }}
{{- else }}
{{- $release := .Capabilities.KubeVersion.Version }}
{{- $tag := toString $s.image.tag }}
{{- if regexMatch "^v?[0-9]+\\.[0-9]+" $tag }}
{{- $release = regexFind "^v?[0-9]+\\.[0-9]+(\\.[0-9]+)?" $tag }}
{{- end }}
{{- if semverCompare ">=1.25-0" $release }}
{{- "kubescheduler.config.k8s.io/v1" }}
{{- else if semverCompare ">=1.23-0" $release }}
{{- "kubescheduler.config.k8s.io/v1beta3" }}
{{- else if semverCompare ">=1.22-0" $release }}
{{- "kubescheduler.config.k8s.io/v1beta2" }}
{{- else }}
{{- "kubescheduler.config.k8s.io/v1beta1" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The kube-scheduler image: the tag comes from values only (never .Capabilities, which
offline renderers such as GitOps tools fill with their own version). */}}
{{- define "runway.schedulerImage" -}}
{{- printf "%s:%s" .Values.scheduler.image.repository (required "scheduler.image.tag is required: your control plane's version" .Values.scheduler.image.tag) }}
{{- end }}

{{/* A probe from values: an httpGet goes to the plain-HTTP health port when there is one (it
answers /healthz and /readyz from runway's caches, whatever TLS the main port requires); else
to the main port, with the scheme set to HTTPS when runway serves TLS. */}}
{{- define "runway.probe" -}}
{{- $probe := deepCopy .probe }}
{{- $mtls := or (include "runway.mtls" .root) (dig "server" "tls" "requireClientCert" false .root.Values.config) }}
{{- if and $probe.httpGet (include "runway.healthPort" .root) }}
{{- $_ := set $probe.httpGet "port" "health" }}
{{- $_ := set $probe.httpGet "scheme" "HTTP" }}
{{- else if and $probe.httpGet $mtls }}
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

{{/* The plain-HTTP health port (config server.healthPort, else the healthPort value); empty
when there is none. */}}
{{- define "runway.healthPort" -}}
{{- $port := dig "server" "healthPort" .Values.healthPort .Values.config }}
{{- if $port }}{{ $port }}{{ end }}
{{- end }}

{{/* The extender's ignorable for a mode ("bundled" or "own"): the value when set, else false
for the bundled second scheduler (only opted-in pods wait on runway) and true for the
cluster's own scheduler (false deadlocks it while no replica answers: runway's own
replacement pods could never be scheduled). */}}
{{- define "runway.ignorable" -}}
{{- $set := .root.Values.scheduler.extender.ignorable }}
{{- if kindIs "bool" $set }}{{ $set }}{{ else }}{{ eq .mode "own" }}{{ end }}
{{- end }}

{{/* The extender URL for a scheduler outside the cluster's DNS (kubeadm's host-network static
pod): the fixed service.clusterIP when set, else the Service's DNS name. */}}
{{- define "runway.hostExtenderURL" -}}
{{- if .Values.service.clusterIP }}
{{- $prefix := dig "server" "urlPrefix" "/scheduler" .Values.config }}
{{- printf "%s://%s:%v%s" (include "runway.scheme" .) .Values.service.clusterIP .Values.service.port $prefix }}
{{- else }}
{{- include "runway.extenderURL" . }}
{{- end }}
{{- end }}

{{/* The Lease runway's replicas elect a leader on: config kubernetes.leaderElection.leaseName,
else the release's full name (two releases never share a Lease). */}}
{{- define "runway.leaseName" -}}
{{- dig "kubernetes" "leaderElection" "leaseName" (include "runway.fullname" .) .Values.config }}
{{- end }}

{{- define "runway.leaseNamespace" -}}
{{- dig "kubernetes" "leaderElection" "leaseNamespace" .Release.Namespace .Values.config | default .Release.Namespace }}
{{- end }}

{{/* Where the certificates come from: "" (no TLS), "secret" (tls.secretName, the operator's),
"cert-manager" or "helm" (genCA/genSignedCert). */}}
{{- define "runway.tlsSource" -}}
{{- if and .Values.tls.enabled .Values.tls.secretName .Values.certManager.enabled }}
{{- fail "certManager.enabled and tls.secretName are exclusive: use your own Secret (tls.secretName) or cert-manager's (certManager.enabled), not both" }}
{{- end }}
{{- if .Values.tls.enabled }}
{{- if .Values.tls.secretName }}secret{{ else if .Values.certManager.enabled }}cert-manager{{ else }}helm{{ end }}
{{- end }}
{{- end }}

{{/* The server certificate's Secret (tls.crt, tls.key, ca.crt). */}}
{{- define "runway.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "runway.fullname" . | trunc 59 | trimSuffix "-")) .Values.tls.secretName }}
{{- end }}

{{/* The client certificate's Secret (kube-scheduler, Prometheus); empty when there is none. */}}
{{- define "runway.clientSecretName" -}}
{{- if .Values.tls.enabled }}
{{- if .Values.tls.secretName }}
{{- .Values.tls.clientCertSecretName }}
{{- else }}
{{- default (printf "%s-client-tls" (include "runway.fullname" . | trunc 52 | trimSuffix "-")) .Values.tls.clientCertSecretName }}
{{- end }}
{{- end }}
{{- end }}

{{/* "true" when runway requires client certificates (mutual TLS), else empty. */}}
{{- define "runway.mtls" -}}
{{- if and .Values.tls.enabled .Values.tls.requireClientCert }}true{{ end }}
{{- end }}

{{/* DNS names on the server certificate. */}}
{{- define "runway.dnsNames" -}}
{{- $name := include "runway.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $names := list $name (printf "%s.%s" $name $ns) (printf "%s.%s.svc" $name $ns) (printf "%s.%s.svc.cluster.local" $name $ns) }}
{{- with .Values.tls.serverName }}{{ $names = append $names . | uniq }}{{ end }}
{{- toJson $names }}
{{- end }}

{{/* "true" when runway's effective auth mode is kubernetes (TokenReview + SubjectAccessReview):
auth.mode kubernetes, or auto without static tokens (a pod has cluster access). */}}
{{- define "runway.authKubernetes" -}}
{{- $mode := dig "auth" "mode" "auto" .Values.config }}
{{- $static := or (dig "auth" "staticTokens" list .Values.config) (dig "auth" "staticTokenFile" "" .Values.config) }}
{{- if or (eq $mode "kubernetes") (and (eq $mode "auto") (not $static)) }}true{{ end }}
{{- end }}

{{/* The config file: .Values.config plus what the chart decides (server.tls from tls.*,
logging from logLevel/logFormat, the Lease name). */}}
{{- define "runway.config" -}}
{{- $config := deepCopy .Values.config }}
{{- if .Values.tls.enabled }}
{{- /* The same files as the --tls-cert-file/--tls-key-file flags: the config file must name
     them too, or clientCAFile is refused (it needs certFile). */}}
{{- $server := default dict $config.server }}
{{- $tls := default dict $server.tls }}
{{- $_ := set $tls "certFile" "/etc/runway/tls/tls.crt" }}
{{- $_ := set $tls "keyFile" "/etc/runway/tls/tls.key" }}
{{- if include "runway.mtls" . }}
{{- $_ := set $tls "clientCAFile" "/etc/runway/tls/ca.crt" }}
{{- $_ := set $tls "requireClientCert" true }}
{{- end }}
{{- $_ := set $server "tls" $tls }}
{{- $_ := set $config "server" $server }}
{{- end }}
{{- if or .Values.logLevel .Values.logFormat }}
{{- $logging := default dict $config.logging }}
{{- with .Values.logLevel }}{{ $_ := set $logging "level" . }}{{ end }}
{{- with .Values.logFormat }}{{ $_ := set $logging "format" . }}{{ end }}
{{- $_ := set $config "logging" $logging }}
{{- end }}
{{- $kube := default dict $config.kubernetes }}
{{- $election := default dict $kube.leaderElection }}
{{- if and .Values.tls.enabled (not $election.forwardCAFile) }}
{{- /* a follower forwards preempt to the leader over HTTPS: the chart's CA verifies it */}}
{{- $_ := set $election "forwardCAFile" "/etc/runway/tls/ca.crt" }}
{{- end }}
{{- if not $election.leaseName }}
{{- $_ := set $election "leaseName" (include "runway.fullname" .) }}
{{- end }}
{{- $_ := set $kube "leaderElection" $election }}
{{- $_ := set $config "kubernetes" $kube }}
{{- with .Values.healthPort }}
{{- $server := default dict $config.server }}
{{- if not (hasKey $server "healthPort") }}
{{- $_ := set $server "healthPort" . }}
{{- $_ := set $config "server" $server }}
{{- end }}
{{- end }}
{{- /* runway never preempts its own release's pods (the extender and the bundled scheduler),
     even where protectOwnNamespace is off (app/policy/shield.py). */}}
{{- $shield := default dict $config.preemption }}
{{- if not (hasKey $shield "protectedPodLabels") }}
{{- $_ := set $shield "protectedPodLabels" (dict "app.kubernetes.io/name" (include "runway.name" .) "app.kubernetes.io/instance" .Release.Name) }}
{{- $_ := set $config "preemption" $shield }}
{{- end }}
{{- if .Values.scheduler.enabled }}
{{- /* A preemptor of the bundled scheduler must pass the preemption cross-check (SPEC §4). */}}
{{- /* Bundled mode manages the bundled scheduler's pods only (DESIGN §2.0): the cluster's
     default-scheduler never calls runway, and its pods are not runway's to hold or evict. */}}
{{- $pre := default dict $config.preemption }}
{{- $names := default (list .Values.scheduler.schedulerName) $pre.schedulerNames }}
{{- if not (has .Values.scheduler.schedulerName $names) }}
{{- $names = append $names .Values.scheduler.schedulerName }}
{{- end }}
{{- $_ := set $pre "schedulerNames" $names }}
{{- $_ := set $config "preemption" $pre }}
{{- end }}
{{- /* runway manages no pod of kube-system or of its own namespace (app/policy/scope.py does
     so on every release; the selector says so where kubernetes.io/metadata.name exists, 1.21+). */}}
{{- $scope := default dict $config.scope }}
{{- if not (hasKey $scope "namespaceSelector") }}
{{- $_ := set $scope "namespaceSelector" (dict "matchExpressions" (list (dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" (list "kube-system" .Release.Namespace)))) }}
{{- $_ := set $config "scope" $scope }}
{{- end }}
{{- if .Values.rest.enabled }}
{{- /* The REST port asks for no client certificate: unless the config says otherwise, reads
     there need a token too (people's is forwarded by kubectl runway; docs/security.md). */}}
{{- $auth := default dict $config.auth }}
{{- if not (hasKey $auth "protectReadOnly") }}
{{- $_ := set $auth "protectReadOnly" true }}
{{- $_ := set $config "auth" $auth }}
{{- end }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/* The ServiceAccount (and its token Secret) Prometheus scrapes a protected /metrics with. */}}
{{- define "runway.metricsReaderName" -}}
{{- printf "%s-metrics-reader" (include "runway.fullname" . | trunc 48 | trimSuffix "-") }}
{{- end }}

{{/* Mutual TLS needs a client certificate for the chart's own clients (the bundled scheduler,
the ServiceMonitor). */}}
{{- define "runway.requireClientSecret" -}}
{{- if and (include "runway.mtls" .) (not (include "runway.clientSecretName" .)) }}
{{- fail "tls.requireClientCert with your own tls.secretName: set tls.clientCertSecretName (the client certificate the bundled scheduler and the ServiceMonitor present), or tls.requireClientCert=false" }}
{{- end }}
{{- end }}

{{/*
"true" when kube-scheduler must call the prioritize verb (app/config/prioritize.py, `needed`):
prioritize.poolPreference (unset: on with waitForPodsReady enabled — a block without `enable`
is enabled, the v1beta2 shape) or prioritize.locality. Otherwise the stanzas leave
prioritizeVerb out: one call per scheduling cycle fewer (issue #29).
*/}}
{{- define "runway.prioritizeNeeded" -}}
{{- $c := .Values.config | default dict -}}
{{- $p := $c.prioritize | default dict -}}
{{- $w := $c.waitForPodsReady -}}
{{- $pods := false -}}
{{- if kindIs "map" $w -}}
{{- $pods = ne (toString (dig "enable" "unset" $w)) "false" -}}
{{- end -}}
{{- $pool := $pods -}}
{{- if not (kindIs "invalid" $p.poolPreference) -}}
{{- $pool = $p.poolPreference -}}
{{- end -}}
{{- if or $pool $p.locality -}}true{{- end -}}
{{- end }}


{{/* The chart's generated CA (tls source "helm") as JSON {crt, key: base64 PEM, new: bool}: read
back from its Secret on a live install, else generated — once per render, shared by every
template that needs it (tls-secrets.yaml signs with it, the bundled scheduler's Deployment hashes
it): templates of one chart share .Values, where it is kept under a private key. */}}
{{- define "runway.generatedCA" -}}
{{- if not (hasKey .Values "__runwayGeneratedCA") }}
{{- $caName := printf "%s-ca" (include "runway.fullname" . | trunc 60 | trimSuffix "-") }}
{{- $caSecret := lookup "v1" "Secret" .Release.Namespace $caName }}
{{- if and $caSecret (hasKey (default dict $caSecret.data) "tls.key") }}
{{- $_ := set .Values "__runwayGeneratedCA" (dict "crt" (index $caSecret.data "tls.crt") "key" (index $caSecret.data "tls.key") "new" false) }}
{{- else }}
{{- $ca := genCA (printf "%s-ca" (include "runway.fullname" .)) (int .Values.tls.generatedValidityDays) }}
{{- $_ := set .Values "__runwayGeneratedCA" (dict "crt" ($ca.Cert | b64enc) "key" ($ca.Key | b64enc) "new" true) }}
{{- end }}
{{- end }}
{{- toJson (get .Values "__runwayGeneratedCA") }}
{{- end }}

{{/* "true" when the chart registers runway's gate webhook (admissionWebhook.enabled: auto =
the cluster has scheduling gates, 1.30+; off with config admission.schedulingGates: false). */}}
{{- define "runway.gateWebhook" -}}
{{- $on := .Values.admissionWebhook.enabled }}
{{- if eq (toString $on) "auto" }}
{{- $on = semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version }}
{{- end }}
{{- if and $on (ne (toString (dig "admission" "schedulingGates" "auto" .Values.config)) "false") }}true{{ end }}
{{- end }}

{{/* Why the gate webhook cannot be registered as the values stand (empty: it can). */}}
{{- define "runway.gateWebhookMissing" -}}
{{- if not .Values.tls.enabled -}}
it needs tls.enabled: kube-apiserver calls webhooks over HTTPS only
{{- else if and (include "runway.mtls" .) (not .Values.rest.enabled) -}}
it needs rest.enabled with tls.requireClientCert: kube-apiserver presents no client certificate, and the REST port asks for none
{{- else if and (eq (include "runway.tlsSource" .) "secret") (not .Values.admissionWebhook.caBundle) -}}
with your own tls.secretName, set admissionWebhook.caBundle: the base64 PEM of the CA that signed it (kube-apiserver verifies runway's certificate with it)
{{- end }}
{{- end }}

{{/* The CAs of a Helm-generated install across a CA rotation (tls.caRotation, docs/deploy.md
"Rotating the CA"), as JSON: signing {crt, key} (signs the server and client certificates; the
-ca Secret), trust (base64 PEM: ca.crt of both Secrets, what runway and kube-scheduler trust),
next {crt, key} (the -ca-next Secret while preparing), previous (base64 PEM: the -ca-previous
Secret after the switch), and new (the signing CA was made by this render).
  ""        signing = the CA; trust = it alone (the -ca-next/-ca-previous Secrets are removed)
  prepare   a new CA is made (kept in -ca-next); trust = new + current; signing unchanged
  switch    the new CA signs (moved to -ca; the old one kept in -ca-previous); trust = new + old
Steady state trust is the CA's own base64, byte for byte, so an upgrade restarts nothing. */}}
{{- define "runway.caState" -}}
{{- if not (hasKey .Values "__runwayCAState") }}
{{- $base := include "runway.fullname" . | trunc 60 | trimSuffix "-" }}
{{- $ns := .Release.Namespace }}
{{- $cur := include "runway.generatedCA" . | fromJson }}
{{- $phase := .Values.tls.caRotation | default "" }}
{{- $state := dict "signing" (dict "crt" $cur.crt "key" $cur.key) "trust" $cur.crt "new" $cur.new }}
{{- $bundle := list }}
{{- if eq $phase "prepare" }}
{{- $nextSecret := lookup "v1" "Secret" $ns (printf "%s-ca-next" $base) }}
{{- $next := dict }}
{{- if and $nextSecret (hasKey (default dict $nextSecret.data) "tls.key") }}
{{- $next = dict "crt" (index $nextSecret.data "tls.crt") "key" (index $nextSecret.data "tls.key") }}
{{- else }}
{{- $ca := genCA (printf "%s-ca" (include "runway.fullname" .)) (int .Values.tls.generatedValidityDays) }}
{{- $next = dict "crt" ($ca.Cert | b64enc) "key" ($ca.Key | b64enc) }}
{{- end }}
{{- $_ := set $state "next" $next }}
{{- $bundle = list $next.crt $cur.crt }}
{{- else if eq $phase "switch" }}
{{- $nextSecret := lookup "v1" "Secret" $ns (printf "%s-ca-next" $base) }}
{{- $prevSecret := lookup "v1" "Secret" $ns (printf "%s-ca-previous" $base) }}
{{- if and $nextSecret (hasKey (default dict $nextSecret.data) "tls.key") (not $cur.new) }}
{{- $_ := set $state "signing" (dict "crt" (index $nextSecret.data "tls.crt") "key" (index $nextSecret.data "tls.key")) }}
{{- $_ := set $state "previous" $cur.crt }}
{{- else if and $prevSecret (hasKey (default dict $prevSecret.data) "ca.crt") (not $cur.new) }}
{{- $_ := set $state "previous" (index $prevSecret.data "ca.crt") }}
{{- else }}
{{- fail "tls.caRotation=switch: there is no new CA to switch to: upgrade with tls.caRotation=prepare first and wait until every replica trusts it (docs/deploy.md, Rotating the CA); a switch needs the live cluster (lookup), not helm template" }}
{{- end }}
{{- $bundle = list $state.signing.crt $state.previous }}
{{- else if $phase }}
{{- fail (printf "tls.caRotation: %q is not one of \"\", prepare, switch (docs/deploy.md, Rotating the CA)" $phase) }}
{{- end }}
{{- if $bundle }}
{{- $pems := list }}
{{- range $bundle }}{{- $pems = append $pems (b64dec . | trim) }}{{- end }}
{{- $_ := set $state "trust" (printf "%s\n" (join "\n" $pems) | b64enc) }}
{{- end }}
{{- $_ := set .Values "__runwayCAState" $state }}
{{- end }}
{{- toJson (get .Values "__runwayCAState") }}
{{- end }}
