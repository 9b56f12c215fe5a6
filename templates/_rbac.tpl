{{- /* ===== Role model of the experimental RBAC (rbacv2) ======================================
Deckhouse 1.78 replaced the legacy `use`/`manage` objects with capabilities
(deckhouse modules/140-user-authz/docs/internal/RBACV2_MODULE_MIGRATION.md). On 1.78 a legacy
`use` object is aggregated into the cluster-scoped kubernetes subsystem, i.e. granted in every
namespace; before 1.78 nothing aggregates a capability. So the templates in templates/rbacv2/
render one model or the other, chosen here from global.deckhouseVersion (see D123). */ -}}

{{- /* "true" when the capability model of Deckhouse 1.78+ is to be rendered, "" for the legacy
use/manage model. global.deckhouseVersion is the content of the platform's /deckhouse/version
("v1.78.0"; "dev" on development builds; "unknown" when the file is missing). A release version
(with or without "v", pre-releases included) below 1.78 selects the legacy model; anything that is
not a version (dev, unknown, absent) selects the capability model: it is the newest, and it fails
closed (on an older platform nothing aggregates it, while the legacy model on 1.78 would grant
namespaced rights cluster-wide). Usage: if include "ai_models.rbac_capability_model" . */ -}}
{{- define "ai_models.rbac_capability_model" -}}
{{- $version := dig "deckhouseVersion" "" (.Values.global | default dict) | toString | trim -}}
{{- if regexMatch "^v?[0-9]+\\.[0-9]+(\\.[0-9]+)?([-+][0-9A-Za-z.+-]*)?$" $version -}}
{{- if semverCompare ">=1.78.0-0" $version -}}true{{- end -}}
{{- else -}}true{{- end -}}
{{- end -}}

{{- /* The RBAC subsystem the module's system (manage) capabilities aggregate into; module.yaml
`subsystems` names the same one (the platform aggregates a system capability into every subsystem
the module declares). */ -}}
{{- define "ai_models.rbac_subsystem" -}}kubernetes{{- end -}}

{{- /* metadata (name, labels, annotations) of a capability of the 1.78 model.
Usage: include "ai_models.rbac_capability_metadata" (list . "namespace"|"system" "view"|"edit")
The namespace capabilities aggregate into the namespace roles (view as viewer, edit as manager,
the level of the platform's own workload-editing capability); the system capabilities into the
module's subsystem, and name the module namespace (the platform binds subsystem role holders
there). Titles and descriptions use the platform's conventional wording. */ -}}
{{- define "ai_models.rbac_capability_metadata" -}}
{{- $ctx := index . 0 -}}
{{- $scope := index . 1 -}}
{{- $action := index . 2 -}}
{{- $module := $ctx.Chart.Name -}}
{{- $level := ternary "viewer" "manager" (eq $action "view") -}}
{{- $labels := dict
      "rbac.deckhouse.io/kind" "capability"
      "rbac.deckhouse.io/scope" $scope
      "rbac.deckhouse.io/capability" (printf "%s-capability.%s.%s" $scope $module $action) -}}
{{- if eq $scope "namespace" -}}
{{- $_ := set $labels "rbac.deckhouse.io/aggregate-to-namespace-as" $level -}}
{{- else -}}
{{- $_ := set $labels (printf "rbac.deckhouse.io/aggregate-to-%s-as" (include "ai_models.rbac_subsystem" $ctx)) $level -}}
{{- $_ := set $labels "rbac.deckhouse.io/namespace" (include "ai_models.module_namespace" $ctx) -}}
{{- end -}}
{{- $texts := dict
      "namespace/view" (list
        (printf "Module %s: view" $module) (printf "Модуль %s: просмотр" $module)
        (printf "Read-only access to %s resources in a namespace." $module)
        (printf "Доступ только на чтение к ресурсам модуля %s в пространстве имён." $module))
      "namespace/edit" (list
        (printf "Module %s: edit" $module) (printf "Модуль %s: редактирование" $module)
        (printf "Manage %s resources in a namespace." $module)
        (printf "Управление ресурсами модуля %s в пространстве имён." $module))
      "system/view" (list
        (printf "Module %s: view configuration" $module) (printf "Модуль %s: просмотр конфигурации" $module)
        (printf "Read-only access to the %s module configuration." $module)
        (printf "Доступ только на чтение к конфигурации модуля %s." $module))
      "system/edit" (list
        (printf "Module %s: edit configuration" $module) (printf "Модуль %s: управление конфигурацией" $module)
        (printf "Manage the %s module configuration." $module)
        (printf "Управление конфигурацией модуля %s." $module)) -}}
{{- $text := index $texts (printf "%s/%s" $scope $action) -}}
name: {{ printf "d8:%s-capability:%s:%s" $scope $module $action }}
{{ include "ai_models.module_labels" (list $ctx $labels) }}
annotations:
  en.meta.deckhouse.io/title: {{ index $text 0 | quote }}
  ru.meta.deckhouse.io/title: {{ index $text 1 | quote }}
  en.meta.deckhouse.io/description: {{ index $text 2 | quote }}
  ru.meta.deckhouse.io/description: {{ index $text 3 | quote }}
{{- end -}}
