{{- /*
Helpers of the public routes (templates/routes/*). The api Service ai-models-api (port http, 80)
serves three public entry points, published on one host, <publicDomainTemplate with "ai-models">:
- the catalog-import API under /api/catalog-import/v1 and its contract at /openapi.json;
- the serving API under /api/serving/v1;
- the upload API under /api/upload/v1 (large bodies, long transfers: its own route/Ingress).
Either the Gateway API (a ListenerSet on the resolved Gateway plus HTTPRoutes) or Ingress is used,
never both. Nothing renders without global.modules.publicDomainTemplate.
*/ -}}

{{- /* "true" when the public routes render: global.modules.publicDomainTemplate is set and the
HTTPS mode can be served. CertManager mode (module, else global: Deckhouse's global default) without
the cert-manager module is the one mode that cannot; ai_models.https_mode fails on it, so the routes
(and the controller's public upload URL) are left out instead of failing the whole module.
Usage: if (include "ai_models.routes_enabled" .) */ -}}
{{- define "ai_models.routes_enabled" -}}
{{- $global := .Values.global | default dict -}}
{{- $moduleValues := index .Values (include "ai_models.module_camelcase_name" .) | default dict -}}
{{- $mode := dig "https" "mode" "" $moduleValues | default (dig "modules" "https" "mode" "" $global) -}}
{{- $certManager := has "cert-manager" ($global.enabledModules | default list) -}}
{{- if and (dig "modules" "publicDomainTemplate" "" $global) (or (ne $mode "CertManager") $certManager) -}}true{{- end -}}
{{- end -}}

{{- /* "true" when the routes go through the Gateway API, "" when through Ingress.
Usage: if (include "ai_models.routes_via_gateway" .) */ -}}
{{- define "ai_models.routes_via_gateway" -}}
{{- if eq (include "ai_models.gateway_enabled" .) "true" -}}true{{- end -}}
{{- end -}}

{{- /* Public host of the module. Usage: include "ai_models.routes_host" . */ -}}
{{- define "ai_models.routes_host" -}}
{{- include "ai_models.public_domain" (list . "ai-models") -}}
{{- end -}}

{{- /* Name of the module's ListenerSet. Usage: include "ai_models.routes_listener_set_name" . */ -}}
{{- define "ai_models.routes_listener_set_name" -}}
ai-models
{{- end -}}

{{- /* Name of the ListenerSet's listener: "https" when it terminates TLS, else "http".
Usage: include "ai_models.routes_listener_name" . */ -}}
{{- define "ai_models.routes_listener_name" -}}
{{- if include "ai_models.https_route_tls_enabled" . -}}https{{- else -}}http{{- end -}}
{{- end -}}

{{- /* TLS Secret of the public host: the Ingress one ("ai-models-ingress-tls") or, behind the
Gateway, its own cert-manager Secret ("ai-models-gateway-tls"); a custom certificate is copied once
(ai-models-ingress-tls-customcertificate) and shared. Only in the modes with TLS.
Usage: include "ai_models.routes_tls_secret_name" . */ -}}
{{- define "ai_models.routes_tls_secret_name" -}}
{{- if include "ai_models.routes_via_gateway" . -}}
{{- include "ai_models.https_secret_name" (list . "ai-models-ingress-tls" "ai-models-gateway-tls") -}}
{{- else -}}
{{- include "ai_models.https_secret_name" (list . "ai-models-ingress-tls") -}}
{{- end -}}
{{- end -}}
