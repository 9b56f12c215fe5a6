#!/usr/bin/env python3
"""Copy the object-store credentials (and CA) named in the settings from d8-system into d8-ai-models.

`aiModels.artifacts.credentialsSecretName` (keys `accessKey`, `secretKey`) becomes
`ai-models-artifacts-credentials`; `aiModels.artifacts.caSecretName` (key `ca.crt`) becomes
`ai-models-artifacts-ca`. A copy is written only when it differs from the source, and deleted when
its setting is removed or its source disappears. A source that lacks a key leaves the copy as it is
(a warning names the missing keys). Secret data is never logged: only names.
The d8-system binding keeps only the copied keys (jqFilter), and skips Helm's release Secrets.

On the first install the hook runs (Synchronization, beforeHelm) before Helm has created
d8-ai-models: writing there would fail the hook with 404, the module run would be retried and Helm
would never create the namespace. So the hook binds the Namespace too and writes or deletes nothing
until it exists and is not terminating; the Namespace's Added event, once Helm has created it,
runs the hook again and the copies are written then (D121).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from deckhouse import hook

from ai_models.names import (
    ARTIFACTS_CA_SECRET,
    ARTIFACTS_CREDENTIALS_SECRET,
    HERITAGE,
    HERITAGE_LABEL,
    MODULE,
    MODULE_LABEL,
    MODULE_NAMESPACE,
)
from lib.secrets import SOURCE_NAMESPACE, secrets_by_name, source_secrets_binding
from lib.values import QUEUE, filter_results, setting

SOURCES = "source_secrets"
COPIES = "copies"
NAMESPACE = "module_namespace"
SNAPSHOTS = [SOURCES, COPIES, NAMESPACE]
CREDENTIALS = ARTIFACTS_CREDENTIALS_SECRET
CA = ARTIFACTS_CA_SECRET
CREDENTIAL_KEYS = ("accessKey", "secretKey")
CA_KEYS = ("ca.crt",)

config = json.dumps(
    {
        "configVersion": "v1",
        "beforeHelm": 10,
        "kubernetes": [
            source_secrets_binding(
                SOURCES,
                keys=(*CREDENTIAL_KEYS, *CA_KEYS),
                include_snapshots_from=SNAPSHOTS,
                queue=f"{QUEUE}/artifacts-credentials",
            ),
            {
                "name": COPIES,
                "apiVersion": "v1",
                "kind": "Secret",
                "namespace": {"nameSelector": {"matchNames": [MODULE_NAMESPACE]}},
                "nameSelector": {"matchNames": [CREDENTIALS, CA]},
                "keepFullObjectsInMemory": False,
                "includeSnapshotsFrom": SNAPSHOTS,
                "queue": f"{QUEUE}/artifacts-credentials",
                "jqFilter": "{name: .metadata.name, data: (.data // {})}",
            },
            # The namespace the copies go to: Helm creates it after the first beforeHelm run.
            {
                "name": NAMESPACE,
                "apiVersion": "v1",
                "kind": "Namespace",
                "nameSelector": {"matchNames": [MODULE_NAMESPACE]},
                "keepFullObjectsInMemory": False,
                "includeSnapshotsFrom": SNAPSHOTS,
                "queue": f"{QUEUE}/artifacts-credentials",
                "jqFilter": (
                    "{name: .metadata.name, terminating: "
                    '((.status.phase // "") == "Terminating" or .metadata.deletionTimestamp != null)}'
                ),
            },
        ],
    },
    indent=2,
)


def copy_secret(name: str, data: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": MODULE_NAMESPACE,
            "labels": {HERITAGE_LABEL: HERITAGE, MODULE_LABEL: MODULE},
        },
        "type": "Opaque",
        "data": dict(data),
    }


def sync(
    ctx: hook.Context,
    target: str,
    *,
    source_name: str | None,
    keys: tuple[str, ...],
    sources: Mapping[str, Mapping[str, str]],
    copies: Mapping[str, Mapping[str, str]],
) -> None:
    source = sources.get(source_name) if source_name else None
    if source is None:
        if target in copies:
            ctx.kubernetes.delete(kind="Secret", namespace=MODULE_NAMESPACE, name=target, apiVersion="v1")
        if source_name:
            print(
                f"artifacts credentials: Secret {SOURCE_NAMESPACE}/{source_name} not found", file=sys.stderr
            )
        return
    missing = [key for key in keys if not source.get(key)]
    if missing:
        print(
            f"artifacts credentials: Secret {SOURCE_NAMESPACE}/{source_name} lacks {', '.join(missing)}; "
            f"{MODULE_NAMESPACE}/{target} is left as it is",
            file=sys.stderr,
        )
        return
    data = {key: source[key] for key in keys}
    if dict(copies.get(target) or {}) != data:
        ctx.kubernetes.create_or_update(copy_secret(target, data))


def namespace_writable(snapshots: Mapping[str, Any]) -> bool:
    """Whether d8-ai-models exists and accepts new objects (a terminating namespace refuses them)."""
    found = [item for item in filter_results(snapshots, NAMESPACE) if item.get("name") == MODULE_NAMESPACE]
    return bool(found) and not any(item.get("terminating") for item in found)


def main(ctx: hook.Context) -> None:
    if not namespace_writable(ctx.snapshots):
        print(
            f"artifacts credentials: namespace {MODULE_NAMESPACE} does not exist yet (or is terminating); "
            "the copies are written once Helm has created it",
            file=sys.stderr,
        )
        return
    values: dict[str, Any] = ctx.values
    sources = secrets_by_name(ctx.snapshots, SOURCES)
    copies = secrets_by_name(ctx.snapshots, COPIES)
    credentials_name = setting(values, "artifacts", "credentialsSecretName") or None
    ca_name = setting(values, "artifacts", "caSecretName") or None
    sync(ctx, CREDENTIALS, source_name=credentials_name, keys=CREDENTIAL_KEYS, sources=sources, copies=copies)
    sync(ctx, CA, source_name=ca_name, keys=CA_KEYS, sources=sources, copies=copies)


if __name__ == "__main__":
    hook.run(main, config=config)
