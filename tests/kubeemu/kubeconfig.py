"""Client configuration for the emulator: kubeconfig documents and `kubernetes` client objects."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from kubeemu.authn import Identity

CLUSTER_NAME = "kubeemu"


def kubeconfig_document(
    server: str,
    entries: Iterable[tuple[str, Identity]],
    *,
    current: str | None = None,
    namespaces: dict[str, str] | None = None,
    ca_pem: str | None = None,
) -> dict[str, Any]:
    """One user and context per (context name, identity), all pointing at `server` (trusting `ca_pem`)."""
    entries = list(entries)
    namespaces = namespaces or {}
    cluster: dict[str, Any] = {"server": server}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem.encode()).decode()
    contexts = []
    for name, _ in entries:
        context: dict[str, Any] = {"cluster": CLUSTER_NAME, "user": name}
        if name in namespaces:
            context["namespace"] = namespaces[name]
        contexts.append({"name": name, "context": context})
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER_NAME, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": identity.token}} for name, identity in entries],
        "contexts": contexts,
        "current-context": current or (entries[0][0] if entries else ""),
        "preferences": {},
    }


def write_kubeconfig(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    path.chmod(0o600)
    return path


def client_configuration(server: str, token: str, *, ca_file: Path | None = None) -> Any:
    """A `kubernetes.client.Configuration` for `server` authenticating with `token`."""
    configuration = client.Configuration()
    configuration.host = server
    configuration.api_key = {"authorization": token}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    if ca_file is not None:
        configuration.ssl_ca_cert = str(ca_file)
    return configuration


def api_client(server: str, token: str, *, ca_file: Path | None = None) -> Any:
    """A `kubernetes.client.ApiClient` for `server`; close it when done."""
    return client.ApiClient(client_configuration(server, token, ca_file=ca_file))
