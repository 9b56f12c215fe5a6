"""The module's processes in the local stack (`make dev`): real `ai-models` sub-commands that
authenticate as their ServiceAccounts and keep their data in a directory store under `.dev/`."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from kubeemu.authn import Identity
from kubeemu.kubeconfig import kubeconfig_document, write_kubeconfig
from support.processes import ModuleProcess

DEFAULT_HF_ENDPOINT = "https://huggingface.co"


@dataclasses.dataclass(frozen=True)
class DevPorts:
    controller_health: int
    controller_metrics: int
    api: int
    api_metrics: int


def start_components(
    *, out_dir: Path, url: str, ca_pem: str, service_accounts: dict[str, Identity], ports: DevPorts
) -> list[ModuleProcess]:
    """Start the controller and the api; `HF_ENDPOINT` (a Hub or a mirror) is what the module setting
    `sources.huggingFace.endpoint` sets in a cluster."""
    logs = out_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    store = out_dir / "store"
    store.mkdir(parents=True, exist_ok=True)

    def kubeconfig(account: str) -> Path:
        identity = service_accounts[account]
        return write_kubeconfig(
            out_dir / f"kubeconfig-{account}",
            kubeconfig_document(url, [(account, identity)], current=account, namespaces={}, ca_pem=ca_pem),
        )

    common = {
        "AI_MODELS_STORE_URL": f"file://{store.resolve()}",
        "AI_MODELS_HF_ENDPOINT": os.environ.get("HF_ENDPOINT", DEFAULT_HF_ENDPOINT),
        "AI_MODELS_NAMESPACE": "d8-ai-models",
        "AI_MODELS_LOG_FORMAT": "text",
    }
    controller = ModuleProcess(
        "controller",
        env={
            **common,
            "KUBECONFIG": str(kubeconfig("controller")),
            "AI_MODELS_POD_NAME": "controller-dev",
            "AI_MODELS_CONTROLLER_HEALTH_PORT": str(ports.controller_health),
            "AI_MODELS_CONTROLLER_METRICS_PORT": str(ports.controller_metrics),
        },
        log_path=logs / "controller.log",
    )
    api = ModuleProcess(
        "api",
        "--host",
        "127.0.0.1",
        "--port",
        str(ports.api),
        env={
            **common,
            "KUBECONFIG": str(kubeconfig("api")),
            "AI_MODELS_POD_NAME": "api-dev",
            "AI_MODELS_API_METRICS_PORT": str(ports.api_metrics),
            "AI_MODELS_API_INDEX_DIR": str((out_dir / "api-index").resolve()),
        },
        log_path=logs / "api.log",
    )
    return [controller.start(), api.start()]
