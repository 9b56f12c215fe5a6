"""The internal lookup API in the dev stack, over TLS with the module CA.

The chart is rendered with the certificates the internal TLS hook issues (`support.module_tls`): the
module CA and the api's certificate for the names of its Service (`ai-models-api.d8-ai-models.svc`
and the rest). The dev stack gives the api the files the kubelet would mount from the Secret
`ai-models-api-tls`, so its internal listener serves exactly that certificate, and writes the CA to
`<out>/module-ca.crt`. A client checks the certificate against that CA and the Service's name while
it connects to 127.0.0.1 (`curl --resolve`), as the ai-inference module does in a cluster.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

from ai_models import names
from support.devcomponents import mounted_config_maps
from support.processes import API_LISTENING, ModuleProcess
from support.render import RenderedChart

INTERNAL_PORT_VARIABLE = "AI_MODELS_DEV_API_INTERNAL_PORT"
DEFAULT_INTERNAL_PORT = 18444
# The name the api's certificate carries first (the hook issues it for the Service's DNS names).
LOOKUP_HOST = f"{names.API_SERVICE}.{names.MODULE_NAMESPACE}.svc"
CA_FILE = "module-ca.crt"


def lookup_env(chart: RenderedChart, *, out_dir: Path, port: int) -> dict[str, str]:
    """The api's internal-listener variables: the chart's certificate files (local copies of the
    Secret volume) and `port` (0 = any free one), and the module CA written to `<out>/module-ca.crt`."""
    mounted = mounted_config_maps(
        chart, deployment="ai-models-api", container="api", directory=out_dir / "config"
    )
    tls = {key: mounted[key] for key in ("AI_MODELS_API_TLS_CERT_FILE", "AI_MODELS_API_TLS_KEY_FILE")}
    ca = chart.get("Secret", names.ROOT_CA_SECRET)["data"]["tls.crt"]
    (out_dir / CA_FILE).write_bytes(base64.b64decode(ca))
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
