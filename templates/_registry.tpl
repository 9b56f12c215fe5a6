{{- /* ===== Module registry pull secret ======================================================== */ -}}

{{- /* The docker config JSON (base64) of the module's pull secret, templates/registry-secret.yaml.
Every pod of the module names that Secret in imagePullSecrets, and the controller copies it beside
each materialize Job, so it always renders; this picks what it holds (D129):
- aiModels.registry.dockercfg, what Deckhouse injects for a module from a ModuleSource (since
  deckhouse/deckhouse#10210 also for an anonymous source, as {"auths":{"<host>":{}}});
- without it, when aiModels.registry.base is not set either, the images come from the global modules
  registry (ai_models.module_image), so global.modulesImages.registry.dockercfg;
- otherwise an anonymous config for the registry host the images come from, the form Deckhouse
  generates itself ({"auths":{}} when no registry is known at all).
Reads aiModels.registry.{base,dockercfg} and global.modulesImages.registry.{base,dockercfg}.
Usage: include "ai_models.registry_dockercfg" . */ -}}
{{- define "ai_models.registry_dockercfg" -}}
{{- $registry := .Values.aiModels.registry | default dict -}}
{{- $global := .Values.global | default dict -}}
{{- $dockercfg := $registry.dockercfg | default "" -}}
{{- $base := $registry.base | default "" -}}
{{- if not $base -}}
  {{- $base = dig "modulesImages" "registry" "base" "" $global -}}
  {{- if not $dockercfg -}}
    {{- $dockercfg = dig "modulesImages" "registry" "dockercfg" "" $global -}}
  {{- end -}}
{{- end -}}
{{- if not $dockercfg -}}
  {{- /* The host is the base's first path element (registry.example.com:5000/modules -> registry.example.com:5000). */ -}}
  {{- $host := regexReplaceAll "/.*$" (regexReplaceAll "^[a-zA-Z][a-zA-Z0-9+.-]*://" $base "") "" -}}
  {{- $auths := dict -}}
  {{- if $host -}}
    {{- $_ := set $auths $host dict -}}
  {{- end -}}
  {{- $dockercfg = dict "auths" $auths | toJson | b64enc -}}
{{- end -}}
{{- $dockercfg -}}
{{- end -}}
