"""What the guides describe, tried in `make dev` (issue 16, item 3): the internal lookup API over TLS
with the dev stack's module CA, a storage budget that makes an upload 507, `kubectl logs` of a
publication Pod, and `status.upload.external`."""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3

from fakes.hub import FakeHub
from fakes.hub_corpus import repository
from fakes.model_files import safetensors_bytes
from support.eventually import eventually
from testbed.dev_budget import CAPACITY_VARIABLE
from testbed.dev_lookup import LOOKUP_HOST
from testbed.test_devstack import env_of, refused_start, run_devstack, run_kubectl

BUDGET = "64Ki"


@pytest.fixture
def budget_devstack(tmp_path: Path, fake_hub: FakeHub) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    yield from run_devstack(
        tmp_path, fake_hub, **{CAPACITY_VARIABLE: BUDGET, "AI_MODELS_DEV_API_INTERNAL_PORT": "0"}
    )


def api_get(out: Path, path: str, token: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{env_of(out)['AI_MODELS_API_URL']}{path}", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def lookup(out: Path, query: str, *, token: str, ca_file: str) -> urllib3.BaseHTTPResponse:
    """GET the lookup API at 127.0.0.1 checking the certificate for the api Service's name, as a
    client in the cluster does (`curl --resolve` in the banner)."""
    env = env_of(out)
    url = urllib3.util.parse_url(env["AI_MODELS_LOOKUP_URL"])
    assert url.host == LOOKUP_HOST
    pool = urllib3.HTTPSConnectionPool(
        "127.0.0.1",
        url.port,
        ca_certs=ca_file,
        cert_reqs=ssl.CERT_REQUIRED,
        server_hostname=LOOKUP_HOST,
        assert_hostname=LOOKUP_HOST,
        retries=False,
        timeout=10,
    )
    with pool:
        return pool.request("GET", f"{url.path}?{query}", headers={"Authorization": f"Bearer {token}"})


def test_dev_stack_serves_lookup_over_tls_a_budget_pod_logs_and_the_external_upload_url(
    budget_devstack: tuple[subprocess.Popen[str], Path], fake_hub: FakeHub
) -> None:
    process, out = budget_devstack
    env = env_of(out)
    user, admin = env["AI_MODELS_TOKEN_USER"], env["AI_MODELS_TOKEN_CLUSTER_ADMIN"]
    fake_hub.add(
        repository(
            "acme/tiny",
            {
                "config.json": b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}',
                "model.safetensors": safetensors_bytes({"w": ("F16", (32, 32))}),
            },
        )
    )
    models = """
apiVersion: ai.deckhouse.io/v1alpha1
kind: Model
metadata: {name: tiny, namespace: default}
spec: {source: {url: "https://huggingface.co/acme/tiny"}}
---
apiVersion: ai.deckhouse.io/v1alpha1
kind: Model
metadata: {name: mine, namespace: default}
spec: {source: {upload: {}}}
"""
    # Slow Hub answers keep the publication running (its Job is removed once it ends) while
    # `kubectl logs -f` follows its Pod, as the admin guide shows.
    fake_hub.set_latency(1.0)
    assert run_kubectl(out, "apply", "-f", "-", stdin=models).returncode == 0
    uid = run_kubectl(out, "get", "model", "tiny", "-n", "default", "-o", "jsonpath={.metadata.uid}").stdout
    eventually(
        lambda: run_kubectl(out, "get", "-n", "d8-ai-models", f"job/publish-{uid}").returncode == 0,
        timeout=30,
        message="the publication Job",
    )
    logs = run_kubectl(out, "logs", "-n", "d8-ai-models", f"job/publish-{uid}", "-c", "publish", "-f")
    fake_hub.set_latency(0)
    assert logs.returncode == 0, logs.stderr
    [pod_log] = (out / "jobs" / "d8-ai-models").glob(f"publish-{uid}-*/log")
    assert logs.stdout == pod_log.read_text() != ""
    waited = run_kubectl(out, "wait", "-n", "default", "--for=condition=Ready", "model/tiny", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr + (out / "logs" / "controller.log").read_text()[-3000:]
    tiny = json.loads(run_kubectl(out, "get", "model", "tiny", "-n", "default", "-o", "json").stdout)

    # The lookup API over TLS: the api Service's certificate, signed by the module CA of the env file.
    answer = lookup(
        out, "kind=Model&namespace=default&name=tiny", token=user, ca_file=env["AI_MODELS_DEV_MODULE_CA_FILE"]
    )
    assert answer.status == 200, answer.data
    found = json.loads(answer.data)
    assert (found["uid"], found["phase"]) == (tiny["metadata"]["uid"], "Ready")
    assert found["artifact"]["digest"] == tiny["status"]["artifact"]["digest"]
    # ... and not by the emulator's CA: it is the module's own.
    with pytest.raises(urllib3.exceptions.SSLError):
        lookup(
            out, "kind=Model&namespace=default&name=tiny", token=user, ca_file=env["AI_MODELS_DEV_CA_FILE"]
        )

    # The budget is the module setting artifacts.capacityLimit: the summary names it, and an upload
    # larger than what is left answers 507 InsufficientStorage.
    summary = eventually(
        lambda: (s := api_get(out, "/api/catalog-import/v1/storage-summary", user))["usageKnown"] and s,
        timeout=30,
        message="the inventory pass confirming the ledger",
    )
    assert summary["capacityBytes"] == 64 * 1024
    waited = run_kubectl(
        out,
        "wait",
        "-n",
        "default",
        "--for=jsonpath={.status.phase}=WaitForUpload",
        "model/mine",
        "--timeout=30s",
    )
    assert waited.returncode == 0, waited.stderr
    upload = json.loads(run_kubectl(out, "get", "model", "mine", "-n", "default", "-o", "json").stdout)[
        "status"
    ]["upload"]
    # status.upload.external: the guide's `jsonpath={.status.upload.external}` gives a URL to PUT to.
    assert upload["external"].startswith(f"{env['AI_MODELS_API_URL']}/api/upload/v1/")
    request = urllib.request.Request(
        upload["external"] + "?filename=mine.gguf",
        data=b"\0" * (128 * 1024),
        method="PUT",
        headers={"Authorization": f"Bearer {admin}"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 507
    assert "does not fit the storage budget" in json.loads(refused.value.read())["detail"]

    banner = ""
    process.terminate()
    assert process.wait(timeout=30) == 0
    banner = process.communicate(timeout=10)[0]
    assert '--resolve "$AI_MODELS_LOOKUP_RESOLVE"' in banner
    assert (
        env["AI_MODELS_LOOKUP_RESOLVE"]
        == f"{LOOKUP_HOST}:{urllib3.util.parse_url(env['AI_MODELS_LOOKUP_URL']).port}:127.0.0.1"
    )
    assert f"The storage budget is {BUDGET}" in banner
    assert "logs job/publish-" in banner


def test_a_budget_that_is_no_quantity_stops_the_dev_stack_naming_the_variable(tmp_path: Path) -> None:
    ended = refused_start(tmp_path / "dev", timeout=60, **{CAPACITY_VARIABLE: "lots"})
    assert ended.returncode == 1
    assert f"{CAPACITY_VARIABLE}='lots' is not a storage budget" in ended.stderr
    assert "Traceback" not in ended.stderr
