{{- /*
Module helpers of ai-models.

deckhouse_lib_helm cannot be vendored into this module, so these helpers re-implement the lib-helm
behaviour the platform expects and read the same global values lib-helm reads
(global.modulesImages, global.discovery.*, global.modules.*, global.highAvailability,
global.enabledModules). They never hard-code cluster facts (domain, registry, node roles).

Conventions:
- A helper that takes more than the root context takes a list: (list . "arg" ...).
- Boolean helpers render "true" or nothing, so `if (include ...)` and `eq (include ...) "true"`
  both work.
- A helper that cannot produce a correct answer fails and names the value to fix.
*/ -}}


{{- /* ===== Module identity ===================================================================== */ -}}

{{- /* Module name in kebab case. Reads .Chart.Name. Usage: include "ai_models.module_name" . */ -}}
{{- define "ai_models.module_name" -}}
{{- .Chart.Name -}}
{{- end -}}

{{- /* Key of the module values ("aiModels"). Reads .Chart.Name. Usage: include "ai_models.module_camelcase_name" . */ -}}
{{- define "ai_models.module_camelcase_name" -}}
{{- .Chart.Name | replace "-" "_" | camelcase | untitle -}}
{{- end -}}

{{- /* Module namespace, d8-<module>. Reads .Chart.Name. Usage: include "ai_models.module_namespace" . */ -}}
{{- define "ai_models.module_namespace" -}}
{{- printf "d8-%s" .Chart.Name -}}
{{- end -}}

{{- /* `labels:` block: heritage: deckhouse, module: <chart name>, plus extra labels (the module
labels win over extras with the same key). Reads .Chart.Name.
Usage: include "ai_models.module_labels" (list . (dict "app" "controller")) | nindent 2 */ -}}
{{- define "ai_models.module_labels" -}}
{{- $ctx := index . 0 -}}
{{- $labels := dict "heritage" "deckhouse" "module" $ctx.Chart.Name -}}
{{- if gt (len .) 1 -}}
{{- $labels = merge $labels (index . 1) -}}
{{- end -}}
labels:
{{- toYaml $labels | nindent 2 }}
{{- end -}}


{{- /* ===== Images and registry =============================================================== */ -}}

{{- /* Image reference of a module image, as lib-helm's helm_lib_module_image builds it (D128):
- when Deckhouse renders the module as a package (the context carries .Module.Package):
  <.Module.Package.Registry.repository>/<.Module.Package.Name>@<.Module.Package.Digests.<image>>;
- otherwise <base>@<global.modulesImages.digests.<aiModels>.<image>>, the base being
  <aiModels.registry.base>/<module> for an external module and global.modulesImages.registry.base
  when that is not set.
Fails naming what is missing. Usage: include "ai_models.module_image" (list . "aiModels") */ -}}
{{- define "ai_models.module_image" -}}
{{- $ctx := index . 0 -}}
{{- $image := index . 1 -}}
{{- /* Field access as lib-helm does it: .Module is absent from a plain Helm render. */ -}}
{{- if and $ctx.Module $ctx.Module.Package -}}
{{- $package := $ctx.Module.Package -}}
{{- $repository := "" -}}
{{- with $package.Registry }}{{ $repository = .repository }}{{ end -}}
{{- if not $repository -}}
{{- fail (printf "image %q of module %s: the package has no registry (.Module.Package.Registry.repository is not set)" $image $ctx.Chart.Name) -}}
{{- end -}}
{{- if not $package.Name -}}
{{- fail (printf "image %q of module %s: the package has no name (.Module.Package.Name is not set)" $image $ctx.Chart.Name) -}}
{{- end -}}
{{- $packageDigest := "" -}}
{{- with $package.Digests }}{{ $packageDigest = index . $image }}{{ end -}}
{{- if not $packageDigest -}}
{{- fail (printf "image %q of module %s has no digest: .Module.Package.Digests.%s is not set" $image $ctx.Chart.Name $image) -}}
{{- end -}}
{{- printf "%s/%s@%s" (trimSuffix "/" $repository) $package.Name $packageDigest -}}
{{- else -}}
{{- $module := include "ai_models.module_camelcase_name" $ctx -}}
{{- $global := $ctx.Values.global | default dict -}}
{{- $digest := dig "modulesImages" "digests" $module $image "" $global -}}
{{- if not $digest -}}
{{- fail (printf "image %q of module %s has no digest: global.modulesImages.digests.%s.%s is not set" $image $ctx.Chart.Name $module $image) -}}
{{- end -}}
{{- $base := "" -}}
{{- $moduleBase := dig "registry" "base" "" (index $ctx.Values $module | default dict) -}}
{{- if $moduleBase -}}
{{- $base = printf "%s/%s" (trimAll "/" $moduleBase) $ctx.Chart.Name -}}
{{- else -}}
{{- $base = trimSuffix "/" (dig "modulesImages" "registry" "base" "" $global) -}}
{{- end -}}
{{- if not $base -}}
{{- fail (printf "no registry for image %q: set %s.registry.base or global.modulesImages.registry.base" $image $module) -}}
{{- end -}}
{{- printf "%s@%s" $base $digest -}}
{{- end -}}
{{- end -}}

{{- /* Image reference of a Deckhouse common image (kubeRbacProxy, csiNodeDriverRegistrar...).
Reads global.modulesImages.digests.common.<image> and global.modulesImages.registry.base.
Usage: include "ai_models.module_common_image" (list . "kubeRbacProxy") */ -}}
{{- define "ai_models.module_common_image" -}}
{{- $ctx := index . 0 -}}
{{- $image := index . 1 -}}
{{- $global := $ctx.Values.global | default dict -}}
{{- $digest := dig "modulesImages" "digests" "common" $image "" $global -}}
{{- if not $digest -}}
{{- fail (printf "common image %q has no digest: global.modulesImages.digests.common.%s is not set" $image $image) -}}
{{- end -}}
{{- $base := trimSuffix "/" (dig "modulesImages" "registry" "base" "" $global) -}}
{{- if not $base -}}
{{- fail (printf "no registry for common image %q: global.modulesImages.registry.base is not set" $image) -}}
{{- end -}}
{{- printf "%s@%s" $base $digest -}}
{{- end -}}

{{- /* Image reference of a module image, or nothing when the module has no digest for it (lib-helm's
helm_lib_module_image_no_fail): for an image a release may lack without failing the whole render.
The reference itself is ai_models.module_image's. Usage: include "ai_models.module_image_no_fail" (list . "aiModels") */ -}}
{{- define "ai_models.module_image_no_fail" -}}
{{- $ctx := index . 0 -}}
{{- $image := index . 1 -}}
{{- $digest := "" -}}
{{- if and $ctx.Module $ctx.Module.Package -}}
{{- with $ctx.Module.Package.Digests }}{{ $digest = index . $image }}{{ end -}}
{{- else -}}
{{- $digest = dig "modulesImages" "digests" (include "ai_models.module_camelcase_name" $ctx) $image "" ($ctx.Values.global | default dict) -}}
{{- end -}}
{{- if $digest }}{{ include "ai_models.module_image" . }}{{ end -}}
{{- end -}}

{{- /* Image reference of a common image, or nothing when the release has no digest for it (lib-helm's
helm_lib_module_common_image_no_fail). Usage: include "ai_models.module_common_image_no_fail" (list . "kubeRbacProxy") */ -}}
{{- define "ai_models.module_common_image_no_fail" -}}
{{- $ctx := index . 0 -}}
{{- if dig "modulesImages" "digests" "common" (index . 1) "" ($ctx.Values.global | default dict) -}}
{{- include "ai_models.module_common_image" . -}}
{{- end -}}
{{- end -}}

{{- /* The key of the node-driver-registrar CSI sidecar built for the cluster's Kubernetes minor, as
Deckhouse's CSI modules name it: csiNodeDriverRegistrar<major><minor> (1.34 -> csiNodeDriverRegistrar134).
Reads global.discovery.kubernetesVersion, then .Capabilities.KubeVersion.
Usage: include "ai_models.csi_node_driver_registrar_key" . */ -}}
{{- define "ai_models.csi_node_driver_registrar_key" -}}
{{- $version := dig "discovery" "kubernetesVersion" "" (.Values.global | default dict) | toString -}}
{{- if not $version -}}
{{- $version = .Capabilities.KubeVersion.Version -}}
{{- end -}}
{{- $semver := semver $version -}}
{{- printf "csiNodeDriverRegistrar%d%d" $semver.Major $semver.Minor -}}
{{- end -}}

{{- /* Image reference of the node-driver-registrar sidecar for the cluster's Kubernetes minor, with
the common fallback lib-helm's helm_lib_csi_image_with_common_fallback gives CSI modules (D162): the
module's own image of that key first (global.modulesImages.digests.aiModels, or the package's
digests), then the common one (global.modulesImages.digests.common). Nothing when neither exists:
the caller leaves the node plugin out and ai_models.node_cache_unavailable says why, so one missing
optional image never fails the release. Usage: include "ai_models.csi_node_driver_registrar_image" . */ -}}
{{- define "ai_models.csi_node_driver_registrar_image" -}}
{{- $key := include "ai_models.csi_node_driver_registrar_key" . -}}
{{- $image := include "ai_models.module_image_no_fail" (list . $key) -}}
{{- if not $image -}}
{{- $image = include "ai_models.module_common_image_no_fail" (list . $key) -}}
{{- end -}}
{{- $image -}}
{{- end -}}

{{- /* "true" when the cluster serves the kind "<group>/<version>/<Kind>" (.Capabilities.APIVersions,
which Deckhouse fills from the API server's discovery), or, where a render has no discovery (dmt,
helm template), when the module that serves it is enabled: global.enabledModules holds its name as
DKP 1.75+ fills it, or the `-crd` shim older releases and lib-helm key on. Decided by capability,
not by module name (issue 24, D156). Usage: include "ai_models.platform_serves" (list . "autoscaling.k8s.io/v1/VerticalPodAutoscaler" "vertical-pod-autoscaler") */ -}}
{{- define "ai_models.platform_serves" -}}
{{- $ctx := index . 0 -}}
{{- $kind := index . 1 -}}
{{- $module := index . 2 -}}
{{- $enabled := dig "enabledModules" list ($ctx.Values.global | default dict) -}}
{{- if or ($ctx.Capabilities.APIVersions.Has $kind) (has $module $enabled) (has (printf "%s-crd" $module) $enabled) -}}true{{- end -}}
{{- end -}}

{{- /* "true" when SecurityPolicyException objects can be applied (admission-policy-engine). Usage: if (include "ai_models.security_policy_exceptions_available" .) */ -}}
{{- define "ai_models.security_policy_exceptions_available" -}}
{{- include "ai_models.platform_serves" (list . "deckhouse.io/v1alpha1/SecurityPolicyException" "admission-policy-engine") -}}
{{- end -}}

{{- /* Name of the pull secret rendered by templates/registry-secret.yaml. Reads .Chart.Name.
Usage: include "ai_models.registry_secret_name" . */ -}}
{{- define "ai_models.registry_secret_name" -}}
{{- printf "%s-module-registry" .Chart.Name -}}
{{- end -}}

{{- /* `imagePullSecrets:` block with the module registry secret. Reads .Chart.Name.
Usage: include "ai_models.image_pull_secrets" . | nindent 6 */ -}}
{{- define "ai_models.image_pull_secrets" -}}
imagePullSecrets:
- name: {{ include "ai_models.registry_secret_name" . }}
{{- end -}}


{{- /* ===== Placement ========================================================================= */ -}}

{{- /* `nodeSelector:` block for a placement strategy: system, frontend, monitoring or master.
Reads aiModels.nodeSelector (wins, except for master), global.discovery.d8SpecificNodeCountByRole
(dedicated <aiModels> nodes, then nodes of the strategy's role, then system nodes for monitoring
and master) and global.discovery.clusterMasterCount. Renders nothing when no rule applies, so the
pods may run on any node. Usage: include "ai_models.node_selector" (list . "system") | nindent 6 */ -}}
{{- define "ai_models.node_selector" -}}
{{- $ctx := index . 0 -}}
{{- $strategy := index . 1 -}}
{{- if not (has $strategy (list "system" "frontend" "monitoring" "master")) -}}
{{- fail (printf "ai_models.node_selector: unknown strategy %q (system, frontend, monitoring, master)" $strategy) -}}
{{- end -}}
{{- $module := include "ai_models.module_camelcase_name" $ctx -}}
{{- $moduleValues := index $ctx.Values $module | default dict -}}
{{- $discovery := dig "discovery" dict ($ctx.Values.global | default dict) -}}
{{- $counts := $discovery.d8SpecificNodeCountByRole | default dict -}}
{{- $selector := dict -}}
{{- if eq $strategy "master" -}}
  {{- if gt (index $discovery "clusterMasterCount" | default 0 | int) 0 -}}
    {{- $selector = dict "node-role.kubernetes.io/control-plane" "" -}}
  {{- else if gt (index $counts "master" | default 0 | int) 0 -}}
    {{- $selector = dict "node-role.deckhouse.io/control-plane" "" -}}
  {{- else if gt (index $counts "system" | default 0 | int) 0 -}}
    {{- $selector = dict "node-role.deckhouse.io/system" "" -}}
  {{- end -}}
{{- else if $moduleValues.nodeSelector -}}
  {{- $selector = $moduleValues.nodeSelector -}}
{{- else if gt (index $counts $module | default 0 | int) 0 -}}
  {{- $selector = dict (printf "node-role.deckhouse.io/%s" $ctx.Chart.Name) "" -}}
{{- else if gt (index $counts $strategy | default 0 | int) 0 -}}
  {{- $selector = dict (printf "node-role.deckhouse.io/%s" $strategy) "" -}}
{{- else if and (eq $strategy "monitoring") (gt (index $counts "system" | default 0 | int) 0) -}}
  {{- $selector = dict "node-role.deckhouse.io/system" "" -}}
{{- end -}}
{{- if $selector -}}
nodeSelector:
{{- toYaml $selector | nindent 2 }}
{{- end -}}
{{- end -}}

{{- /* `tolerations:` block for a base strategy (system, frontend, monitoring, any-node, wildcard,
custom) plus extras "with-<x>" / "without-<x>" (x: uninitialized, node-problems, storage-problems,
no-csi, cloud-provider-uninitialized; storage-problems is on by default except for wildcard and
custom). Reads aiModels.tolerations (replaces the base list of system/frontend/monitoring/custom),
global.modules.placement.customTolerationKeys (any-node), global.clusterConfiguration.clusterType,
global.enabledModules and global.clusterIsBootstrapped (for the uninitialized extras).
Usage: include "ai_models.tolerations" (list . "system") | nindent 6
       include "ai_models.tolerations" (list . "any-node" "with-uninitialized") | nindent 6 */ -}}
{{- define "ai_models.tolerations" -}}
{{- $ctx := index . 0 -}}
{{- $strategy := index . 1 -}}
{{- if not (has $strategy (list "system" "frontend" "monitoring" "any-node" "wildcard" "custom")) -}}
{{- fail (printf "ai_models.tolerations: unknown strategy %q (system, frontend, monitoring, any-node, wildcard, custom)" $strategy) -}}
{{- end -}}
{{- $known := list "uninitialized" "node-problems" "storage-problems" "no-csi" "cloud-provider-uninitialized" -}}
{{- $extras := list -}}
{{- if not (has $strategy (list "wildcard" "custom")) -}}
{{- $extras = list "storage-problems" -}}
{{- end -}}
{{- range $arg := rest (rest .) -}}
  {{- $name := trimPrefix "without-" (trimPrefix "with-" $arg) -}}
  {{- if or (not (has $name $known)) (eq $name $arg) -}}
    {{- fail (printf "ai_models.tolerations: unknown extra %q (with-/without- plus one of %s)" $arg (join ", " $known)) -}}
  {{- end -}}
  {{- if hasPrefix "with-" $arg -}}
    {{- $extras = append (without $extras $name) $name -}}
  {{- else -}}
    {{- $extras = without $extras $name -}}
  {{- end -}}
{{- end -}}
{{- $module := include "ai_models.module_camelcase_name" $ctx -}}
{{- $moduleValues := index $ctx.Values $module | default dict -}}
{{- $global := $ctx.Values.global | default dict -}}
{{- $list := list -}}
{{- if eq $strategy "wildcard" -}}
  {{- $list = list (dict "operator" "Exists") -}}
  {{- $extras = list -}}
{{- else if eq $strategy "any-node" -}}
  {{- $list = list
      (dict "key" "node-role.kubernetes.io/master")
      (dict "key" "node-role.kubernetes.io/control-plane")
      (dict "key" "node.deckhouse.io/etcd-arbiter")
      (dict "key" "dedicated.deckhouse.io" "operator" "Exists")
      (dict "key" "dedicated" "operator" "Exists")
      (dict "key" "DeletionCandidateOfClusterAutoscaler")
      (dict "key" "ToBeDeletedByClusterAutoscaler") -}}
  {{- range $key := dig "modules" "placement" "customTolerationKeys" list $global -}}
    {{- $list = append $list (dict "key" $key "operator" "Exists") -}}
  {{- end -}}
{{- else if $moduleValues.tolerations -}}
  {{- $list = $moduleValues.tolerations -}}
{{- else if ne $strategy "custom" -}}
  {{- $list = list (dict "key" "dedicated.deckhouse.io" "operator" "Equal" "value" $ctx.Chart.Name) -}}
  {{- if eq $strategy "monitoring" -}}
    {{- $list = append $list (dict "key" "dedicated.deckhouse.io" "operator" "Equal" "value" "monitoring") -}}
  {{- end -}}
  {{- if eq $strategy "frontend" -}}
    {{- $list = append $list (dict "key" "dedicated.deckhouse.io" "operator" "Equal" "value" "frontend") -}}
  {{- else -}}
    {{- $list = append $list (dict "key" "dedicated.deckhouse.io" "operator" "Equal" "value" "system") -}}
  {{- end -}}
{{- end -}}
{{- $nodeProblems := list
    (dict "key" "node.kubernetes.io/not-ready")
    (dict "key" "node.kubernetes.io/out-of-disk")
    (dict "key" "node.kubernetes.io/memory-pressure")
    (dict "key" "node.kubernetes.io/disk-pressure")
    (dict "key" "node.kubernetes.io/pid-pressure")
    (dict "key" "node.kubernetes.io/unreachable")
    (dict "key" "node.kubernetes.io/network-unavailable") -}}
{{- $noCSI := list
    (dict "key" "ToBeDeletedTaint" "operator" "Exists")
    (dict "key" "node.deckhouse.io/csi-not-bootstrapped" "operator" "Exists" "effect" "NoSchedule") -}}
{{- range $extra := $extras -}}
  {{- if eq $extra "uninitialized" -}}
    {{- $list = append $list (dict "key" "node.deckhouse.io/bashible-uninitialized" "operator" "Exists" "effect" "NoSchedule") -}}
    {{- $list = append $list (dict "key" "node.deckhouse.io/uninitialized" "operator" "Exists" "effect" "NoSchedule") -}}
    {{- /* Cloud and hybrid clusters register CSI drivers late; uninitialized nodes there also lack CSI. */ -}}
    {{- $cloud := eq (dig "clusterConfiguration" "clusterType" "" $global) "Cloud" -}}
    {{- range $m := $global.enabledModules | default list -}}
      {{- if hasPrefix "cloud-provider-" $m -}}{{- $cloud = true -}}{{- end -}}
    {{- end -}}
    {{- if $cloud -}}{{- $list = concat $list $noCSI -}}{{- end -}}
    {{- $list = concat $list $nodeProblems -}}
  {{- else if eq $extra "node-problems" -}}
    {{- $list = concat $list $nodeProblems -}}
  {{- else if eq $extra "storage-problems" -}}
    {{- $list = append $list (dict "key" "drbd.linbit.com/lost-quorum") -}}
    {{- $list = append $list (dict "key" "drbd.linbit.com/force-io-error") -}}
    {{- $list = append $list (dict "key" "drbd.linbit.com/ignore-fail-over") -}}
  {{- else if eq $extra "no-csi" -}}
    {{- $list = concat $list $noCSI -}}
  {{- else if eq $extra "cloud-provider-uninitialized" -}}
    {{- if not $global.clusterIsBootstrapped -}}
      {{- $list = append $list (dict "key" "node.cloudprovider.kubernetes.io/uninitialized" "operator" "Exists") -}}
    {{- end -}}
  {{- end -}}
{{- end -}}
{{- if $list -}}
tolerations:
{{- toYaml $list | nindent 0 }}
{{- end -}}
{{- end -}}

{{- /* `priorityClassName:` line; fails on a class Deckhouse does not ship. Reads nothing.
Usage: include "ai_models.priority_class" (list . "cluster-medium") | nindent 6 */ -}}
{{- define "ai_models.priority_class" -}}
{{- $class := index . 1 -}}
{{- $known := list "system-node-critical" "system-cluster-critical" "cluster-critical" "cluster-medium" "cluster-low" "production-high" "production-medium" "production-low" "staging" "develop" "standby" -}}
{{- if not (has $class $known) -}}
{{- fail (printf "ai_models.priority_class: %q is not a Deckhouse priority class (%s)" $class (join ", " $known)) -}}
{{- end -}}
priorityClassName: {{ $class }}
{{- end -}}


{{- /* ===== High availability ================================================================= */ -}}

{{- /* "true" when the module runs highly available. Reads aiModels.highAvailability, then
global.highAvailability, then global.discovery.clusterControlPlaneIsHighlyAvailable (the first
one that is set decides). Usage: if (include "ai_models.ha_enabled" .) */ -}}
{{- define "ai_models.ha_enabled" -}}
{{- $moduleValues := index .Values (include "ai_models.module_camelcase_name" .) | default dict -}}
{{- $global := .Values.global | default dict -}}
{{- $ha := false -}}
{{- if hasKey $moduleValues "highAvailability" -}}
  {{- $ha = $moduleValues.highAvailability -}}
{{- else if hasKey $global "highAvailability" -}}
  {{- $ha = $global.highAvailability -}}
{{- else -}}
  {{- $ha = dig "discovery" "clusterControlPlaneIsHighlyAvailable" false $global -}}
{{- end -}}
{{- if $ha -}}true{{- end -}}
{{- end -}}

{{- /* One of two values by HA mode (see ai_models.ha_enabled).
Usage: include "ai_models.is_ha_to_value" (list . 2 1) */ -}}
{{- define "ai_models.is_ha_to_value" -}}
{{- if include "ai_models.ha_enabled" (index . 0) -}}{{- index . 1 -}}{{- else -}}{{- index . 2 -}}{{- end -}}
{{- end -}}

{{- /* `replicas:` (2 in HA, else 1) and, in HA, a rolling update that never runs more pods than
replicas, so required anti-affinity cannot deadlock a rollout on a two-node pool. Reads HA values.
Usage: include "ai_models.deployment_strategy_and_replicas_for_ha" . | nindent 2 */ -}}
{{- define "ai_models.deployment_strategy_and_replicas_for_ha" -}}
replicas: {{ include "ai_models.is_ha_to_value" (list . 2 1) }}
{{- if include "ai_models.ha_enabled" . }}
strategy:
  type: RollingUpdate
  rollingUpdate:
    maxSurge: 0
    maxUnavailable: 1
{{- end }}
{{- end -}}

{{- /* `affinity:` with required pod anti-affinity across hosts for pods matching the labels, only
in HA. Reads HA values. Usage: include "ai_models.pod_anti_affinity_for_ha" (list . (dict "app" "api")) | nindent 6 */ -}}
{{- define "ai_models.pod_anti_affinity_for_ha" -}}
{{- $ctx := index . 0 -}}
{{- $labels := index . 1 -}}
{{- if include "ai_models.ha_enabled" $ctx -}}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - labelSelector:
        matchLabels:
          {{- toYaml $labels | nindent 10 }}
      topologyKey: kubernetes.io/hostname
{{- end -}}
{{- end -}}


{{- /* ===== Security and resources ============================================================ */ -}}

{{- /* Pod `securityContext:` for PSS restricted: non-root deckhouse user 64535:64535 and the
RuntimeDefault seccomp profile. Reads nothing.
Usage: include "ai_models.pod_security_context_run_as_user_deckhouse" . | nindent 6 */ -}}
{{- define "ai_models.pod_security_context_run_as_user_deckhouse" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 64535
  runAsGroup: 64535
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- /* Same as ai_models.pod_security_context_run_as_user_deckhouse plus fsGroup 64535, for pods
that write into mounted volumes (materialization into shared PVCs). Reads nothing.
Usage: include "ai_models.pod_security_context_run_as_user_deckhouse_with_writable_fs" . | nindent 6 */ -}}
{{- define "ai_models.pod_security_context_run_as_user_deckhouse_with_writable_fs" -}}
{{ include "ai_models.pod_security_context_run_as_user_deckhouse" . }}
  fsGroup: 64535
{{- end -}}

{{- /* Container `securityContext:` for PSS restricted: read-only root filesystem, no privilege
escalation, every capability dropped, RuntimeDefault seccomp. Reads nothing.
Usage: include "ai_models.container_security_context_pss_restricted" . | nindent 10 */ -}}
{{- define "ai_models.container_security_context_pss_restricted" -}}
securityContext:
  readOnlyRootFilesystem: true
  allowPrivilegeEscalation: false
  privileged: false
  runAsNonRoot: true
  capabilities:
    drop:
    - ALL
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- /* `ephemeral-storage:` request for a container that writes only its logs (50Mi). Reads nothing.
Usage (under resources.requests): include "ai_models.ephemeral_storage_logs" . | nindent 14 */ -}}
{{- define "ai_models.ephemeral_storage_logs" -}}
ephemeral-storage: 50Mi
{{- end -}}

{{- /* `ephemeral-storage:` request for logs plus N MiB of scratch space. Reads nothing.
Usage: include "ai_models.ephemeral_storage_logs_with_extra" 200 | nindent 14 */ -}}
{{- define "ai_models.ephemeral_storage_logs_with_extra" -}}
ephemeral-storage: {{ add 50 (. | int) }}Mi
{{- end -}}

{{- /* VPA updateMode: InPlaceOrRecreate where in-place resize exists (Kubernetes >= 1.33), else
Recreate ("Auto" is deprecated). Reads global.discovery.kubernetesVersion, then
.Capabilities.KubeVersion. Usage: updateMode: {{ include "ai_models.vpa_update_mode" . | quote }} */ -}}
{{- define "ai_models.vpa_update_mode" -}}
{{- $version := dig "discovery" "kubernetesVersion" "" (.Values.global | default dict) | toString -}}
{{- if not $version -}}
{{- $version = .Capabilities.KubeVersion.Version -}}
{{- end -}}
{{- if semverCompare ">=1.33.0-0" $version -}}InPlaceOrRecreate{{- else -}}Recreate{{- end -}}
{{- end -}}


{{- /* ===== Cluster and public endpoints ====================================================== */ -}}

{{- /* Cluster DNS domain. Reads global.discovery.clusterDomain, then
global.clusterConfiguration.clusterDomain; fails when neither is set.
Usage: include "ai_models.cluster_domain" . */ -}}
{{- define "ai_models.cluster_domain" -}}
{{- $global := .Values.global | default dict -}}
{{- $domain := dig "discovery" "clusterDomain" "" $global | default (dig "clusterConfiguration" "clusterDomain" "" $global) -}}
{{- if not $domain -}}
{{- fail "cluster domain is unknown: global.discovery.clusterDomain is not set" -}}
{{- end -}}
{{- $domain -}}
{{- end -}}

{{- /* In-cluster DNS name of a Service in the module namespace: <svc>.d8-ai-models.svc.<domain>.
Reads the cluster domain. Usage: include "ai_models.service_fqdn" (list . "ai-models-api") */ -}}
{{- define "ai_models.service_fqdn" -}}
{{- $ctx := index . 0 -}}
{{- printf "%s.%s.svc.%s" (index . 1) (include "ai_models.module_namespace" $ctx) (include "ai_models.cluster_domain" $ctx) -}}
{{- end -}}

{{- /* Public host name of an endpoint from global.modules.publicDomainTemplate ("%s" is replaced
by the name). Fails when the template is missing, lacks "%s", or the host exceeds 64 characters
(the certificate CN limit). Usage: include "ai_models.public_domain" (list . "ai-models") */ -}}
{{- define "ai_models.public_domain" -}}
{{- $ctx := index . 0 -}}
{{- $name := index . 1 -}}
{{- $template := dig "modules" "publicDomainTemplate" "" ($ctx.Values.global | default dict) -}}
{{- if not $template -}}
{{- fail (printf "global.modules.publicDomainTemplate is not set: the public endpoint %q of %s needs it (for example \"%%s.example.com\")" $name $ctx.Chart.Name) -}}
{{- end -}}
{{- if not (contains "%s" $template) -}}
{{- fail (printf "global.modules.publicDomainTemplate %q must contain \"%%s\"" $template) -}}
{{- end -}}
{{- $domain := replace "%s" $name $template -}}
{{- if gt (len $domain) 64 -}}
{{- fail (printf "public domain %q is longer than 64 characters: shorten global.modules.publicDomainTemplate" $domain) -}}
{{- end -}}
{{- $domain -}}
{{- end -}}

{{- /* Ingress class. Reads aiModels.ingressClass, then global.modules.ingressClass.
Usage: ingressClassName: {{ include "ai_models.ingress_class" . }} */ -}}
{{- define "ai_models.ingress_class" -}}
{{- $moduleValues := index .Values (include "ai_models.module_camelcase_name" .) | default dict -}}
{{- $class := $moduleValues.ingressClass | default (dig "modules" "ingressClass" "" (.Values.global | default dict)) -}}
{{- if not $class -}}
{{- fail "ingress class is unknown: set aiModels.ingressClass or global.modules.ingressClass" -}}
{{- end -}}
{{- $class -}}
{{- end -}}


{{- /* ===== HTTPS ============================================================================= */ -}}

{{- /* HTTPS mode of the public endpoints: Disabled, CertManager, CustomCertificate or OnlyInURI.
Reads aiModels.https.mode, then global.modules.https.mode; for CertManager also
global.enabledModules. Fails on an unknown mode and, as lib-helm does, on CertManager without the
cert-manager module, naming the setting the mode came from and the fix.
Usage: include "ai_models.https_mode" . */ -}}
{{- define "ai_models.https_mode" -}}
{{- $moduleValues := index .Values (include "ai_models.module_camelcase_name" .) | default dict -}}
{{- $global := .Values.global | default dict -}}
{{- $source := "aiModels.https.mode" -}}
{{- $mode := dig "https" "mode" "" $moduleValues -}}
{{- if not $mode -}}
{{- $source = "global.modules.https.mode" -}}
{{- $mode = dig "modules" "https" "mode" "" $global -}}
{{- end -}}
{{- if not (has $mode (list "Disabled" "CertManager" "CustomCertificate" "OnlyInURI")) -}}
{{- fail (printf "HTTPS mode %q is unknown: set aiModels.https.mode or global.modules.https.mode to Disabled, CertManager, CustomCertificate or OnlyInURI" $mode) -}}
{{- end -}}
{{- if and (eq $mode "CertManager") (not (has "cert-manager" ($global.enabledModules | default list))) -}}
{{- fail (printf "HTTPS mode is CertManager (%s) but the cert-manager module is not enabled, so nothing can issue the certificate of the public endpoints: enable the cert-manager module, or set aiModels.https.mode to CustomCertificate, OnlyInURI or Disabled" $source) -}}
{{- end -}}
{{- $mode -}}
{{- end -}}

{{- /* URI scheme of the public endpoints: "http" when HTTPS is Disabled, else "https" (OnlyInURI
terminates TLS outside the cluster but links still use https). Reads the HTTPS mode.
Usage: include "ai_models.https_uri_scheme" . */ -}}
{{- define "ai_models.https_uri_scheme" -}}
{{- if eq (include "ai_models.https_mode" .) "Disabled" -}}http{{- else -}}https{{- end -}}
{{- end -}}

{{- /* "true" when Ingress objects carry a TLS section (CertManager or CustomCertificate).
Reads the HTTPS mode. Usage: if (include "ai_models.https_ingress_tls_enabled" .) */ -}}
{{- define "ai_models.https_ingress_tls_enabled" -}}
{{- if has (include "ai_models.https_mode" .) (list "CertManager" "CustomCertificate") -}}true{{- end -}}
{{- end -}}

{{- /* "true" when the Gateway API listeners terminate TLS (CertManager or CustomCertificate).
Reads the HTTPS mode. Usage: if (include "ai_models.https_route_tls_enabled" .) */ -}}
{{- define "ai_models.https_route_tls_enabled" -}}
{{- include "ai_models.https_ingress_tls_enabled" . -}}
{{- end -}}

{{- /* ClusterIssuer of the certificates in CertManager mode. Reads
aiModels.https.certManager.clusterIssuerName when aiModels.https.mode is set, then
global.modules.https.certManager.clusterIssuerName.
Usage: include "ai_models.https_cert_manager_cluster_issuer_name" . */ -}}
{{- define "ai_models.https_cert_manager_cluster_issuer_name" -}}
{{- $moduleValues := index .Values (include "ai_models.module_camelcase_name" .) | default dict -}}
{{- $global := .Values.global | default dict -}}
{{- $issuer := "" -}}
{{- if dig "https" "mode" "" $moduleValues -}}
{{- $issuer = dig "https" "certManager" "clusterIssuerName" "" $moduleValues -}}
{{- end -}}
{{- $issuer = $issuer | default (dig "modules" "https" "certManager" "clusterIssuerName" "" $global) -}}
{{- if not $issuer -}}
{{- fail "the ClusterIssuer is unknown: set aiModels.https.certManager.clusterIssuerName or global.modules.https.certManager.clusterIssuerName" -}}
{{- end -}}
{{- $issuer -}}
{{- end -}}

{{- /* TLS Secret name of a public endpoint: <prefix> in CertManager mode, <prefix>-customcertificate
in CustomCertificate mode (the copied custom certificate). The Ingress side passes one prefix; the
Gateway side passes two, the second naming its own cert-manager Secret, while a custom certificate
is copied once (under the first prefix) and shared by both sides.
Fails in the modes without TLS. Reads the HTTPS mode.
Usage: include "ai_models.https_secret_name" (list . "ai-models-ingress-tls")
       include "ai_models.https_secret_name" (list . "ai-models-ingress-tls" "ai-models-httproute-tls") */ -}}
{{- define "ai_models.https_secret_name" -}}
{{- $ctx := index . 0 -}}
{{- $prefix := index . 1 -}}
{{- $mode := include "ai_models.https_mode" $ctx -}}
{{- if eq $mode "CertManager" -}}
{{- if gt (len .) 2 -}}{{- index . 2 -}}{{- else -}}{{- $prefix -}}{{- end -}}
{{- else if eq $mode "CustomCertificate" -}}
{{- printf "%s-customcertificate" $prefix -}}
{{- else -}}
{{- fail (printf "HTTPS mode %s has no TLS secret: guard the caller with ai_models.https_ingress_tls_enabled" $mode) -}}
{{- end -}}
{{- end -}}

{{- /* kubernetes.io/tls Secret <prefix>-customcertificate in the module namespace, copied from
aiModels.internal.customCertificateData (base64 values, filled by the copy_custom_certificate
hook); renders only in CustomCertificate mode once the hook has copied the data.
Usage: include "ai_models.https_copy_custom_certificate" (list . "ai-models-ingress-tls") */ -}}
{{- define "ai_models.https_copy_custom_certificate" -}}
{{- $ctx := index . 0 -}}
{{- $prefix := index . 1 -}}
{{- if eq (include "ai_models.https_mode" $ctx) "CustomCertificate" -}}
{{- $moduleValues := index $ctx.Values (include "ai_models.module_camelcase_name" $ctx) | default dict -}}
{{- $data := dig "internal" "customCertificateData" dict $moduleValues -}}
{{- if $data }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ include "ai_models.https_secret_name" (list $ctx $prefix) }}
  namespace: {{ include "ai_models.module_namespace" $ctx }}
  {{- include "ai_models.module_labels" (list $ctx) | nindent 2 }}
type: kubernetes.io/tls
data:
  {{- if index $data "ca.crt" }}
  ca.crt: {{ index $data "ca.crt" }}
  {{- end }}
  tls.crt: {{ required "aiModels.internal.customCertificateData has no tls.crt" (index $data "tls.crt") }}
  tls.key: {{ required "aiModels.internal.customCertificateData has no tls.key" (index $data "tls.key") }}
{{- end -}}
{{- end -}}
{{- end -}}


{{- /* ===== Gateway API ======================================================================= */ -}}

{{- /* Gateway the module's ListenerSet attaches to, as JSON {"name", "namespace"} or {} when none
resolves. Reads aiModels.gatewayAPI.gateway, then global.modules.gatewayAPI.gateway, then
global.discovery.gatewayAPIDefaultGateway (the first with both name and namespace wins).
Usage: $gw := include "ai_models.gateway" . | fromJson */ -}}
{{- define "ai_models.gateway" -}}
{{- $moduleValues := index .Values (include "ai_models.module_camelcase_name" .) | default dict -}}
{{- $global := .Values.global | default dict -}}
{{- $result := dict -}}
{{- range $candidate := list
      (dig "gatewayAPI" "gateway" dict $moduleValues)
      (dig "modules" "gatewayAPI" "gateway" dict $global)
      (dig "discovery" "gatewayAPIDefaultGateway" dict $global) -}}
  {{- if and (not $result) $candidate.name $candidate.namespace -}}
    {{- $result = dict "name" $candidate.name "namespace" $candidate.namespace -}}
  {{- end -}}
{{- end -}}
{{- toJson $result -}}
{{- end -}}

{{- /* Name / namespace of the resolved Gateway (see ai_models.gateway); empty when none.
Usage: include "ai_models.gateway_name" . / include "ai_models.gateway_namespace" . */ -}}
{{- define "ai_models.gateway_name" -}}
{{- (include "ai_models.gateway" . | fromJson).name | default "" -}}
{{- end -}}
{{- define "ai_models.gateway_namespace" -}}
{{- (include "ai_models.gateway" . | fromJson).namespace | default "" -}}
{{- end -}}

{{- /* "true" when the cluster serves the Gateway API kinds the module renders (ListenerSet and
HTTPRoute in gateway.networking.k8s.io/v1). Reads .Capabilities.APIVersions.
Usage: if (include "ai_models.gateway_api_available" .) */ -}}
{{- define "ai_models.gateway_api_available" -}}
{{- if and (.Capabilities.APIVersions.Has "gateway.networking.k8s.io/v1/ListenerSet") (.Capabilities.APIVersions.Has "gateway.networking.k8s.io/v1/HTTPRoute") -}}true{{- end -}}
{{- end -}}

{{- /* "true" when the module publishes through the Gateway API: aiModels.gatewayAPI.enabled (then
global.modules.gatewayAPI.enabled; default on), a Gateway resolves and the API is available.
Usage: if (include "ai_models.gateway_enabled" .) */ -}}
{{- define "ai_models.gateway_enabled" -}}
{{- $moduleValues := index .Values (include "ai_models.module_camelcase_name" .) | default dict -}}
{{- $global := .Values.global | default dict -}}
{{- $enabled := true -}}
{{- if hasKey ($moduleValues.gatewayAPI | default dict) "enabled" -}}
  {{- $enabled = $moduleValues.gatewayAPI.enabled -}}
{{- else if hasKey (dig "modules" "gatewayAPI" dict $global) "enabled" -}}
  {{- $enabled = $global.modules.gatewayAPI.enabled -}}
{{- end -}}
{{- if and $enabled (include "ai_models.gateway_name" .) (include "ai_models.gateway_api_available" .) -}}true{{- end -}}
{{- end -}}


{{- /* ===== Monitoring ======================================================================== */ -}}

{{- /* ConfigMap kube-rbac-proxy-ca.crt (the CA kube-rbac-proxy sidecars trust for Prometheus) in
the given namespace, as lib-helm's helm_lib_kube_rbac_proxy_ca_certificate renders it (D128):
always, with the kubernetes.io/description annotation and the module labels, ca.crt being
global.internal.modules.kubeRBACProxyCA.cert (Deckhouse always publishes it; DMT's kube-rbac-proxy
rule wants the ConfigMap in every d8- namespace).
Usage: include "ai_models.kube_rbac_proxy_ca_certificate" (list . "d8-ai-models") */ -}}
{{- define "ai_models.kube_rbac_proxy_ca_certificate" -}}
{{- $ctx := index . 0 -}}
{{- $cert := dig "internal" "modules" "kubeRBACProxyCA" "cert" "" ($ctx.Values.global | default dict) }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-rbac-proxy-ca.crt
  namespace: {{ index . 1 }}
  annotations:
    kubernetes.io/description: |
      Contains a CA bundle that can be used to verify the kube-rbac-proxy clients.
  {{- include "ai_models.module_labels" (list $ctx) | nindent 2 }}
data:
  ca.crt: |
    {{- $cert | trim | nindent 4 }}
{{- end -}}

{{- /* "true" when PrometheusRule objects can be applied (operator-prometheus). Usage: if (include "ai_models.prometheus_rules_available" .) */ -}}
{{- define "ai_models.prometheus_rules_available" -}}
{{- include "ai_models.platform_serves" (list . "monitoring.coreos.com/v1/PrometheusRule" "operator-prometheus") -}}
{{- end -}}

{{- /* "true" when GrafanaDashboardDefinition objects can be applied (prometheus). Usage: if (include "ai_models.grafana_dashboards_available" .) */ -}}
{{- define "ai_models.grafana_dashboards_available" -}}
{{- include "ai_models.platform_serves" (list . "deckhouse.io/v1/GrafanaDashboardDefinition" "prometheus") -}}
{{- end -}}

{{- /* "true" when rules take the observability module's form, lib-helm's condition in
helm_lib_prometheus_rules: the observability module is enabled and Deckhouse discovered
observability.deckhouse.io/v1alpha1 ClusterObservabilityMetricsRulesGroup. Reads
global.enabledModules and global.discovery.apiVersions.
Usage: if (include "ai_models.observability_rules_enabled" .) */ -}}
{{- define "ai_models.observability_rules_enabled" -}}
{{- $global := .Values.global | default dict -}}
{{- if and (has "observability" (dig "enabledModules" list $global)) (has "observability.deckhouse.io/v1alpha1/ClusterObservabilityMetricsRulesGroup" (dig "discovery" "apiVersions" list $global)) -}}true{{- end -}}
{{- end -}}

{{- /* One PrometheusRule per file under monitoring/prometheus-rules/ (any depth; *.yaml as is,
*.tpl rendered with tpl first). Each file is a list of rule groups. __SCRAPE_INTERVAL__ and
__SCRAPE_INTERVAL_X_2/3/4__ become global.discovery.prometheusScrapeInterval (default 30) seconds
times N; a rule annotated d8_ignore_on_update: "true" is muted while Deckhouse updates. Named
<module>-<path with "/", "_", "." as "-">, labelled app: prometheus, prometheus: main, component: rules
(lib-helm's helm_lib_prometheus_rules, D128). With ai_models.observability_rules_enabled each group
becomes a cluster-scoped ClusterObservabilityMetricsRulesGroup <that name>-<index in the file>, its
spec the group without its name, instead of the PrometheusRule, as lib-helm renders it then.
Renders only when ai_models.prometheus_rules_available.
Usage: include "ai_models.prometheus_rules" (list . "d8-ai-models") */ -}}
{{- define "ai_models.prometheus_rules" -}}
{{- $ctx := index . 0 -}}
{{- $namespace := index . 1 -}}
{{- if include "ai_models.prometheus_rules_available" $ctx -}}
{{- $root := "monitoring/prometheus-rules/" -}}
{{- $interval := dig "discovery" "prometheusScrapeInterval" 30 ($ctx.Values.global | default dict) | int -}}
{{- range $path, $_ := $ctx.Files.Glob (printf "%s**.{yaml,tpl}" $root) }}
{{- $text := $ctx.Files.Get $path -}}
{{- if hasSuffix ".tpl" $path -}}
{{- $text = tpl $text $ctx -}}
{{- end -}}
{{- $text = $text
    | replace "__SCRAPE_INTERVAL_X_2__" (printf "%ds" (mul $interval 2))
    | replace "__SCRAPE_INTERVAL_X_3__" (printf "%ds" (mul $interval 3))
    | replace "__SCRAPE_INTERVAL_X_4__" (printf "%ds" (mul $interval 4))
    | replace "__SCRAPE_INTERVAL__" (printf "%ds" $interval) -}}
{{- $groups := fromYamlArray $text -}}
{{- range $group := $groups -}}
  {{- if not (and (kindIs "map" $group) $group.name (kindIs "slice" $group.rules)) -}}
    {{- fail (printf "%s must be a YAML list of rule groups, each with a name and rules: %v" $path $group) -}}
  {{- end -}}
  {{- range $rule := $group.rules -}}
    {{- if eq (dig "annotations" "d8_ignore_on_update" "" $rule | toString) "true" -}}
      {{- $_ := set $rule "expr" (printf "(%s) and ON() ((max(d8_is_updating) != 1) or ON() absent(d8_is_updating))" $rule.expr) -}}
    {{- end -}}
  {{- end -}}
{{- end -}}
{{- $name := regexReplaceAll "\\.(yaml|tpl)$" (trimPrefix $root $path) "" | replace "/" "-" | replace "_" "-" | replace "." "-" | replace " " "-" | lower }}
{{- $name = printf "%s-%s" $ctx.Chart.Name $name }}
{{- $labels := dict "app" "prometheus" "prometheus" "main" "component" "rules" }}
{{- if include "ai_models.observability_rules_enabled" $ctx }}
{{- range $index, $group := $groups }}
{{- if $group.rules }}
---
apiVersion: observability.deckhouse.io/v1alpha1
kind: ClusterObservabilityMetricsRulesGroup
metadata:
  name: {{ printf "%s-%d" $name $index }}
  {{- include "ai_models.module_labels" (list $ctx $labels) | nindent 2 }}
spec:
  {{- toYaml (omit $group "name") | nindent 2 }}
{{- end }}
{{- end }}
{{- else if $groups }}
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{ $name }}
  namespace: {{ $namespace }}
  {{- include "ai_models.module_labels" (list $ctx $labels) | nindent 2 }}
spec:
  groups:
    {{- toYaml $groups | nindent 4 }}
{{- end }}
{{- end }}
{{- end -}}
{{- end -}}

{{- /* One cluster-scoped GrafanaDashboardDefinition per monitoring/grafana-dashboards/<folder>/**.json;
the first directory names the Grafana folder ("ai-models" -> "Ai Models"). Named
d8-<module>-<path with "/", "_", "." as "-">, labelled as lib-helm's helm_lib_single_dashboard labels it
(prometheus.deckhouse.io/grafana-dashboard and observability.deckhouse.io/skip-dashboard-conversion,
D128). With the observability module enabled (global.enabledModules) each dashboard is also a
cluster-scoped ClusterObservabilityDashboard of the same name, its folder as the
metadata.deckhouse.io/category annotation, as lib-helm renders it then. Fails on a dashboard outside
a folder or on invalid JSON. Renders only when ai_models.grafana_dashboards_available.
Usage: include "ai_models.grafana_dashboard_definitions" . */ -}}
{{- define "ai_models.grafana_dashboard_definitions" -}}
{{- $ctx := . -}}
{{- if include "ai_models.grafana_dashboards_available" $ctx -}}
{{- $root := "monitoring/grafana-dashboards/" -}}
{{- range $path, $_ := $ctx.Files.Glob (printf "%s**.json" $root) }}
{{- $relative := trimPrefix $root $path -}}
{{- $parts := splitList "/" $relative -}}
{{- if lt (len $parts) 2 -}}
{{- fail (printf "%s must be in a folder under %s (the folder names the Grafana folder)" $path $root) -}}
{{- end -}}
{{- $definition := $ctx.Files.Get $path -}}
{{- if hasKey ($definition | fromJson) "Error" -}}
{{- fail (printf "%s is not valid JSON: %s" $path ($definition | fromJson).Error) -}}
{{- end -}}
{{- $name := trimSuffix ".json" $relative | replace "/" "-" | replace "_" "-" | replace "." "-" | replace " " "-" | lower }}
{{- $folder := first $parts | replace "-" " " | title }}
---
apiVersion: deckhouse.io/v1
kind: GrafanaDashboardDefinition
metadata:
  name: {{ printf "d8-%s-%s" $ctx.Chart.Name $name }}
  {{- include "ai_models.module_labels" (list $ctx (dict "prometheus.deckhouse.io/grafana-dashboard" "" "observability.deckhouse.io/skip-dashboard-conversion" "")) | nindent 2 }}
spec:
  folder: {{ $folder | quote }}
  definition: |
    {{- $definition | trim | nindent 4 }}
{{- if has "observability" (dig "enabledModules" list ($ctx.Values.global | default dict)) }}
---
apiVersion: observability.deckhouse.io/v1alpha1
kind: ClusterObservabilityDashboard
metadata:
  name: {{ printf "d8-%s-%s" $ctx.Chart.Name $name }}
  annotations:
    metadata.deckhouse.io/category: {{ $folder | quote }}
  {{- include "ai_models.module_labels" (list $ctx (dict "observability.deckhouse.io/dashboard-origin" "module")) | nindent 2 }}
spec:
  definition: |
    {{- $definition | trim | nindent 4 }}
{{- end }}
{{- end }}
{{- end -}}
{{- end -}}


{{- /* ===== Module processes (controller, api) ================================================ */ -}}

{{- /* "true" when VerticalPodAutoscaler objects can be applied (vertical-pod-autoscaler). Usage: if (include "ai_models.vpa_available" .) */ -}}
{{- define "ai_models.vpa_available" -}}
{{- include "ai_models.platform_serves" (list . "autoscaling.k8s.io/v1/VerticalPodAutoscaler" "vertical-pod-autoscaler") -}}
{{- end -}}

{{- /* "true" when ServiceMonitor objects can be applied (operator-prometheus). Usage: if (include "ai_models.service_monitors_available" .) */ -}}
{{- define "ai_models.service_monitors_available" -}}
{{- include "ai_models.platform_serves" (list . "monitoring.coreos.com/v1/ServiceMonitor" "operator-prometheus") -}}
{{- end -}}

{{- /* Directory where a module process finds the object store CA (key ca.crt of the Secret
ai-models-artifacts-ca). Reads nothing. Usage: include "ai_models.artifacts_ca_dir" . */ -}}
{{- define "ai_models.artifacts_ca_dir" -}}
/etc/ai-models/artifacts-ca
{{- end -}}

{{- /* `env` entries every module process (controller, api, jobs) reads through its settings
(prefix AI_MODELS_), plus the S3 credentials as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY from the
Secret ai-models-artifacts-credentials (keys accessKey, secretKey) that a hook copies into the
module namespace. AI_MODELS_S3_CA_FILE only with aiModels.artifacts.caSecretName (mount
ai_models.artifacts_ca_volume with it); AI_MODELS_CAPACITY_LIMIT_BYTES only with
aiModels.artifacts.capacityLimit, passed as written (a Kubernetes quantity). Reads aiModels.logLevel,
aiModels.artifacts.*, aiModels.sources.huggingFace.endpoint, aiModels.sources.allowLinkLocalEndpoints,
and the cluster's proxy for ai_models.envs_for_proxy. Renders list items, no `env:` key.
Usage: env:
       {{- include "ai_models.process_env" . | nindent 8 }} */ -}}
{{- define "ai_models.process_env" -}}
{{- $moduleValues := index .Values (include "ai_models.module_camelcase_name" .) | default dict -}}
{{- $artifacts := $moduleValues.artifacts | default dict -}}
- name: AI_MODELS_LOG_LEVEL
  value: {{ $moduleValues.logLevel | default "Info" | quote }}
- name: AI_MODELS_LOG_FORMAT
  value: json
- name: AI_MODELS_STORE_URL
  value: {{ printf "s3://%s" (required "aiModels.artifacts.bucket is required" $artifacts.bucket) | quote }}
- name: AI_MODELS_S3_ENDPOINT
  value: {{ required "aiModels.artifacts.endpoint is required" $artifacts.endpoint | quote }}
- name: AI_MODELS_S3_REGION
  value: {{ dig "region" "us-east-1" $artifacts | quote }}
- name: AI_MODELS_S3_USE_PATH_STYLE
  value: {{ dig "usePathStyle" true $artifacts | toString | quote }}
- name: AI_MODELS_S3_INSECURE
  value: {{ dig "insecure" false $artifacts | toString | quote }}
{{- if $artifacts.caSecretName }}
- name: AI_MODELS_S3_CA_FILE
  value: {{ printf "%s/ca.crt" (include "ai_models.artifacts_ca_dir" .) | quote }}
{{- end }}
- name: AI_MODELS_HF_ENDPOINT
  value: {{ dig "sources" "huggingFace" "endpoint" "https://huggingface.co" $moduleValues | quote }}
- name: AI_MODELS_SOURCES_ALLOW_LINK_LOCAL_ENDPOINTS
  value: {{ dig "sources" "allowLinkLocalEndpoints" false $moduleValues | toString | quote }}
{{- if $artifacts.capacityLimit }}
- name: AI_MODELS_CAPACITY_LIMIT_BYTES
  value: {{ $artifacts.capacityLimit | toString | quote }}
{{- end }}
- name: AI_MODELS_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: AI_MODELS_POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: ai-models-artifacts-credentials
      key: accessKey
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: ai-models-artifacts-credentials
      key: secretKey
{{- /* The cluster's egress proxy, when it has one (templates/_proxy.tpl): these processes call
the Hub and the object store. */}}
{{- with include "ai_models.envs_for_proxy" . }}
{{ . }}
{{- end }}
{{- end -}}

{{- /* `volumeMounts` entry of the object store CA at ai_models.artifacts_ca_dir, read-only; renders
nothing without aiModels.artifacts.caSecretName. Reads that setting.
Usage: include "ai_models.artifacts_ca_volume_mount" . | nindent 8 (inside volumeMounts:) */ -}}
{{- define "ai_models.artifacts_ca_volume_mount" -}}
{{- $moduleValues := index .Values (include "ai_models.module_camelcase_name" .) | default dict -}}
{{- if dig "artifacts" "caSecretName" "" $moduleValues -}}
- name: artifacts-ca
  mountPath: {{ include "ai_models.artifacts_ca_dir" . }}
  readOnly: true
{{- end -}}
{{- end -}}

{{- /* `volumes` entry with ca.crt of the Secret ai-models-artifacts-ca (copied into the module
namespace by a hook from aiModels.artifacts.caSecretName); renders nothing without that setting.
Usage: include "ai_models.artifacts_ca_volume" . | nindent 6 (inside volumes:) */ -}}
{{- define "ai_models.artifacts_ca_volume" -}}
{{- $moduleValues := index .Values (include "ai_models.module_camelcase_name" .) | default dict -}}
{{- if dig "artifacts" "caSecretName" "" $moduleValues -}}
- name: artifacts-ca
  secret:
    secretName: ai-models-artifacts-ca
    items:
    - key: ca.crt
      path: ca.crt
{{- end -}}
{{- end -}}

{{- /* kube-rbac-proxy sidecar container that publishes the process's metrics (plain HTTP on
127.0.0.1:8080) as https-metrics on port 8443 to clients allowed to get the prometheus-metrics
subresource of the named workload in the module namespace (Prometheus, see rbac-to-us.yaml);
/livez answers probes without authorization. Needs ai_models.kube_rbac_proxy_volume in the pod and
TokenReview/SubjectAccessReview rights for the pod's ServiceAccount (ClusterRole d8:rbac-proxy).
Requests stay static next to a VPA (see ai_models.kube_rbac_proxy_vpa_container_policy).
Reads the common image kubeRbacProxy. Renders a `containers` list item.
Usage: include "ai_models.kube_rbac_proxy_container" (list . "deployments" "ai-models-controller") | nindent 6 */ -}}
{{- define "ai_models.kube_rbac_proxy_container" -}}
{{- $ctx := index . 0 -}}
{{- $resource := index . 1 -}}
{{- $name := index . 2 -}}
{{- if not (has $resource (list "deployments" "daemonsets" "statefulsets")) -}}
{{- fail (printf "ai_models.kube_rbac_proxy_container: unknown workload resource %q (deployments, daemonsets, statefulsets)" $resource) -}}
{{- end -}}
{{- $attributes := dict
      "namespace" (include "ai_models.module_namespace" $ctx)
      "apiGroup" "apps"
      "apiVersion" "v1"
      "resource" $resource
      "subresource" "prometheus-metrics"
      "name" $name -}}
{{- $config := dict "upstreams" (list (dict
      "upstream" "http://127.0.0.1:8080/"
      "path" "/"
      "authorization" (dict "resourceAttributes" $attributes))) -}}
- name: kube-rbac-proxy
  image: {{ include "ai_models.module_common_image" (list $ctx "kubeRbacProxy") }}
  args:
  - "--secure-listen-address=$(KUBE_RBAC_PROXY_LISTEN_ADDRESS):8443"
  - "--client-ca-file=/etc/kube-rbac-proxy/ca.crt"
  - "--v=2"
  - "--logtostderr=true"
  - "--stale-cache-interval=1h30m"
  - "--livez-path=/livez"
  env:
  - name: KUBE_RBAC_PROXY_LISTEN_ADDRESS
    valueFrom:
      fieldRef:
        fieldPath: status.podIP
  - name: KUBE_RBAC_PROXY_CONFIG
    value: |
      {{- toYaml $config | nindent 6 }}
  {{- include "ai_models.container_security_context_pss_restricted" $ctx | nindent 2 }}
  ports:
  - name: https-metrics
    containerPort: 8443
    protocol: TCP
  livenessProbe:
    httpGet:
      path: /livez
      port: https-metrics
      scheme: HTTPS
    periodSeconds: 10
    timeoutSeconds: 5
  readinessProbe:
    httpGet:
      path: /livez
      port: https-metrics
      scheme: HTTPS
    periodSeconds: 10
    timeoutSeconds: 5
  volumeMounts:
  - name: kube-rbac-proxy-ca
    mountPath: /etc/kube-rbac-proxy
    readOnly: true
  resources:
    requests:
      {{- include "ai_models.ephemeral_storage_logs" $ctx | nindent 6 }}
      cpu: 10m
      memory: 25Mi
{{- end -}}

{{- /* `volumes` entry with the kube-rbac-proxy client CA (ConfigMap kube-rbac-proxy-ca.crt, see
ai_models.kube_rbac_proxy_ca_certificate). Reads nothing.
Usage: include "ai_models.kube_rbac_proxy_volume" . | nindent 6 (inside volumes:) */ -}}
{{- define "ai_models.kube_rbac_proxy_volume" -}}
- name: kube-rbac-proxy-ca
  configMap:
    name: kube-rbac-proxy-ca.crt
{{- end -}}

{{- /* VPA `containerPolicies` entry of the kube-rbac-proxy sidecar. Reads nothing.
Usage: include "ai_models.kube_rbac_proxy_vpa_container_policy" . | nindent 4 (inside containerPolicies:) */ -}}
{{- define "ai_models.kube_rbac_proxy_vpa_container_policy" -}}
- containerName: kube-rbac-proxy
  minAllowed:
    cpu: 10m
    memory: 25Mi
  maxAllowed:
    cpu: 100m
    memory: 64Mi
{{- end -}}

{{- /* ServiceMonitor <name> in d8-monitoring (label prometheus: main) scraping the https-metrics
port of the module-namespace Services with the given labels through kube-rbac-proxy, with the
Prometheus token; series get job=<name>, tier=cluster, d8_source=dkp and node. Renders only when
ai_models.service_monitors_available. Usage:
include "ai_models.service_monitor" (list . "ai-models-api" (dict "app" "ai-models-api")) */ -}}
{{- define "ai_models.service_monitor" -}}
{{- $ctx := index . 0 -}}
{{- $name := index . 1 -}}
{{- $labels := index . 2 -}}
{{- if include "ai_models.service_monitors_available" $ctx }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ $name }}
  namespace: d8-monitoring
  {{- include "ai_models.module_labels" (list $ctx (dict "prometheus" "main")) | nindent 2 }}
spec:
  selector:
    matchLabels:
      {{- toYaml $labels | nindent 6 }}
  namespaceSelector:
    matchNames:
    - {{ include "ai_models.module_namespace" $ctx }}
  endpoints:
  - port: https-metrics
    scheme: https
    path: /metrics
    bearerTokenSecret:
      name: prometheus-token
      key: token
    tlsConfig:
      insecureSkipVerify: true
    relabelings:
    - targetLabel: job
      replacement: {{ $name }}
    - targetLabel: tier
      replacement: cluster
    - targetLabel: d8_source
      replacement: dkp
    - sourceLabels: [__meta_kubernetes_pod_node_name]
      targetLabel: node
{{- end }}
{{- end -}}

{{- /* The publication Job's pod template (see templates/publisher/pod-template.yaml).
Usage: include "ai_models.publisher_pod_template" . | fromYaml */ -}}
{{- define "ai_models.publisher_pod_template" -}}
metadata:
  labels:
    app: ai-models-publisher
    module: {{ include "ai_models.module_name" . }}
    heritage: deckhouse
spec:
  serviceAccountName: publisher
  automountServiceAccountToken: true
  enableServiceLinks: false
  restartPolicy: Never
  {{- include "ai_models.priority_class" (list . "cluster-low") | nindent 2 }}
  {{- include "ai_models.node_selector" (list . "system") | nindent 2 }}
  {{- include "ai_models.tolerations" (list . "system") | nindent 2 }}
  {{- include "ai_models.pod_security_context_run_as_user_deckhouse" . | nindent 2 }}
  {{- include "ai_models.image_pull_secrets" . | nindent 2 }}
  containers:
  - name: publish
    image: {{ include "ai_models.module_image" (list . "aiModels") }}
    command: ["ai-models"]
    args: ["publish"]
    {{- include "ai_models.container_security_context_pss_restricted" . | nindent 4 }}
    env:
    {{- include "ai_models.process_env" . | nindent 4 }}
    volumeMounts:
    - name: tmp
      mountPath: /tmp
    {{- with include "ai_models.artifacts_ca_volume_mount" . }}{{ . | nindent 4 }}{{ end }}
    resources:
      requests:
        {{- include "ai_models.ephemeral_storage_logs_with_extra" 64 | nindent 8 }}
        cpu: 100m
        memory: 128Mi
      limits:
        memory: 384Mi
  volumes:
  - name: tmp
    emptyDir:
      sizeLimit: 64Mi
  {{- with include "ai_models.artifacts_ca_volume" . }}{{ . | nindent 2 }}{{ end }}
{{- end -}}

{{- /* "true" when the controller copies the module's pull secret beside each materialize Job:
unless delivery.materializer.imageRepository names a copy of the image the workloads' namespaces
pull without it (D162). Usage: if (include "ai_models.materializer_copies_pull_secret" .) */ -}}
{{- define "ai_models.materializer_copies_pull_secret" -}}
{{- if not (dig "delivery" "materializer" "imageRepository" "" (.Values.aiModels | default dict)) -}}true{{- end -}}
{{- end -}}

{{- /* The materializer's image: the module image, or the same digest in
delivery.materializer.imageRepository, so a mirror always runs the module's own version.
Usage: include "ai_models.materializer_image" . */ -}}
{{- define "ai_models.materializer_image" -}}
{{- $image := include "ai_models.module_image" (list . "aiModels") -}}
{{- $repository := dig "delivery" "materializer" "imageRepository" "" (.Values.aiModels | default dict) -}}
{{- if $repository -}}
{{- printf "%s@%s" $repository (regexReplaceAll "^[^@]*@" $image "") -}}
{{- else -}}
{{- $image -}}
{{- end -}}
{{- end -}}

{{- /* The materialize Job's pod template (see templates/materializer/pod-template.yaml). Reads the
module image, aiModels.delivery.materializer and aiModels.logLevel.
Usage: include "ai_models.materializer_pod_template" . | fromYaml */ -}}
{{- define "ai_models.materializer_pod_template" -}}
{{- $moduleValues := index .Values (include "ai_models.module_camelcase_name" .) | default dict -}}
{{- $pullSecrets := dig "delivery" "materializer" "imagePullSecretNames" list $moduleValues -}}
metadata:
  labels:
    app: ai-models-materializer
    module: {{ include "ai_models.module_name" . }}
    heritage: deckhouse
spec:
  automountServiceAccountToken: false
  enableServiceLinks: false
  restartPolicy: Never
  {{- include "ai_models.priority_class" (list . "cluster-low") | nindent 2 }}
  {{- include "ai_models.pod_security_context_run_as_user_deckhouse_with_writable_fs" . | nindent 2 }}
    # The claim is chowned to fsGroup once, not on every Job: it holds whole models.
    fsGroupChangePolicy: OnRootMismatch
  {{- with $pullSecrets }}
  # The admin's Secrets in the workload's namespace (delivery.materializer.imagePullSecretNames).
  imagePullSecrets:
  {{- range . }}
  - name: {{ . | quote }}
  {{- end }}
  {{- end }}
  containers:
  - name: materialize
    image: {{ include "ai_models.materializer_image" . }}
    command: ["ai-models"]
    args: ["materialize"]
    {{- include "ai_models.container_security_context_pss_restricted" . | nindent 4 }}
    env:
    - name: AI_MODELS_LOG_LEVEL
      value: {{ $moduleValues.logLevel | default "Info" | quote }}
    - name: AI_MODELS_LOG_FORMAT
      value: json
    resources:
      requests:
        {{- include "ai_models.ephemeral_storage_logs" . | nindent 8 }}
        cpu: 100m
        memory: 128Mi
      limits:
        memory: 256Mi
{{- end -}}
