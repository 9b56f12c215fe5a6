"""Kubernetes API access shared by the module's processes (api, controller)."""

from ai_models.adapters.kube.client import (
    ClientOptions,
    KubeConfigError,
    load_configuration,
    new_api_client,
)

__all__ = ["ClientOptions", "KubeConfigError", "load_configuration", "new_api_client"]
