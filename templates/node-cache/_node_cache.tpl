{{- /* Facts of the NodeCache node plugin shared by the DaemonSet, its SecurityPolicyException, the
CSIDriver and the VPA, so the exception names exactly the paths the pod mounts. */ -}}

{{- /* "true" in delivery mode NodeCache, the only mode that runs the node plugin. Reads
aiModels.delivery.mode. Usage: if (include "ai_models.node_cache_enabled" .) */ -}}
{{- define "ai_models.node_cache_enabled" -}}
{{- if eq (dig "delivery" "mode" "" (.Values.aiModels | default dict)) "NodeCache" -}}true{{- end -}}
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
