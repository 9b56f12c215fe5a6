#!/usr/bin/env python3
"""The module CA (`aiModels.internal.rootCA`) and the api certificate (`aiModels.internal.apiCert`).

Values do not survive a Deckhouse restart, so both are read back from the Secrets the chart renders
from them: `ai-models-root-ca` (CA, `tls.crt`/`tls.key`) and `ai-models-api-tls` (api certificate).
Order of preference: the current values, then the Secret, then a new one. The CA is replaced when it
is absent, broken or expires within 30 days; the api certificate when it is absent, broken, not signed
by the CA, expires within 30 days, or its DNS names differ from the Service's (for instance after a
change of `global.discovery.clusterDomain`). Nothing is rendered with `genCA`/`lookup`.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import sys
from collections.abc import Mapping
from typing import Any

from deckhouse import hook

from ai_models.names import API_SERVICE, API_TLS_SECRET, CA_COMMON_NAME, MODULE_NAMESPACE, ROOT_CA_SECRET
from lib.tls import KeyPair, generate_ca, issue_certificate, usable_ca, usable_certificate
from lib.values import QUEUE, dig, filter_results, internal

ROOT_CA = "root_ca"
API_TLS = "api_tls"
DEFAULT_CLUSTER_DOMAIN = "cluster.local"


def _secret_binding(name: str, secret: str) -> dict[str, Any]:
    # Snapshot only: read in beforeHelm and on schedule; a change of the Secret needs no run.
    return {
        "name": name,
        "apiVersion": "v1",
        "kind": "Secret",
        "namespace": {"nameSelector": {"matchNames": [MODULE_NAMESPACE]}},
        "nameSelector": {"matchNames": [secret]},
        "keepFullObjectsInMemory": False,
        "executeHookOnEvent": [],
        "executeHookOnSynchronization": False,
        "queue": f"{QUEUE}/internal-tls",
        "jqFilter": '{crt: (.data["tls.crt"] // ""), key: (.data["tls.key"] // "")}',
    }


config = json.dumps(
    {
        "configVersion": "v1",
        "beforeHelm": 5,
        "schedule": [
            {
                "name": "renew",
                "crontab": "17 3 * * *",
                "queue": f"{QUEUE}/internal-tls",
                "includeSnapshotsFrom": [ROOT_CA, API_TLS],
            }
        ],
        "kubernetes": [_secret_binding(ROOT_CA, ROOT_CA_SECRET), _secret_binding(API_TLS, API_TLS_SECRET)],
    },
    indent=2,
)


def api_dns_names(cluster_domain: str) -> list[str]:
    service = f"{API_SERVICE}.{MODULE_NAMESPACE}"
    return [f"{service}.svc", f"{service}.svc.{cluster_domain}", service, API_SERVICE]


def _from_values(node: Any) -> KeyPair | None:
    if isinstance(node, Mapping) and node.get("crt") and node.get("key"):
        return KeyPair(str(node["crt"]), str(node["key"]))
    return None


def _from_secret(snapshots: Mapping[str, Any], binding: str) -> KeyPair | None:
    for item in filter_results(snapshots, binding):
        try:
            crt = base64.b64decode(str(item.get("crt") or ""), validate=True).decode()
            key = base64.b64decode(str(item.get("key") or ""), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            continue
        if crt and key:
            return KeyPair(crt, key)
    return None


def main(ctx: hook.Context) -> None:
    now = dt.datetime.now(dt.UTC)
    values: dict[str, Any] = ctx.values
    cluster_domain = dig(values, "global", "discovery", "clusterDomain") or DEFAULT_CLUSTER_DOMAIN
    dns_names = api_dns_names(str(cluster_domain))
    module = internal(values)

    ca = next(
        (
            pair
            for pair in (_from_values(module.get("rootCA")), _from_secret(ctx.snapshots, ROOT_CA))
            if pair is not None and usable_ca(pair, now)
        ),
        None,
    )
    if ca is None:
        print("internal TLS: issuing a new module CA", file=sys.stderr)
        ca = generate_ca(CA_COMMON_NAME, now)

    cert = next(
        (
            pair
            for pair in (_from_values(module.get("apiCert")), _from_secret(ctx.snapshots, API_TLS))
            if pair is not None and usable_certificate(pair, ca, dns_names, now)
        ),
        None,
    )
    if cert is None:
        print("internal TLS: issuing a new api certificate", file=sys.stderr)
        cert = issue_certificate(ca, f"{API_SERVICE}.{MODULE_NAMESPACE}.svc", dns_names, now)

    module["rootCA"] = {"crt": ca.crt, "key": ca.key}
    module["apiCert"] = {"ca": ca.crt, "crt": cert.crt, "key": cert.key}


if __name__ == "__main__":
    hook.run(main, config=config)
