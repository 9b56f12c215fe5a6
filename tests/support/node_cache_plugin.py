"""The node plugin `ai-models node-cache` as a real process for one simulated node, started the way
the chart's DaemonSet starts it (command line and `AI_MODELS_NODE_CACHE_*` settings), with the
node's kubelet directory and plugin socket from the test bed's CSI kubelet (`testbed.csi_kubelet`).

Used by the cluster tests' NodeCache stack and by `make dev` in NodeCache mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from support.processes import ModuleProcess
from testbed.csi_kubelet import CsiNode


def plugin_process(
    node: CsiNode,
    *,
    cache_root: Path,
    kubeconfig: Path,
    token_file: Path,
    api_url: str,
    ca_file: Path,
    cache_size: str,
    log_path: Path,
    env: Mapping[str, str] | None = None,
) -> ModuleProcess:
    """The plugin of `node` (not started): its cache under `cache_root`, the Kubernetes API as the
    kubeconfig's identity (the chart's ServiceAccount), the serving API at `api_url` (https, the
    api's internal listener, verified with `ca_file`) with the module-audience token in
    `token_file`; its health listener binds a free port on 127.0.0.1."""
    cache_root.mkdir(parents=True, exist_ok=True)
    return ModuleProcess(
        "node-cache",
        "--csi-endpoint",
        node.endpoint,
        "--node-name",
        node.name,
        "--cache-root",
        str(cache_root),
        env={
            "KUBECONFIG": str(kubeconfig),
            "AI_MODELS_NODE_CACHE_SIZE": cache_size,
            "AI_MODELS_NODE_CACHE_API_URL": api_url,
            "AI_MODELS_NODE_CACHE_TOKEN_FILE": str(token_file),
            "AI_MODELS_NODE_CACHE_API_CA_FILE": str(ca_file),
            "AI_MODELS_NODE_CACHE_KUBELET_DIR": str(node.kubelet_dir),
            "AI_MODELS_NODE_CACHE_HEALTH_ADDRESS": "127.0.0.1",
            "AI_MODELS_NODE_CACHE_HEALTH_PORT": "0",
            **dict(env or {}),
        },
        log_path=log_path,
    )
