"""The internal lookup API in the dev stack, over TLS with the module CA.

The chart is rendered with the certificates the internal TLS hook issues (`support.module_tls`): the
module CA and the api's certificate for the names of its Service (`ai-models-api.d8-ai-models.svc`
and the rest). The dev stack gives the api the files the kubelet would mount from the Secret
`ai-models-api-tls`, so its internal listener serves exactly that certificate, and writes the CA to
`<out>/module-ca.crt`. A client checks the certificate against that CA and the Service's name while
it connects to 127.0.0.1 (`curl --resolve`), as the ai-inference module does in a cluster. The
certificate is issued by that same module CA here, with `localhost` beside the Service's names, so
the node plugin and the materializers reach the serving API on the same listener (D159).
"""

from __future__ import annotations

import base64
import datetime
import re
from pathlib import Path

from ai_models import names
from support.devcomponents import LOCAL_HOST, mounted_config_maps
from support.hooks import load_hook
from support.processes import API_LISTENING, ModuleProcess
from support.render import RenderedChart

# The hooks' own certificate code, as the internal TLS hook issues (importable once a hook loaded).
load_hook("internal_tls")
from lib.tls import KeyPair, issue_certificate  # noqa: E402

INTERNAL_PORT_VARIABLE = "AI_MODELS_DEV_API_INTERNAL_PORT"
DEFAULT_INTERNAL_PORT = 18444
# The name the api's certificate carries first (the hook issues it for the Service's DNS names).
LOOKUP_HOST = f"{names.API_SERVICE}.{names.MODULE_NAMESPACE}.svc"
CA_FILE = "module-ca.crt"


def lookup_env(chart: RenderedChart, *, out_dir: Path, port: int) -> dict[str, str]:
    """The api's internal-listener variables: its certificate files (where the Secret volume would
    be) and `port` (0 = any free one), and the module CA written to `<out>/module-ca.crt`.

    The certificate is the module CA's, as in a cluster, for the Service's names and `localhost`
    too (`LOCAL_HOST`): the node plugin and the materializers, local processes here, read the
    serving API there and verify it with the module CA (D159), as they do in a cluster."""
    mounted = mounted_config_maps(
        chart, deployment="ai-models-api", container="api", directory=out_dir / "config"
    )
    tls = {key: mounted[key] for key in ("AI_MODELS_API_TLS_CERT_FILE", "AI_MODELS_API_TLS_KEY_FILE")}
    root = chart.get("Secret", names.ROOT_CA_SECRET)["data"]
    ca = KeyPair(
        crt=base64.b64decode(root["tls.crt"]).decode(), key=base64.b64decode(root["tls.key"]).decode()
    )
    service = f"{names.API_SERVICE}.{names.MODULE_NAMESPACE}"
    issued = issue_certificate(
        ca,
        names.API_SERVICE,
        [names.API_SERVICE, service, f"{service}.svc", LOCAL_HOST],
        datetime.datetime.now(datetime.UTC),
    )
    Path(tls["AI_MODELS_API_TLS_CERT_FILE"]).write_text(issued.crt)
    Path(tls["AI_MODELS_API_TLS_KEY_FILE"]).write_text(issued.key)
    (out_dir / CA_FILE).write_text(ca.crt)
    return {**tls, "AI_MODELS_API_INTERNAL_PORT": str(port)}


def internal_port(api: ModuleProcess, *, timeout: float = 60) -> int:
    """The port the api's internal listener bound (the `internal` fact of its start line)."""

    def bound() -> int:
        for line in api.run_log().splitlines():
            if API_LISTENING in line and (found := re.search(r" internal=\S+:(\d+)", line)):
                return int(found.group(1))
        return 0

    return api.wait_until(bound, timeout=timeout, what="the api's internal listener address")


def lookup_url(port: int) -> str:
    return f"https://{LOOKUP_HOST}:{port}{names.MODELS_LOOKUP_PATH}"


def lookup_help(*, out_dir: Path, port: int) -> str:
    """The banner's lines on the lookup API."""
    return f"""The internal lookup API (TLS, certificate of {LOOKUP_HOST} signed by the module CA
{out_dir}/{CA_FILE}; port {port}, {INTERNAL_PORT_VARIABLE} sets it):
  curl -s --cacert "$AI_MODELS_DEV_MODULE_CA_FILE" --resolve "$AI_MODELS_LOOKUP_RESOLVE" \\
    -H "Authorization: Bearer $AI_MODELS_TOKEN_USER" \\
    "$AI_MODELS_LOOKUP_URL?kind=Model&namespace=default&name=qwen3-0-6b"
"""
