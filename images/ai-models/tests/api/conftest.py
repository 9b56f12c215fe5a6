"""Fixtures of the api tests: catalog stores in the directory backend, records, the API emulator,
and the api itself running under uvicorn on 127.0.0.1 with its own ServiceAccount."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ai_models.adapters.kube import ClientOptions, new_api_client
from ai_models.adapters.objectstore import DirectoryStore, ObjectStore
from ai_models.api.server import ApiRuntime, BackgroundServer, build_runtime
from ai_models.api.settings import ApiSettings
from ai_models.catalog.layout import CatalogManifest, chunk_key, chunk_name, manifest_key
from ai_models.domain.catalog.record import CatalogRecord, ProviderMetadata, ResourceFacts
from ai_models.domain.storage.codec import LEDGER_SECRET_KEY, LEDGER_SECRET_NAME, ledger_to_json
from ai_models.domain.storage.ledger import Ledger
from kubeemu.authn import Identity, new_token
from kubeemu.devstack import module_rbac_objects
from kubeemu.pytest_fixtures import (  # noqa: F401  (fixtures used by this package's tests)
    RunningEmulator,
    kube_emulator,
    kube_emulator_factory,
)

MODULE_NAMESPACE = "d8-ai-models"
INDEXED_AT = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

# What the api's ServiceAccount may do, as templates/api/rbac-for-us.yaml grants it: review callers
# cluster-wide, read the ledger Secret in the module namespace, nothing else.
API_CLUSTER_ROLE: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "d8:ai-models:api"},
    "rules": [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ],
}
API_ROLE: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "Role",
    "metadata": {"name": "api", "namespace": MODULE_NAMESPACE},
    "rules": [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [LEDGER_SECRET_NAME],
            "verbs": ["get"],
        }
    ],
}


def make_record(source: str, model_id: str, *, provider: str = "HuggingFace", **facts: Any) -> CatalogRecord:
    """A record; `facts` are metadata or resources fields by their Python names.

    The author defaults to the id's organisation, as the Hub reports it.
    """
    metadata = {k: v for k, v in facts.items() if k in ProviderMetadata.model_fields}
    resources = {k: v for k, v in facts.items() if k not in ProviderMetadata.model_fields}
    if "/" in model_id:
        metadata.setdefault("author", model_id.split("/", maxsplit=1)[0])
    return CatalogRecord(
        source=source,
        id=model_id,
        provider=provider,
        metadata=ProviderMetadata(**metadata),
        resources=ResourceFacts(**resources),
        indexedAt=INDEXED_AT,
    )


def write_generation(
    store: ObjectStore,
    source: str,
    generation: str,
    chunks: Sequence[Sequence[CatalogRecord]],
    *,
    flip: bool = True,
) -> CatalogManifest:
    """Write a generation's chunks as an indexing pass does; `flip` also serves it (manifest last)."""
    names = []
    offset = 0
    for records in chunks:
        body = "".join(record.to_json() + "\n" for record in records).encode()
        store.put_bytes(chunk_key(source, generation, offset), body)
        names.append(chunk_name(offset))
        offset += len(records)
    manifest = CatalogManifest(
        source=source,
        generation=generation,
        models=offset,
        chunks=tuple(names),
        completedAt=datetime.datetime(2026, 2, 1, 12, 0, tzinfo=datetime.UTC),
    )
    if flip:
        store.put_bytes(manifest_key(source), manifest.model_dump_json(by_alias=True).encode())
    return manifest


RecordMaker = Callable[..., CatalogRecord]
GenerationWriter = Callable[..., CatalogManifest]


@pytest.fixture(name="make_record", scope="session")
def make_record_fixture() -> RecordMaker:
    return make_record


@pytest.fixture(name="write_generation", scope="session")
def write_generation_fixture() -> GenerationWriter:
    return write_generation


class GatedStore:
    """A store whose reads under `gated_prefix` block until `release` is set."""

    def __init__(self, inner: DirectoryStore, *, gated_prefix: str) -> None:
        self.inner = inner
        self.description = inner.description
        self.gated_prefix = gated_prefix
        self.waiting = threading.Event()
        self.release = threading.Event()

    def get_bytes(self, key: str) -> bytes:
        if key.startswith(self.gated_prefix):
            self.waiting.set()
            assert self.release.wait(timeout=30), "the test never released the store"
        return self.inner.get_bytes(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def gated_store() -> type[GatedStore]:
    """Wrap a store so reads under a prefix block until the test sets `.release`."""
    return GatedStore


@pytest.fixture
def store(tmp_path: Path) -> DirectoryStore:
    return DirectoryStore(tmp_path / "store")


@dataclasses.dataclass
class ApiCluster:
    """The emulator prepared as a cluster with the module installed: RBAC, namespace, identities."""

    emulator: RunningEmulator
    api_account: Identity

    def user(self, name: str, *, level: str = "User", namespace: str | None = None) -> Identity:
        identity = self.emulator.add_identity(Identity(name=name, token=new_token(), groups=("team",)))
        self.emulator.grant(identity, level, namespace=namespace)
        return identity

    def put_ledger(self, ledger: Ledger | None, *, raw: bytes | None = None) -> None:
        """Create or replace the ledger Secret (`raw` stores arbitrary bytes as ledger.json)."""
        data = raw if raw is not None else (ledger_to_json(ledger) if ledger is not None else b"")
        self.emulator.cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": LEDGER_SECRET_NAME, "namespace": MODULE_NAMESPACE},
                "data": {LEDGER_SECRET_KEY: base64.b64encode(data).decode()},
            }
        )

    def delete_ledger(self) -> None:
        self.emulator.request("DELETE", f"/api/v1/namespaces/{MODULE_NAMESPACE}/secrets/{LEDGER_SECRET_NAME}")


def install_api_account(emulator: RunningEmulator) -> Identity:
    """The module namespace, the module's access-level roles and the api's ServiceAccount with its RBAC."""
    cluster = emulator.cluster
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MODULE_NAMESPACE}})
    for role in module_rbac_objects():
        cluster.apply(role)
    account = emulator.add_identity(Identity.service_account(MODULE_NAMESPACE, "api"))
    subject = {"kind": "ServiceAccount", "name": "api", "namespace": MODULE_NAMESPACE}
    ref = {"apiGroup": "rbac.authorization.k8s.io"}
    cluster.apply(API_CLUSTER_ROLE)
    cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "d8:ai-models:api"},
            "roleRef": {**ref, "kind": "ClusterRole", "name": "d8:ai-models:api"},
            "subjects": [subject],
        }
    )
    cluster.apply(API_ROLE)
    cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "api", "namespace": MODULE_NAMESPACE},
            "roleRef": {**ref, "kind": "Role", "name": "api"},
            "subjects": [subject],
        }
    )
    return account


@pytest.fixture
def api_cluster(request: pytest.FixtureRequest) -> ApiCluster:
    emulator: RunningEmulator = request.getfixturevalue("kube_emulator")
    return ApiCluster(emulator=emulator, api_account=install_api_account(emulator))


@pytest.fixture(name="install_api_account", scope="session")
def install_api_account_fixture() -> Callable[[RunningEmulator], Identity]:
    return install_api_account


@dataclasses.dataclass
class RunningApi:
    runtime: ApiRuntime
    server: BackgroundServer

    @property
    def url(self) -> str:
        return self.server.url


ApiStarter = Callable[..., RunningApi]


@pytest.fixture
def start_api(api_cluster: ApiCluster, tmp_path: Path) -> Iterator[ApiStarter]:
    """Start the api (real uvicorn, real auth against the emulator as the api ServiceAccount)."""
    started: list[tuple[RunningApi, Any]] = []

    def start(
        store: ObjectStore,
        *,
        capacity_limit_bytes: int | None = None,
        start_builder: bool = True,
        account: Identity | None = None,
        **settings: Any,
    ) -> RunningApi:
        kubeconfig = api_cluster.emulator.kubeconfig(account or api_cluster.api_account)
        api_client = new_api_client(
            ClientOptions(retries=1, backoff_seconds=0.05), kubeconfig=str(kubeconfig)
        )
        config = ApiSettings(
            capacity_limit_bytes=capacity_limit_bytes,
            namespace=MODULE_NAMESPACE,
            api_index_dir=tmp_path / f"index-{len(started)}",
            api_index_refresh_seconds=0.2,
            **settings,
        )
        config.api_index_dir.mkdir()  # type: ignore[union-attr]
        runtime = build_runtime(config, store=store, api_client=api_client)
        if start_builder:
            runtime.builder.start()
        server = BackgroundServer(runtime.app, shutting_down=runtime.state.shutting_down).start()
        running = RunningApi(runtime=runtime, server=server)
        started.append((running, api_client))
        return running

    yield start
    for running, api_client in started:
        running.server.stop()
        running.runtime.close()
        api_client.close()
