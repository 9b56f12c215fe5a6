"""Property-based: the running api (uvicorn, real auth against the emulator as the api's own
ServiceAccount, a populated store, both listeners) answers every request schemathesis derives from
each of the four contracts as the contract says, under all of schemathesis' default checks (status
codes, content types, response schemas and headers, server errors, acceptance of valid and
rejection of invalid input, ignored authentication).

What a schema cannot express is fed real values explicitly (issued page and upload tokens, objects
that exist), every answer under the same checks.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import CheckFunction, not_a_server_error
from schemathesis.specs.openapi.schemas import OpenApiSchema

from ai_models.adapters.kube import ClientOptions, new_api_client
from ai_models.adapters.objectstore import DirectoryStore
from ai_models.api.contract import Contract, contract_document
from ai_models.api.models_serving import (
    CLUSTER_MODEL_FILE_PATH,
    CLUSTER_MODEL_MANIFEST_PATH,
    CLUSTER_MODELS_PATH,
    MODEL_FILE_PATH,
    MODEL_MANIFEST_PATH,
)
from ai_models.api.server import BackgroundServer, build_runtime
from ai_models.api.settings import ApiSettings
from ai_models.catalog.layout import CatalogManifest
from ai_models.domain.artifacts.layout import file_key, manifest_key
from ai_models.domain.artifacts.manifest import (
    ArtifactFile,
    ArtifactManifest,
    ArtifactSource,
    manifest_to_json,
)
from ai_models.domain.catalog.record import CatalogRecord
from ai_models.domain.publication.upload_token import issue
from ai_models.domain.storage.ledger import Ledger, Owner
from ai_models.names import SourceType
from fakes.model_files import tiny_gguf
from fakes.upload_clients import offer
from kubeemu.authn import Identity, new_token
from kubeemu.pytest_fixtures import REPO_CRDS, RunningEmulator, start_emulator
from testbed.access_levels import grant_access_level

# schemathesis gives every operation of a schema one node id: run where pytest-xdist does not.
pytestmark = pytest.mark.serial

RecordMaker = Callable[..., CatalogRecord]
GenerationWriter = Callable[..., CatalogManifest]
# Per operation, positive and negative (issue 10 raised them from 150 and 80; about 100 s in all).
MAX_EXAMPLES = 400
MAX_EXAMPLES_NEW_APIS = 250
UPLOAD_KEY = b"fuzzing-upload-signing-key-32by!"
FILE = bytes(range(256)) * 64
GGUF = tiny_gguf()


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


@dataclasses.dataclass
class Running:
    url: str
    internal_url: str
    ca_file: Path
    token: str
    cluster: Any
    ready_model: Owner
    ready_cluster_model: Owner
    store: DirectoryStore

    def verify(self) -> str:
        """What schemathesis' HTTP client (requests) takes to trust the internal listener."""
        return str(self.ca_file)

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def _publish(cluster: Any, store: DirectoryStore, owner: Owner) -> None:
    digest = "sha256:" + hashlib.sha256(owner.name.encode()).hexdigest()
    store.put_bytes(file_key(owner, digest, "weights/model.bin"), FILE)
    manifest = ArtifactManifest(
        owner=owner,
        digest=digest,
        source=ArtifactSource(type=SourceType.UPLOAD, upload_sha256=hashlib.sha256(FILE).hexdigest()),
        files=(
            ArtifactFile(path="weights/model.bin", size=len(FILE), sha256=hashlib.sha256(FILE).hexdigest()),
        ),
        resolved={"format": "GGUF"},
        published_at="2026-02-01T12:00:00Z",
    )
    store.put_bytes(manifest_key(owner, digest), manifest_to_json(manifest))
    cluster.set_status(
        owner,
        {
            "phase": "Ready",
            "artifact": {"uri": f"file:///{owner.name}", "digest": digest, "sizeBytes": len(FILE)},
            "resolved": {"format": "GGUF", "contextWindowTokens": 4096},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastTransitionTime": "2026-02-01T12:00:00Z",
                    "reason": "Ready",
                    "message": "published",
                }
            ],
        },
    )


@pytest.fixture(scope="module")
def running_api(  # noqa: PLR0917  (pytest passes fixtures positionally)
    tmp_path_factory: pytest.TempPathFactory,
    make_record: RecordMaker,
    write_generation: GenerationWriter,
    install_api_account: Callable[[RunningEmulator], Identity],
    api_cluster_type: Any,
    write_tls_files: Callable[[Path], tuple[Path, Path, Path]],
) -> Iterator[Running]:
    workdir: Path = tmp_path_factory.mktemp("fuzzing")
    emulator = start_emulator(workdir / "emulator", crd_dirs=[REPO_CRDS])
    api_client = None
    servers: list[BackgroundServer] = []
    runtime = None
    try:
        account = install_api_account(emulator)
        cluster = api_cluster_type(emulator=emulator, api_account=account)
        user = emulator.add_identity(Identity(name="fuzzer", token=USER_TOKEN))
        grant_access_level(emulator.cluster, user, "User")
        cluster.put_signing_key(UPLOAD_KEY)
        store = DirectoryStore(workdir / "store")
        write_generation(store, "hf", "g1", [_records(make_record, "hf", 30)])
        write_generation(store, "mirror", "m1", [_records(make_record, "mirror", 7)])
        ready_model = cluster.model("ready", namespace="team-a", status={"phase": "Publishing"})
        ready_cluster_model = cluster.model("shared", status={"phase": "Publishing"})
        for owner in (ready_model, ready_cluster_model):
            _publish(cluster, store, owner)
        api_client = new_api_client(ClientOptions(retries=1), kubeconfig=str(emulator.kubeconfig(account)))
        config = ApiSettings(
            namespace="d8-ai-models",
            capacity_limit_bytes=40_000_000,
            api_index_dir=None,
            api_object_cache_seconds=0,
        )
        runtime = build_runtime(config, store=store, api_client=api_client)
        runtime.builder.start()
        assert runtime.builder.first_pass_complete.wait(timeout=30)
        cert, key, ca = write_tls_files(workdir / "tls")
        public = BackgroundServer(runtime.app, shutting_down=runtime.state.shutting_down)
        servers.append(public)
        public.start()
        internal = BackgroundServer(
            runtime.internal_app, shutting_down=runtime.state.shutting_down, tls=(cert, key)
        )
        servers.append(internal)
        internal.start()
        yield Running(
            url=public.url,
            internal_url=internal.url,
            ca_file=ca,
            token=user.token,
            cluster=cluster,
            ready_model=ready_model,
            ready_cluster_model=ready_cluster_model,
            store=store,
        )
    finally:
        for server in servers:
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


def _schema(contract: Contract, *, examples: int, bearer: bool = True) -> OpenApiSchema:
    loaded = schemathesis.openapi.from_dict(copy.deepcopy(contract_document(contract)))
    if bearer:
        loaded.config.update(headers={"Authorization": f"Bearer {USER_TOKEN}"})
    loaded.config.generation.update(
        modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=examples
    )
    return loaded


schema = _schema(Contract.CATALOG_IMPORT, examples=MAX_EXAMPLES)
upload_schema = _schema(Contract.UPLOAD, examples=MAX_EXAMPLES_NEW_APIS)
serving_schema = _schema(Contract.SERVING, examples=MAX_EXAMPLES_NEW_APIS)
lookup_schema = _schema(Contract.INTERNAL_LOOKUP, examples=MAX_EXAMPLES_NEW_APIS)


def _problem_type(response: Any) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("type") if isinstance(body, dict) else None


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
        and _problem_type(response) == "urn:ai-models:problem:invalid-page-token"
    )
    # Likewise a `source` filter must name a served source (D146): any name matching the pattern is
    # "schema-valid", and the api refuses one it does not serve as an unknown parameter.
    refused_source = (
        response.status_code == 400
        and "source" in (case.query or {})
        and _problem_type(response) == "urn:ai-models:problem:invalid-parameter"
        and "is not a source this api serves" in response.text
    )
    return not ((refused_token or refused_source) and type(failure).__name__ == "RejectedPositiveData")


@serving_schema.hook("filter_failure")
def _listing_page_tokens_are_issued_not_guessed(
    _context: Any, failure: Any, case: Any, response: Any
) -> bool:
    """The ClusterModel listing's page tokens are as opaque as the search's (see above);
    `test_issued_listing_tokens_keep_the_serving_contract` walks real ones."""
    return bool(_page_tokens_are_issued_not_guessed(_context, failure, case, response))


@lookup_schema.hook("filter_failure")
def _kind_decides_whether_namespace_belongs(_context: Any, failure: Any, case: Any, response: Any) -> bool:
    """Keep every failure except a namespace missing for a Model or present for a ClusterModel.

    Whether `namespace` is required depends on `kind`, which OpenAPI parameters cannot express:
    each parameter is schema-valid on its own. `test_real_lookups_keep_the_contract` covers both
    kinds with the right parameters.
    """
    query = case.query or {}
    mismatch = (query.get("kind") == "Model") != ("namespace" in query)
    refused = (
        response.status_code == 400 and _problem_type(response) == "urn:ai-models:problem:invalid-parameter"
    )
    return not (mismatch and refused and type(failure).__name__ == "RejectedPositiveData")


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_running_api_keeps_its_contract(case: Any, running_api: Running) -> None:
    case.call_and_validate(base_url=running_api.url)


@upload_schema.parametrize()
@settings(max_examples=MAX_EXAMPLES_NEW_APIS, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_upload_api_keeps_its_contract(case: Any, running_api: Running) -> None:
    case.call_and_validate(base_url=running_api.url)


@serving_schema.parametrize()
@settings(max_examples=MAX_EXAMPLES_NEW_APIS, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_serving_api_keeps_its_contract(case: Any, running_api: Running) -> None:
    case.call_and_validate(base_url=running_api.url)


@lookup_schema.parametrize()
@settings(max_examples=MAX_EXAMPLES_NEW_APIS, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_internal_lookup_api_keeps_its_contract(case: Any, running_api: Running) -> None:
    case.call_and_validate(base_url=running_api.internal_url, verify=running_api.verify())


@pytest.mark.parametrize(
    "query",
    [
        {"pageSize": 7},
        {"pageSize": 4, "sort": "WeightsBytes", "q": "org1"},
        {"pageSize": 3, "verdict": "NotFeasible", "pipelineTag": "text-generation"},
    ],
)
def test_issued_page_tokens_keep_the_contract(running_api: Running, query: dict[str, Any]) -> None:
    """Fuzzing cannot guess issued page tokens, so walk real pages, every answer under the same checks."""
    operation = schema["/api/catalog-import/v1/models"]["GET"]
    seen: list[str] = []
    page_token = None
    for _ in range(50):
        params = {**query, **({"pageToken": page_token} if page_token else {})}
        response = operation.Case(query=params).call_and_validate(
            base_url=running_api.url, headers=running_api.auth
        )
        body = response.json()
        seen += [f"{item['source']}:{item['id']}" for item in body["items"]]
        page_token = body.get("nextPageToken")
        if page_token is None:
            break
    everything = operation.Case(query={**query, "pageSize": 500}).call_and_validate(
        base_url=running_api.url, headers=running_api.auth
    )
    assert seen == [f"{item['source']}:{item['id']}" for item in everything.json()["items"]]
    assert len(seen) > query["pageSize"]


def test_real_uploads_keep_the_contract(running_api: Running) -> None:
    """Fuzzing cannot forge upload tokens, so send issued ones: accepted, refused by content, repeated,
    by a caller who may only read the Model, and with a URL a newer one replaced."""
    operation = upload_schema["/api/upload/v1/uploads/{token}"]["PUT"]
    owner = running_api.cluster.model("uploaded", namespace="team-a")
    old_token = offer(running_api.cluster, owner, key=UPLOAD_KEY)
    token = offer(running_api.cluster, owner, key=UPLOAD_KEY)
    editor = running_api.cluster.user("uploader", level="Editor", namespace="team-a")
    expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)

    def put(body: bytes, *, token: str = token, status: int, bearer: str = editor.token) -> Any:
        case = operation.Case(
            path_parameters={"token": token},
            query={"filename": "model.gguf"},
            headers={"Authorization": f"Bearer {bearer}"},
            body=body,
            media_type="application/octet-stream",
        )
        # 507 is the budget refusing, documented as such; schemathesis counts every 5xx as a fault.
        excluded: list[CheckFunction] = [not_a_server_error] if status == 507 else []
        response = case.call_and_validate(base_url=running_api.url, excluded_checks=excluded)
        assert response.status_code == status, response.text
        return response

    # No ledger: with the budget set, usage is unknown and the upload is refused (catalog verdicts
    # in this module rely on that state, so it is restored).
    put(GGUF, status=507)
    running_api.cluster.put_ledger(Ledger(confirmed=True))
    try:
        put(GGUF, status=403, bearer=running_api.token)  # a User reads the Model, may not upload
        put(GGUF, token=old_token, status=403)
        put(b"<html>not a model</html>", status=415)
        assert put(GGUF, status=201).json()["sizeBytes"] == len(GGUF)
        put(GGUF, status=409)
        expired = issue(owner, expires_at=expires - datetime.timedelta(hours=2), key=UPLOAD_KEY)
        put(GGUF, token=expired, status=403)
    finally:
        running_api.cluster.delete_ledger()


@pytest.mark.parametrize("which", ["ready_model", "ready_cluster_model"])
def test_real_artifacts_keep_the_serving_contract(running_api: Running, which: str) -> None:
    """Fuzzing cannot guess objects that exist, so read the published ones under every check."""
    owner: Owner = getattr(running_api, which)
    if owner.namespace:
        manifest_path, file_path = MODEL_MANIFEST_PATH, MODEL_FILE_PATH
        parameters = {"namespace": owner.namespace, "name": owner.name}
    else:
        manifest_path, file_path = CLUSTER_MODEL_MANIFEST_PATH, CLUSTER_MODEL_FILE_PATH
        parameters = {"name": owner.name}
    etag = f'"{hashlib.sha256(FILE).hexdigest()}"'
    calls: list[tuple[str, str, dict[str, str], dict[str, str], int]] = [
        (manifest_path, "GET", {}, {}, 200),
        (manifest_path, "HEAD", {}, {}, 200),
        (file_path, "GET", {"path": "weights/model.bin"}, {}, 200),
        (file_path, "GET", {"path": "weights/model.bin"}, {"Range": "bytes=10-19"}, 206),
        (file_path, "HEAD", {"path": "weights/model.bin"}, {"Range": "bytes=-5"}, 206),
        (file_path, "GET", {"path": "weights/model.bin"}, {"Range": f"bytes={len(FILE)}-"}, 416),
        (file_path, "GET", {"path": "weights/model.bin"}, {"If-None-Match": etag}, 304),
        (file_path, "GET", {"path": "weights/other.bin"}, {}, 404),
    ]
    for path, method, extra, headers, status in calls:
        case = serving_schema[path][method].Case(path_parameters={**parameters, **extra}, headers=headers)
        response = case.call_and_validate(base_url=running_api.url, headers=running_api.auth)
        assert response.status_code == status, (path, method, headers, response.text)


def test_issued_listing_tokens_keep_the_serving_contract(running_api: Running) -> None:
    """The listing of Ready ClusterModels walked with the tokens it issues, every answer under the checks."""
    extra = [running_api.cluster.model(f"listed-{n}", status={"phase": "Publishing"}) for n in range(3)]
    for owner in extra:
        _publish(running_api.cluster, running_api.store, owner)
    operation = serving_schema[CLUSTER_MODELS_PATH]["GET"]
    seen: list[str] = []
    page_token = None
    for _ in range(10):
        params: dict[str, Any] = {"pageSize": 1, **({"pageToken": page_token} if page_token else {})}
        response = operation.Case(query=params).call_and_validate(
            base_url=running_api.url, headers=running_api.auth
        )
        body = response.json()
        seen += [item["name"] for item in body["items"]]
        page_token = body.get("nextPageToken")
        if page_token is None:
            break
    assert seen == sorted({"shared", *(owner.name for owner in extra)})


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ({"kind": "Model", "namespace": "team-a", "name": "ready"}, 200),
        ({"kind": "ClusterModel", "name": "shared"}, 200),
        ({"kind": "Model", "name": "ready"}, 400),
        ({"kind": "ClusterModel", "namespace": "team-a", "name": "shared"}, 400),
        ({"kind": "Model", "namespace": "team-a", "name": "absent"}, 404),
    ],
)
def test_real_lookups_keep_the_contract(running_api: Running, query: dict[str, str], status: int) -> None:
    operation = lookup_schema["/api/internal/v1/models/lookup"]["GET"]
    response = operation.Case(query=query).call_and_validate(
        base_url=running_api.internal_url, headers=running_api.auth, verify=running_api.verify()
    )
    assert response.status_code == status, response.text
    if status == 200:
        assert "state" not in response.json()
