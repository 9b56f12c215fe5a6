{{- /*
Helpers of the public routes (templates/routes/*). The api Service ai-models-api (port http, 80)
serves three public entry points, published on one host, <publicDomainTemplate with "ai-models">:
- the catalog-import API under /api/catalog-import/v1 and its contract at /openapi.json;
- the serving API under /api/serving/v1;
- the upload API under /api/upload/v1 (large bodies, long transfers: its own route/Ingress).

Whenever the routes render (global.modules.publicDomainTemplate is set), the Ingresses render:
ai-models (catalog, contract, serving) and ai-models-upload. When the Gateway API is enabled, a
Gateway resolves and the cluster serves ListenerSet and HTTPRoute (ai_models.gateway_enabled), the
module's ListenerSet on that Gateway and the HTTPRoutes ai-models-catalog, ai-models-serving and
ai-models-upload render next to the Ingresses, for the same host and paths.

Each Ingress carries the `app` label of the HTTPRoutes that serve its paths (DMT httproute-rules):
  app ai-models         Ingress ai-models         HTTPRoutes ai-models-catalog, ai-models-serving
  app ai-models-upload  Ingress ai-models-upload  HTTPRoute ai-models-upload
The ListenerSet and the Certificates carry app ai-models.

TLS (CertManager and CustomCertificate modes; none in Disabled and OnlyInURI):
- CertManager: the Ingresses use the Secret ai-models-ingress-tls, the ListenerSet its own Secret
  ai-models-httproute-tls; one cert-manager Certificate per Secret in use (the httproute one only
  with the Gateway side).
- CustomCertificate: the certificate copied from d8-system by hooks/copy_custom_certificate.py is
  rendered once, as ai-models-ingress-tls-customcertificate, and shared by both sides.

CertManager mode (module, else global) without the cert-manager module fails the render with the
fix (templates/validation.yaml, through ai_models.https_mode), like lib-helm does.
*/ -}}

{{- /* "true" when the public routes render: global.modules.publicDomainTemplate is set. The HTTPS
mode is checked by ai_models.https_mode (called by every route template and by
templates/validation.yaml), which fails the render on a mode that cannot be served.
Usage: if (include "ai_models.routes_enabled" .) */ -}}
{{- define "ai_models.routes_enabled" -}}
{{- if dig "modules" "publicDomainTemplate" "" (.Values.global | default dict) -}}true{{- end -}}
{{- end -}}

{{- /* "true" when the Gateway side (ListenerSet and HTTPRoutes) renders next to the Ingresses: the
routes render and ai_models.gateway_enabled. Usage: if (include "ai_models.routes_gateway_enabled" .) */ -}}
{{- define "ai_models.routes_gateway_enabled" -}}
{{- if and (include "ai_models.routes_enabled" .) (eq (include "ai_models.gateway_enabled" .) "true") -}}true{{- end -}}
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

{{- /* TLS Secret of the Ingresses: ai-models-ingress-tls (CertManager) or the copied
ai-models-ingress-tls-customcertificate (CustomCertificate). Only in the modes with TLS.
Usage: include "ai_models.routes_ingress_tls_secret_name" . */ -}}
{{- define "ai_models.routes_ingress_tls_secret_name" -}}
{{- include "ai_models.https_secret_name" (list . "ai-models-ingress-tls") -}}
{{- end -}}

{{- /* TLS Secret of the ListenerSet's HTTPS listener: its own ai-models-httproute-tls (CertManager)
or the same copied ai-models-ingress-tls-customcertificate as the Ingresses (CustomCertificate).
Only in the modes with TLS. Usage: include "ai_models.routes_gateway_tls_secret_name" . */ -}}
{{- define "ai_models.routes_gateway_tls_secret_name" -}}
{{- include "ai_models.https_secret_name" (list . "ai-models-ingress-tls" "ai-models-httproute-tls") -}}
{{- end -}}
