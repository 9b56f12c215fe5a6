"""Property-based: the running api (uvicorn, real auth against the emulator, a populated store)
answers every request schemathesis derives from the contract as the contract says, under all of
schemathesis' default checks (status codes, content types, response schemas and headers, server
errors, acceptance of valid and rejection of invalid input, ignored authentication).
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode

from ai_models.adapters.kube import ClientOptions, new_api_client
from ai_models.adapters.objectstore import DirectoryStore
from ai_models.api.contract import contract_document
from ai_models.api.server import BackgroundServer, build_runtime
from ai_models.api.settings import ApiSettings
from ai_models.catalog.layout import CatalogManifest
from ai_models.domain.catalog.record import CatalogRecord
from kubeemu.access_levels import grant_access_level
from kubeemu.authn import Identity, new_token
from kubeemu.pytest_fixtures import REPO_CRDS, RunningEmulator, start_emulator

RecordMaker = Callable[..., CatalogRecord]
GenerationWriter = Callable[..., CatalogManifest]
MAX_EXAMPLES = 150


def _records(make_record: RecordMaker, source: str, count: int) -> list[CatalogRecord]:
    records = []
    for n in range(count):
        facts: dict[str, Any] = {
            "downloads": n * 37 % 11,
            "tags": (f"tag{n % 3}", "text"),
            "pipeline_tag": ("text-generation", "fill-mask")[n % 2],
            "library_name": "transformers",
            "created_at": datetime.datetime(2025, 1, 1 + n % 28, tzinfo=datetime.UTC),
        }
        if n % 4:
            facts.update(
                parameter_count=n * 1_000_000, weights_bytes=n * 2_000_000, architecture="LlamaForCausalLM"
            )
        records.append(make_record(source, f"org{n % 3}/model-{n}", **facts))
    records.append(make_record(source, "gpt2", downloads=5))
    return records


@pytest.fixture(scope="module")
def running_api(
    tmp_path_factory: pytest.TempPathFactory,
    make_record: RecordMaker,
    write_generation: GenerationWriter,
    install_api_account: Callable[[RunningEmulator], Identity],
) -> Iterator[tuple[str, str]]:
    workdir: Path = tmp_path_factory.mktemp("fuzzing")
    emulator = start_emulator(workdir / "emulator", crd_dirs=[REPO_CRDS])
    api_client = None
    server = None
    runtime = None
    try:
        account = install_api_account(emulator)
        user = emulator.add_identity(Identity(name="fuzzer", token=USER_TOKEN))
        grant_access_level(emulator.cluster, user, "User")
        store = DirectoryStore(workdir / "store")
        write_generation(store, "hf", "g1", [_records(make_record, "hf", 30)])
        write_generation(store, "mirror", "m1", [_records(make_record, "mirror", 7)])
        api_client = new_api_client(ClientOptions(retries=1), kubeconfig=str(emulator.kubeconfig(account)))
        config = ApiSettings(namespace="d8-ai-models", capacity_limit_bytes=40_000_000, api_index_dir=None)
        runtime = build_runtime(config, store=store, api_client=api_client)
        runtime.builder.start()
        assert runtime.builder.first_pass_complete.wait(timeout=30)
        server = BackgroundServer(runtime.app, shutting_down=runtime.state.shutting_down).start()
        yield server.url, user.token
    finally:
        if server is not None:
            server.stop()
        if runtime is not None:
            runtime.close()
        if api_client is not None:
            api_client.close()
        emulator.close()


# Loaded at import (schemathesis' lazy fixture loader does not work with this pytest); the running
# api's address is passed to each call. The user's token is minted here, before the emulator that
# will know it starts, because schemathesis must know its credentials when it builds the tests:
# configured headers are how it tells them from generated ones. Its `ignored_auth` check still
# sends each operation without and with a wrong token and expects 401.
USER_TOKEN = new_token()
schema = schemathesis.openapi.from_dict(copy.deepcopy(contract_document()))
schema.config.update(headers={"Authorization": f"Bearer {USER_TOKEN}"})
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=MAX_EXAMPLES
)


@schema.hook("filter_failure")
def _page_tokens_are_issued_not_guessed(_context: Any, failure: Any, case: Any, response: Any) -> bool:
    """Keep every failure except valid-looking page tokens refused as not issued by this api.

    A page token is opaque and server-issued, which a schema cannot express: any string matching
    its pattern is "schema-valid", yet only the api's own `nextPageToken`s are tokens. Every other
    check still runs on those requests; `test_issued_page_tokens_keep_the_contract` uses real ones.
    """
    refused_token = (
        response.status_code == 400
        and "pageToken" in (case.query or {})
        and response.json().get("type") == "urn:ai-models:problem:invalid-page-token"
    )
    return not (refused_token and type(failure).__name__ == "RejectedPositiveData")


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_running_api_keeps_its_contract(case: Any, running_api: tuple[str, str]) -> None:
    url, _token = running_api
    case.call_and_validate(base_url=url)


@pytest.mark.parametrize(
    "query",
    [
        {"pageSize": 7},
        {"pageSize": 4, "sort": "WeightsBytes", "q": "org1"},
        {"pageSize": 3, "verdict": "NotFeasible", "pipelineTag": "text-generation"},
    ],
)
def test_issued_page_tokens_keep_the_contract(running_api: tuple[str, str], query: dict[str, Any]) -> None:
    """Fuzzing cannot guess issued page tokens, so walk real pages, every answer under the same checks."""
    url, token = running_api
    operation = schema["/api/catalog-import/v1/models"]["GET"]
    seen: list[str] = []
    page_token = None
    for _ in range(50):
        params = {**query, **({"pageToken": page_token} if page_token else {})}
        response = operation.Case(query=params).call_and_validate(
            base_url=url, headers={"Authorization": f"Bearer {token}"}
        )
        body = response.json()
        seen += [f"{item['source']}:{item['id']}" for item in body["items"]]
        page_token = body.get("nextPageToken")
        if page_token is None:
            break
    everything = operation.Case(query={**query, "pageSize": 500}).call_and_validate(
        base_url=url, headers={"Authorization": f"Bearer {token}"}
    )
    assert seen == [f"{item['source']}:{item['id']}" for item in everything.json()["items"]]
    assert len(seen) > query["pageSize"]
