#!/usr/bin/env python3
"""Copy the custom HTTPS certificate named in the settings from d8-system into values.

In the `CustomCertificate` HTTPS mode (`aiModels.https.mode`, else `global.modules.https.mode`) the
Secret named by the same level's `customCertificate.secretName` in `d8-system` (keys `tls.crt`,
`tls.key`, optional `ca.crt`) becomes `aiModels.internal.customCertificateData`, which the chart
renders once as `ai-models-ingress-tls-customcertificate` for the Ingresses and the ListenerSet. In
any other mode the value is removed. A named Secret that does not exist removes the value too (the
copy follows its source, as in artifacts_credentials) and an error names the Secret and the fix; a
Secret without `tls.crt` or `tls.key` leaves the value as it is, with a warning naming the missing
keys. Secret data is never logged: only names.
The d8-system binding keeps only the copied keys (jqFilter), and skips Helm's release Secrets.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from deckhouse import hook

from lib.secrets import SOURCE_NAMESPACE, secrets_by_name, source_secrets_binding
from lib.values import QUEUE, dig, internal, setting

SOURCES = "source_secrets"
CUSTOM_CERTIFICATE_MODE = "CustomCertificate"
VALUE = "customCertificateData"
REQUIRED_KEYS = ("tls.crt", "tls.key")
OPTIONAL_KEYS = ("ca.crt",)

config = json.dumps(
    {
        "configVersion": "v1",
        "beforeHelm": 10,
        "kubernetes": [
            source_secrets_binding(
                SOURCES,
                keys=(*REQUIRED_KEYS, *OPTIONAL_KEYS),
                include_snapshots_from=[SOURCES],
                queue=f"{QUEUE}/custom-certificate",
            ),
        ],
    },
    indent=2,
)


def custom_certificate_secret(values: Mapping[str, Any]) -> tuple[str, str] | None:
    """The Secret to copy and the setting that names it, or None when the effective HTTPS mode is
    not CustomCertificate. The module's `https` wins as a whole when it sets a mode (as in the
    chart's helpers); otherwise the global `modules.https` decides. A missing name is None too: the
    chart refuses aiModels.https.mode CustomCertificate without one."""
    if setting(values, "https", "mode"):
        https, prefix = setting(values, "https"), "aiModels.https"
    else:
        https, prefix = dig(values, "global", "modules", "https"), "global.modules.https"
    if not isinstance(https, Mapping) or https.get("mode") != CUSTOM_CERTIFICATE_MODE:
        return None
    name = str(dig(https, "customCertificate", "secretName") or "")
    return (name, f"{prefix}.customCertificate.secretName") if name else None


def main(ctx: hook.Context) -> None:
    values: dict[str, Any] = ctx.values
    module = internal(values)
    wanted = custom_certificate_secret(values)
    if wanted is None:
        module.pop(VALUE, None)
        return
    name, name_setting = wanted
    source = secrets_by_name(ctx.snapshots, SOURCES).get(name)
    if source is None:
        module.pop(VALUE, None)
        print(
            f"custom certificate: Secret {SOURCE_NAMESPACE}/{name} not found, so the public endpoints "
            f"have no certificate: create it with tls.crt and tls.key, or set {name_setting} "
            f"to an existing Secret in {SOURCE_NAMESPACE}",
            file=sys.stderr,
        )
        return
    missing = [key for key in REQUIRED_KEYS if not source.get(key)]
    if missing:
        print(
            f"custom certificate: Secret {SOURCE_NAMESPACE}/{name} lacks {', '.join(missing)}; "
            f"aiModels.internal.{VALUE} is left as it is",
            file=sys.stderr,
        )
        return
    module[VALUE] = {key: source[key] for key in (*REQUIRED_KEYS, *OPTIONAL_KEYS) if source.get(key)}


if __name__ == "__main__":
    hook.run(main, config=config)
