{{- /* ===== Egress proxy ========================================================================

The cluster's HTTP(S) proxy (global.clusterConfiguration.proxy, set by the admin in Deckhouse's
ClusterConfiguration) as the environment of the module processes that call outside the cluster:
catalog indexing and publication call the Hugging Face endpoint, and every process with
ai_models.process_env (controller, api, publication Jobs) talks to the object store, so that helper
includes it. The materialize Job and the NodeCache plugin read only the api Service and get none:
their client never uses a proxy, and NO_PROXY would carry the object store's address into the
workload's namespace. The same shape lib-helm's helm_lib_envs_for_proxy renders (see D125), with
the additions this module needs. */ -}}

{{- /* NO_PROXY's entries, comma-separated: loopback; the cluster domain and `.svc` (the module's
own in-cluster URLs are short names such as ai-models-api.d8-ai-models.svc); the pod and service
CIDRs (the kube API's KUBERNETES_SERVICE_HOST is an address in the service CIDR); the object
store's host (aiModels.artifacts.endpoint), listed by name because botocore matches NO_PROXY by
host suffix only and would send an endpoint inside a listed CIDR to the proxy); then the admin's
global.clusterConfiguration.proxy.noProxy. Duplicates dropped, order kept.
Usage: include "ai_models.no_proxy" . */ -}}
{{- define "ai_models.no_proxy" -}}
{{- $global := .Values.global | default dict -}}
{{- $cluster := $global.clusterConfiguration | default dict -}}
{{- $proxy := $cluster.proxy | default dict -}}
{{- $entries := list "127.0.0.1" "localhost" "::1" (include "ai_models.cluster_domain" .) ".svc" -}}
{{- range $cidr := list $cluster.podSubnetCIDR $cluster.serviceSubnetCIDR -}}
{{- if $cidr -}}{{- $entries = append $entries $cidr -}}{{- end -}}
{{- end -}}
{{- $endpoint := dig "artifacts" "endpoint" "" (.Values.aiModels | default dict) -}}
{{- if $endpoint -}}
{{- /* The host without port or IPv6 brackets: every client compares NO_PROXY with the bare host. */ -}}
{{- $host := regexReplaceAll ":[0-9]+$" (urlParse $endpoint).host "" | trimPrefix "[" | trimSuffix "]" -}}
{{- if $host -}}{{- $entries = append $entries $host -}}{{- end -}}
{{- end -}}
{{- range $entry := $proxy.noProxy | default list -}}
{{- $entries = append $entries $entry -}}
{{- end -}}
{{- $entries | uniq | join "," -}}
{{- end -}}

{{- /* `env` entries HTTP_PROXY, HTTPS_PROXY (each only when set) and NO_PROXY
(ai_models.no_proxy), each also in lower case with the same value, as lib-helm renders them:
tools read different spellings (curl takes plain-HTTP's proxy from `http_proxy` only, Python's
urllib and so botocore prefer the lower-case names, Go and httpx read both), and one value under
both names leaves none of them a different answer. Renders nothing unless
global.clusterConfiguration.proxy has httpProxy or httpsProxy: a NO_PROXY without a proxy
changes nothing. Renders list items, no `env:` key.
Usage: {{- with include "ai_models.envs_for_proxy" . }}{{ . | nindent 8 }}{{ end }} */ -}}
{{- define "ai_models.envs_for_proxy" -}}
{{- $proxy := dig "clusterConfiguration" "proxy" dict (.Values.global | default dict) | default dict -}}
{{- if or $proxy.httpProxy $proxy.httpsProxy -}}
{{- $noProxy := include "ai_models.no_proxy" . -}}
{{- with $proxy.httpProxy }}
- name: HTTP_PROXY
  value: {{ . | quote }}
- name: http_proxy
  value: {{ . | quote }}
{{- end }}
{{- with $proxy.httpsProxy }}
- name: HTTPS_PROXY
  value: {{ . | quote }}
- name: https_proxy
  value: {{ . | quote }}
{{- end }}
- name: NO_PROXY
  value: {{ $noProxy | quote }}
- name: no_proxy
  value: {{ $noProxy | quote }}
{{- end -}}
{{- end -}}
