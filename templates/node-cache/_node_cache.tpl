{{- /* Facts of the NodeCache node plugin shared by the DaemonSet, its SecurityPolicyException, the
CSIDriver and the VPA, so the exception names exactly the paths the pod mounts. */ -}}

{{- /* "true" in delivery mode NodeCache, the only mode that runs the node plugin. Reads
aiModels.delivery.mode. Usage: if (include "ai_models.node_cache_enabled" .) */ -}}
{{- define "ai_models.node_cache_enabled" -}}
{{- if eq (dig "delivery" "mode" "" (.Values.aiModels | default dict)) "NodeCache" -}}true{{- end -}}
{{- end -}}

{{- /* Why the node plugin cannot run in this release, or nothing: today only a missing
node-driver-registrar image for the cluster's Kubernetes minor (D162). The controller gets it as
AI_MODELS_DELIVERY_NODE_CACHE_UNAVAILABLE and reports it (the storage-prerequisites verdict and each
workload's NodeCacheDeliveryDisabled). Usage: include "ai_models.node_cache_unavailable" . */ -}}
{{- define "ai_models.node_cache_unavailable" -}}
{{- if not (include "ai_models.csi_node_driver_registrar_image" .) -}}
{{- $key := include "ai_models.csi_node_driver_registrar_key" . -}}
{{- $version := regexReplaceAll "^csiNodeDriverRegistrar([0-9])" $key "${1}." -}}
{{- printf "node-driver-registrar image for Kubernetes %s missing: neither the module (global.modulesImages.digests.%s.%s) nor Deckhouse (global.modulesImages.digests.common.%s) ships one, so the NodeCache node plugin is not deployed; use a Deckhouse release that supports Kubernetes %s, or set delivery.mode to SharedPVC" $version (include "ai_models.module_camelcase_name" .) $key $key $version -}}
{{- end -}}
{{- end -}}

{{- /* "true" when the node plugin's DaemonSet, its VPA and its SecurityPolicyException render:
NodeCache mode and nothing missing (ai_models.node_cache_unavailable). The CSIDriver and the RBAC
follow the mode alone. Usage: if (include "ai_models.node_cache_plugin_deployed" .) */ -}}
{{- define "ai_models.node_cache_plugin_deployed" -}}
{{- if and (include "ai_models.node_cache_enabled" .) (not (include "ai_models.node_cache_unavailable" .)) -}}true{{- end -}}
{{- end -}}

{{- /* Name of the DaemonSet, its VPA and its SecurityPolicyException. Usage: include "ai_models.node_cache_name" . */ -}}
{{- define "ai_models.node_cache_name" -}}
ai-models-node-cache
{{- end -}}

{{- /* The CSI driver name (ai_models.names.NODE_CACHE_DRIVER). Usage: include "ai_models.node_cache_driver" . */ -}}
{{- define "ai_models.node_cache_driver" -}}
node-cache.ai-models.deckhouse.io
{{- end -}}

{{- /* kubelet's root directory on Deckhouse nodes (pods/, plugins_registry/, csi-plugins/).
Usage: include "ai_models.node_cache_kubelet_dir" . */ -}}
{{- define "ai_models.node_cache_kubelet_dir" -}}
/var/lib/kubelet
{{- end -}}

{{- /* Host directory of the cache (content addressed trees, staging, references), mounted at the
same path in the plugin container. Usage: include "ai_models.node_cache_root" . */ -}}
{{- define "ai_models.node_cache_root" -}}
/var/lib/ai-models/node-cache
{{- end -}}

{{- /* Host directory of the driver's socket: kubelet dials <this>csi.sock (the registrar's
--kubelet-registration-path). Usage: include "ai_models.node_cache_socket_dir" . */ -}}
{{- define "ai_models.node_cache_socket_dir" -}}
{{- printf "%s/csi-plugins/%s/" (include "ai_models.node_cache_kubelet_dir" .) (include "ai_models.node_cache_driver" .) -}}
{{- end -}}

{{- /* Host directory where kubelet discovers plugin registration sockets.
Usage: include "ai_models.node_cache_registration_dir" . */ -}}
{{- define "ai_models.node_cache_registration_dir" -}}
{{- printf "%s/plugins_registry/" (include "ai_models.node_cache_kubelet_dir" .) -}}
{{- end -}}
