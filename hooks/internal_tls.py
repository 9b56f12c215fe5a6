#!/usr/bin/env python3
"""The module CA (`aiModels.internal.rootCA`) and the certificates it signs for the module's
in-cluster TLS listeners: the api's (`aiModels.internal.apiCert`, the internal lookup API) and the
controller's (`aiModels.internal.controllerCert`, the workload admission webhook).

Values do not survive a Deckhouse restart, so each is read back from the Secret the chart renders
from it: `ai-models-root-ca` (CA, `tls.crt`/`tls.key`), `ai-models-api-tls`, `ai-models-controller-tls`.
Order of preference: the current values, then the Secret, then a new one. The CA is replaced when it
is absent, broken or expires within 30 days; a certificate when it is absent, broken, not signed by
the CA, expires within 30 days, or its DNS names differ from its Service's (for instance after a
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

from ai_models.names import (
    API_SERVICE,
    API_TLS_SECRET,
    CA_COMMON_NAME,
    CONTROLLER_SERVICE,
    CONTROLLER_TLS_SECRET,
    MODULE_NAMESPACE,
    ROOT_CA_SECRET,
)
from lib.tls import KeyPair, generate_ca, issue_certificate, usable_ca, usable_certificate
from lib.values import QUEUE, dig, filter_results, internal

ROOT_CA = "root_ca"
API_TLS = "api_tls"
CONTROLLER_TLS = "controller_tls"
# value key under aiModels.internal -> (snapshot binding, Service whose DNS names it carries)
SERVICE_CERTIFICATES = {
    "apiCert": (API_TLS, API_SERVICE),
    "controllerCert": (CONTROLLER_TLS, CONTROLLER_SERVICE),
}
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
                "includeSnapshotsFrom": [ROOT_CA, API_TLS, CONTROLLER_TLS],
            }
        ],
        "kubernetes": [
            _secret_binding(ROOT_CA, ROOT_CA_SECRET),
            _secret_binding(API_TLS, API_TLS_SECRET),
            _secret_binding(CONTROLLER_TLS, CONTROLLER_TLS_SECRET),
        ],
    },
    indent=2,
)


def service_dns_names(service: str, cluster_domain: str) -> list[str]:
    qualified = f"{service}.{MODULE_NAMESPACE}"
    return [f"{qualified}.svc", f"{qualified}.svc.{cluster_domain}", qualified, service]


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

    module["rootCA"] = {"crt": ca.crt, "key": ca.key}
    for value_key, (binding, service) in SERVICE_CERTIFICATES.items():
        dns_names = service_dns_names(service, str(cluster_domain))
        cert = next(
            (
                pair
                for pair in (_from_values(module.get(value_key)), _from_secret(ctx.snapshots, binding))
                if pair is not None and usable_certificate(pair, ca, dns_names, now)
            ),
            None,
        )
        if cert is None:
            print(f"internal TLS: issuing a new certificate for Service {service}", file=sys.stderr)
            cert = issue_certificate(ca, dns_names[0], dns_names, now)
        module[value_key] = {"ca": ca.crt, "crt": cert.crt, "key": cert.key}


if __name__ == "__main__":
    hook.run(main, config=config)
