"""The internal lookup API: only on the TLS listener (a certificate signed by a CA the client
trusts), what other modules need to know about a Model or ClusterModel, and no `state` field."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.api.models_lookup import ModelLookup
from support.eventually import eventually

MODULE_NAMESPACE = "d8-ai-models"

LOOKUP = "/api/internal/v1/models/lookup"
DIGEST = "sha256:" + "ab" * 32
STATUS: dict[str, Any] = {
    "phase": "Ready",
    "source": {"resolvedType": "Upload"},
    "artifact": {
        "uri": "s3://ai-models/artifacts/namespaced/team-a/llama/abab",
        "digest": DIGEST,
        "sizeBytes": 4096,
        "size": "4.0 KiB",
    },
    "resolved": {
        "format": "GGUF",
        "family": "llama",
        "architecture": "LlamaForCausalLM",
        "parameterCount": 8_000_000_000,
        "quantization": "Q4_K_M",
        "contextWindowTokens": 8192,
        "supportedEndpointTypes": ["Chat", "TextGeneration"],
        "supportedFeatures": ["ToolCalling"],
        "resources": {
            "format": "GGUF",
            "parameterCount": 8_000_000_000,
            "layers": 32,
            "kvHeads": 8,
            "headDim": 128,
        },
    },
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "observedGeneration": 1,
            "lastTransitionTime": "2026-02-01T12:00:00Z",
            "reason": "Ready",
            "message": "the artifact is published",
        }
    ],
}


@pytest.fixture
def api(start_api: Any, store: DirectoryStore) -> Any:
    return start_api(store, internal_tls=True, api_object_cache_seconds=0)


@pytest.fixture
def reader(api_cluster: Any) -> Any:
    return api_cluster.user("inference")


@pytest.fixture
def internal(api: Any, reader: Any) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=api.internal_url,
        verify=ssl.create_default_context(cafile=str(api.ca_file)),
        timeout=30,
        headers={"Authorization": f"Bearer {reader.token}"},
    ) as client:
        yield client


def problem(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["type"] == f"urn:ai-models:problem:{kind}"
    return body


def test_a_ready_model_as_other_modules_see_it(api_cluster: Any, internal: httpx.Client) -> None:
    owner = api_cluster.model("llama", namespace="team-a", status=STATUS)
    response = internal.get(LOOKUP, params={"kind": "Model", "namespace": "team-a", "name": "llama"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert "state" not in body
    assert body == {
        "kind": "Model",
        "namespace": "team-a",
        "name": "llama",
        "uid": owner.uid,
        "phase": "Ready",
        "artifact": STATUS["artifact"],
        "resolved": STATUS["resolved"],
        "conditions": STATUS["conditions"],
        "delivery": {
            "path": "/data/modelcache/models/llama",
            "manifestURL": f"http://ai-models-api.{MODULE_NAMESPACE}.svc/api/serving/v1/models/team-a/llama/manifest",
        },
    }
    ModelLookup.model_validate(body)


def test_a_cluster_model_has_no_namespace_and_a_new_one_is_pending(
    api_cluster: Any, internal: httpx.Client
) -> None:
    owner = api_cluster.model("shared")
    body = internal.get(LOOKUP, params={"kind": "ClusterModel", "name": "shared"}).json()
    assert body == {
        "kind": "ClusterModel",
        "name": "shared",
        "uid": owner.uid,
        "phase": "Pending",
        "delivery": {
            "path": "/data/modelcache/models/shared",
            "manifestURL": f"http://ai-models-api.{MODULE_NAMESPACE}.svc/api/serving/v1/clustermodels/shared/manifest",
        },
    }
    api_cluster.set_status(owner, {"phase": "WaitForUpload"})
    assert (
        internal.get(LOOKUP, params={"kind": "ClusterModel", "name": "shared"}).json()["phase"]
        == "WaitForUpload"
    )


def test_lookup_errors(api_cluster: Any, internal: httpx.Client) -> None:
    body = problem(
        internal.get(LOOKUP, params={"kind": "Model", "namespace": "team-a", "name": "nope"}),
        404,
        "not-found",
    )
    assert "Model team-a/nope" in body["detail"]
    problem(internal.get(LOOKUP, params={"kind": "ClusterModel", "name": "nope"}), 404, "not-found")
    problem(internal.get(LOOKUP, params={"kind": "Pod", "name": "x"}), 400, "invalid-parameter")
    missing = problem(internal.get(LOOKUP, params={"kind": "Model", "name": "x"}), 400, "invalid-parameter")
    assert "namespace" in missing["detail"]
    extra = problem(
        internal.get(LOOKUP, params={"kind": "ClusterModel", "namespace": "a", "name": "x"}),
        400,
        "invalid-parameter",
    )
    assert "cluster-scoped" in extra["detail"]
    problem(
        internal.get(LOOKUP, params={"kind": "Model", "namespace": "a", "name": "x", "state": "1"}),
        400,
        "invalid-parameter",
    )


def test_the_caller_needs_get_on_the_object(api_cluster: Any, api: Any) -> None:
    api_cluster.model("private", namespace="team-a", status=STATUS)
    outsider = api_cluster.user("outsider", namespace="default")
    with httpx.Client(
        base_url=api.internal_url, verify=ssl.create_default_context(cafile=str(api.ca_file)), timeout=30
    ) as http:
        params = {"kind": "Model", "namespace": "team-a", "name": "private"}
        body = problem(
            http.get(LOOKUP, params=params, headers={"Authorization": f"Bearer {outsider.token}"}),
            403,
            "forbidden",
        )
        assert "get models.ai.deckhouse.io 'private' in namespace 'team-a'" in body["detail"]
        problem(http.get(LOOKUP, params=params), 401, "unauthenticated")


def test_each_listener_serves_only_its_own_paths(api: Any, internal: httpx.Client, reader: Any) -> None:
    params = {"kind": "ClusterModel", "name": "x"}
    with httpx.Client(
        base_url=api.url, timeout=30, headers={"Authorization": f"Bearer {reader.token}"}
    ) as public:
        body = problem(public.get(LOOKUP, params=params), 404, "not-found")
        assert "/api/catalog-import/v1" in body["detail"]
        assert public.get("/healthz").status_code == 200
    # The serving API is there too (the node plugin's and the materializers' way in, D159).
    elsewhere = ("/api/catalog-import/v1/sources", "/healthz", "/openapi.json", "/api/upload/v1/openapi.json")
    for path in elsewhere:
        body = problem(internal.get(path), 404, "not-found")
        assert "only /api/internal/v1/models/lookup, the serving API under /api/serving/v1" in body["detail"]
    contract = internal.get("/api/internal/v1/openapi.json")
    assert contract.status_code == 200
    assert LOOKUP in contract.json()["paths"]


def test_the_internal_listener_speaks_only_verified_tls(api: Any) -> None:
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{api.internal_url}/api/internal/v1/openapi.json", timeout=10)
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(
            api.internal_url.replace("https://", "http://") + "/api/internal/v1/openapi.json", timeout=10
        )


def _serve(
    api_cluster: Any, store: DirectoryStore, tmp_path: Path, *, port: int = 0, **env: str
) -> tuple[subprocess.Popen[bytes], Path]:
    variables = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AI_MODELS_", "KUBERNETES_"))},
        "KUBECONFIG": str(api_cluster.emulator.kubeconfig(api_cluster.api_account)),
        "AI_MODELS_STORE_URL": f"file://{store.root}",
        "AI_MODELS_NAMESPACE": MODULE_NAMESPACE,
        "AI_MODELS_API_METRICS_PORT": "0",
        **env,
    }
    code = (
        "import sys\n"
        "from ai_models.logs import configure_logging\n"
        "from ai_models.settings import LogFormat, LogLevel, Settings\n"
        "from ai_models.api.server import serve\n"
        "configure_logging(level=LogLevel.INFO, log_format=LogFormat.JSON)\n"
        f"sys.exit(serve(Settings(), host='127.0.0.1', port={port}))\n"
    )
    log_path = tmp_path / f"api-{len(list(tmp_path.glob('api-*.log')))}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", code], env=variables, stdout=log, stderr=subprocess.STDOUT
        )
    return process, log_path


def _entries(log_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]


def _messages(log_path: Path) -> list[str]:
    return [entry["msg"] for entry in _entries(log_path)]


def _started(process: subprocess.Popen[bytes], log_path: Path) -> dict[str, Any]:
    """The "api starting" line: its listeners bound port 0 and it names the addresses they got."""

    def line() -> dict[str, Any] | None:
        assert process.poll() is None, log_path.read_text()
        return next((entry for entry in _entries(log_path) if entry["msg"] == "api starting"), None)

    found = eventually(line, timeout=30, message=lambda: f"the api to start:\n{log_path.read_text()}")
    assert found is not None
    return found


def test_serve_runs_both_listeners_and_stops_them_on_sigterm(
    api_cluster: Any, store: DirectoryStore, tmp_path: Path, write_tls_files: Any
) -> None:
    cert, key, ca = write_tls_files(tmp_path / "tls")
    process, log_path = _serve(
        api_cluster,
        store,
        tmp_path,
        AI_MODELS_API_INTERNAL_PORT="0",
        AI_MODELS_API_TLS_CERT_FILE=str(cert),
        AI_MODELS_API_TLS_KEY_FILE=str(key),
    )
    user = api_cluster.user("inference")
    api_cluster.model("served", status={"phase": "Ready"})
    try:
        started = _started(process, log_path)
        address, internal = started["address"], started["internal"]
        found = httpx.get(
            f"https://{internal}{LOOKUP}",
            params={"kind": "ClusterModel", "name": "served"},
            headers={"Authorization": f"Bearer {user.token}"},
            verify=ssl.create_default_context(cafile=str(ca)),
            timeout=5,
        )
        assert found.status_code == 200, found.text
        assert found.json()["phase"] == "Ready"
        assert httpx.get(f"http://{address}/healthz", timeout=5).status_code == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log_path.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    messages = _messages(log_path)
    assert "api starting" in messages
    assert messages[-1] == "api stopped"
    for listening in (address, internal):
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", int(listening.rsplit(":", 1)[1]))) != 0


def test_serve_without_a_certificate_says_the_internal_listener_is_off(
    api_cluster: Any, store: DirectoryStore, tmp_path: Path
) -> None:
    process, log_path = _serve(api_cluster, store, tmp_path)
    try:
        _started(process, log_path)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert any(message.startswith("internal listener (lookup, serving") for message in _messages(log_path))


def test_serve_refuses_half_a_certificate(
    api_cluster: Any, store: DirectoryStore, tmp_path: Path, write_tls_files: Any
) -> None:
    cert, _key, _ca = write_tls_files(tmp_path / "tls")
    process, log_path = _serve(api_cluster, store, tmp_path, AI_MODELS_API_TLS_CERT_FILE=str(cert))
    assert process.wait(timeout=60) == 2
    assert "AI_MODELS_API_TLS_KEY_FILE" in log_path.read_text()
