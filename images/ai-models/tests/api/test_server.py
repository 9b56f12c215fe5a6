"""The api as a server: probes, the served contract, errors in one shape, metrics, a clean stop."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.api import server as server_module
from ai_models.api.contract import contract_document
from ai_models.api.metrics import MetricsServer
from ai_models.catalog.layout import CatalogManifest
from ai_models.domain.catalog.record import CatalogRecord
from support.eventually import eventually
from support.metrics_contract import API_TRANSFER_METRICS, exported_metrics
from support.processes import API_LISTENING, METRICS_LISTENING, logged_address

RecordMaker = Callable[..., CatalogRecord]
GenerationWriter = Callable[..., CatalogManifest]
SEARCH = "/api/catalog-import/v1/models"


@pytest.fixture
def one_model_store(
    store: DirectoryStore, make_record: RecordMaker, write_generation: GenerationWriter
) -> Any:
    write_generation(store, "hf", "g1", [[make_record("hf", "org/model", downloads=1)]])
    return store


def test_readiness_does_not_wait_for_the_index(
    api_cluster: Any, start_api: Any, one_model_store: DirectoryStore, gated_store: Any
) -> None:
    gated = gated_store(one_model_store, gated_prefix="catalog/hf/generations/")
    api = start_api(gated)
    user = api_cluster.user("reader")
    try:
        assert gated.waiting.wait(timeout=10)
        with httpx.Client(base_url=api.url, timeout=10) as http:
            ready = http.get("/readyz")
            assert ready.status_code == 200
            assert ready.json() == {"status": "Ready", "firstIndexPassComplete": False, "sources": 0}
            assert http.get("/healthz").json() == {"status": "Alive"}
            # Searching a partial index answers with what it has.
            found = http.get(SEARCH, headers={"Authorization": f"Bearer {user.token}"})
            assert found.status_code == 200
            assert found.json() == {"items": []}
            gated.release.set()
            assert api.runtime.builder.first_pass_complete.wait(timeout=10)
            assert http.get("/readyz").json() == {
                "status": "Ready",
                "firstIndexPassComplete": True,
                "sources": 1,
            }
    finally:
        gated.release.set()


def test_readiness_turns_503_when_shutting_down(start_api: Any, store: DirectoryStore) -> None:
    api = start_api(store)
    api.runtime.state.shutting_down.set()
    with httpx.Client(base_url=api.url, timeout=10) as http:
        response = http.get("/readyz")
    assert response.status_code == 503
    assert response.json()["type"] == "urn:ai-models:problem:not-ready"


def test_the_served_document_is_the_contract_and_needs_no_token(
    start_api: Any, store: DirectoryStore
) -> None:
    api = start_api(store)
    # At the API's own prefix, as every API serves its contract, and where it was first served.
    for path in ("/api/catalog-import/v1/openapi.json", "/openapi.json"):
        with httpx.Client(base_url=api.url, timeout=10) as http:
            response = http.get(path)
        assert response.status_code == 200, path
        assert response.headers["content-type"] == "application/json"
        assert response.json() == contract_document()


def test_errors_are_problem_documents(api_cluster: Any, start_api: Any, store: DirectoryStore) -> None:
    api = start_api(store)
    auth = {"Authorization": f"Bearer {api_cluster.user('reader').token}"}
    with httpx.Client(base_url=api.url, timeout=10, headers=auth) as http:
        unknown = http.get("/api/catalog-import/v2/models")
        assert unknown.status_code == 404
        assert unknown.json()["type"] == "urn:ai-models:problem:not-found"
        wrong_method = http.post(SEARCH)
        assert wrong_method.status_code == 405
        assert wrong_method.json()["type"] == "urn:ai-models:problem:method-not-allowed"
        assert "GET" in wrong_method.headers["allow"]
        invalid = http.get(SEARCH, params={"pageSize": "0", "sort": "Stars"})
        assert invalid.status_code == 400
        assert invalid.headers["content-type"] == "application/problem+json"
        detail = invalid.json()["detail"]
        assert "pageSize" in detail
        assert "sort" in detail
        misspelt = http.get(SEARCH, params={"pipeline_tag": "text-generation"})
        assert misspelt.status_code == 400
        assert "'pipeline_tag'" in misspelt.json()["detail"]
        assert "pipelineTag" in misspelt.json()["detail"]
        bad_id = http.get("/api/catalog-import/v1/sources/hf/models/a//b")
        assert bad_id.status_code == 400
        assert "id" in bad_id.json()["detail"]
        for problem in (unknown, wrong_method, invalid, misspelt, bad_id):
            assert set(problem.json()) == {"type", "title", "status", "detail"}


def test_an_entry_id_may_carry_its_slash_literally_or_encoded(
    api_cluster: Any,
    start_api: Any,
    store: DirectoryStore,
    make_record: RecordMaker,
    write_generation: GenerationWriter,
) -> None:
    write_generation(
        store, "hf", "g1", [[make_record("hf", "meta-llama/Llama-3.1-8B"), make_record("hf", "gpt2")]]
    )
    api = start_api(store)
    assert api.runtime.builder.first_pass_complete.wait(timeout=10)
    auth = {"Authorization": f"Bearer {api_cluster.user('reader').token}"}
    with httpx.Client(base_url=api.url, timeout=10, headers=auth) as http:
        base = "/api/catalog-import/v1/sources/hf/models/"
        for path in ("meta-llama/Llama-3.1-8B", "meta-llama%2FLlama-3.1-8B", "gpt2"):
            response = http.get(base + path)
            assert response.status_code == 200, (path, response.text)
            assert response.json()["id"] == path.replace("%2F", "/")


def test_metrics_count_requests_by_route_template_and_describe_the_index(
    api_cluster: Any,
    start_api: Any,
    store: DirectoryStore,
    make_record: RecordMaker,
    write_generation: GenerationWriter,
) -> None:
    write_generation(store, "hf", "g1", [[make_record("hf", "org/model")]])
    api = start_api(store)
    assert api.runtime.builder.first_pass_complete.wait(timeout=10)
    metrics = MetricsServer(api.runtime.metrics, host="127.0.0.1", port=0)
    try:
        auth = {"Authorization": f"Bearer {api_cluster.user('reader').token}"}
        with httpx.Client(base_url=api.url, timeout=10, headers=auth) as http:
            http.get("/api/catalog-import/v1/sources/hf/models/org/model")
            http.get("/api/catalog-import/v1/sources/hf/models/org/other")
        text = httpx.get(f"http://127.0.0.1:{metrics.port}/metrics", timeout=10).text
    finally:
        metrics.stop()
    route = "/api/catalog-import/v1/sources/{source}/models/{id}"
    assert f'd8_ai_models_api_requests_total{{code="200",method="GET",route="{route}"}} 1.0' in text
    assert f'd8_ai_models_api_requests_total{{code="404",method="GET",route="{route}"}} 1.0' in text
    assert f'd8_ai_models_api_request_duration_seconds_count{{method="GET",route="{route}"}} 2.0' in text
    assert 'd8_ai_models_api_catalog_index_entries{source="hf"} 1.0' in text
    assert 'd8_ai_models_api_catalog_index_build_duration_seconds_count{source="hf"} 1.0' in text
    assert 'd8_ai_models_api_catalog_index_last_refresh_timestamp_seconds{source="hf"}' in text
    assert "d8_ai_models_api_catalog_index_last_successful_poll_timestamp_seconds " in text
    assert 'd8_ai_models_api_kubernetes_calls_total{call="TokenReview",result="Success"} 1.0' in text


def test_the_transfer_counters_are_exported_under_their_contract_names() -> None:
    assert exported_metrics() >= API_TRANSFER_METRICS


def test_serve_runs_until_sigterm_and_stops_cleanly(
    api_cluster: Any,
    store: DirectoryStore,
    make_record: RecordMaker,
    write_generation: GenerationWriter,
    tmp_path: Path,
) -> None:
    write_generation(store, "hf", "g1", [[make_record("hf", "org/model", downloads=1)]])
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AI_MODELS_", "KUBERNETES_"))},
        "KUBECONFIG": str(api_cluster.emulator.kubeconfig(api_cluster.api_account)),
        "AI_MODELS_STORE_URL": f"file://{store.root}",
        "AI_MODELS_NAMESPACE": "d8-ai-models",
        "AI_MODELS_API_METRICS_PORT": "0",
        "AI_MODELS_API_INDEX_REFRESH_SECONDS": "0.2",
    }
    code = (
        "import logging, sys\n"
        "from ai_models.logs import configure_logging\n"
        "from ai_models.settings import LogFormat, LogLevel, Settings\n"
        "from ai_models.api.server import serve\n"
        "configure_logging(level=LogLevel.INFO, log_format=LogFormat.JSON)\n"
        "sys.exit(serve(Settings(), host='127.0.0.1', port=0))\n"
    )
    log_path = tmp_path / "api.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", code], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        user = api_cluster.user("reader")

        def bound(message: str) -> str:
            assert process.poll() is None, log_path.read_text()
            lines = log_path.read_text().splitlines()
            return next((found for line in lines if (found := logged_address(line, message))), "")

        # Port 0 for both listeners: the api logs the addresses it bound.
        address = eventually(lambda: bound(API_LISTENING), message="the api's address in its log")
        metrics_address = eventually(lambda: bound(METRICS_LISTENING), message="the metrics address")

        def served() -> bool:
            assert process.poll() is None, log_path.read_text()
            found = httpx.get(
                f"http://{address}{SEARCH}", headers={"Authorization": f"Bearer {user.token}"}, timeout=5
            )
            return found.status_code == 200 and bool(found.json()["items"])

        eventually(served, timeout=30, message=lambda: f"a search result:\n{log_path.read_text()}")
        assert "d8_ai_models_api_requests_total" in httpx.get(f"http://{metrics_address}/metrics").text
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    messages = [line["msg"] for line in lines]
    assert "api starting" in messages
    assert "catalog source indexed" in messages
    assert messages[-1] == "api stopped"
    assert user.token not in log_path.read_text()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "AI_MODELS_STORE_URL"),
        ({"AI_MODELS_STORE_URL": "file:///tmp", "KUBECONFIG": "/nonexistent/kubeconfig"}, "kubeconfig"),
    ],
)
def test_serve_refuses_to_start_without_a_store_or_a_cluster(env: dict[str, str], message: str) -> None:
    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("AI_MODELS_", "KUBERNETES_", "KUBECONFIG"))
    }
    code = (
        "import sys\n"
        "from ai_models.logs import configure_logging\n"
        "from ai_models.settings import LogFormat, LogLevel, Settings\n"
        "from ai_models.api.server import serve\n"
        "configure_logging(level=LogLevel.INFO, log_format=LogFormat.JSON)\n"
        "sys.exit(serve(Settings(), host='127.0.0.1', port=0))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env={**base, "HOME": "/nonexistent", **env},
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert message in result.stderr.decode()


def test_a_listener_takes_connections_from_the_moment_the_api_says_it_starts() -> None:
    # The socket is made before "api starting" is logged and served by uvicorn a moment later; a
    # client that read the line and connected at once was refused while the socket only had a port.
    listener = server_module._listen("127.0.0.1", 0)
    try:
        with socket.create_connection(listener.getsockname()[:2], timeout=5):
            pass
    finally:
        listener.close()
