"""Fixtures of the api tests: catalog stores in the directory backend, records, the API emulator,
and the api itself running under uvicorn on 127.0.0.1 with its own ServiceAccount."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import functools
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
from ai_models.domain.storage.codec import (
    LEDGER_SECRET_KEY,
    LEDGER_SECRET_NAME,
    ledger_from_json,
    ledger_to_json,
)
from ai_models.domain.storage.ledger import Ledger, Owner
from ai_models.names import API_GROUP, API_VERSION, UPLOAD_SIGNING_KEY, UPLOAD_SIGNING_SECRET, ModelKind
from fakes.s3 import moto_s3, s3_bucket  # noqa: F401  (fixtures used by this package's tests)
from kubeemu.authn import Identity, new_token
from kubeemu.pytest_fixtures import (  # noqa: F401  (fixtures used by this package's tests)
    RunningEmulator,
    kube_emulator,
    kube_emulator_factory,
)
from support.module_install import install_module
from support.render import RenderedChart, render_chart
from support.tls_files import write_tls_files
from support.values import module_values
from testbed.access_levels import grant_access_level

MODULE_NAMESPACE = "d8-ai-models"
INDEXED_AT = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
MODELS = f"/apis/{API_GROUP}/{API_VERSION}"


@functools.cache
def rendered_chart() -> RenderedChart:
    """The chart as a minimal install renders it: its RBAC is what the api runs with in tests."""
    return render_chart(module_values())


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
        grant_access_level(self.emulator.cluster, identity, level, namespace=namespace)
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

    def ledger(self) -> Ledger | None:
        """The ledger as stored now (None: no Secret, or an empty one)."""
        status, _, body = self.emulator.request(
            "GET", f"/api/v1/namespaces/{MODULE_NAMESPACE}/secrets/{LEDGER_SECRET_NAME}"
        )
        if status == 404:
            return None
        assert status == 200, body
        encoded = (body.get("data") or {}).get(LEDGER_SECRET_KEY)
        return ledger_from_json(base64.b64decode(encoded)) if encoded else None

    def put_signing_key(self, key: bytes) -> None:
        """Create or replace the upload signing key, as the controller does."""
        self.emulator.cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": UPLOAD_SIGNING_SECRET, "namespace": MODULE_NAMESPACE},
                "data": {UPLOAD_SIGNING_KEY: base64.b64encode(key).decode()},
            }
        )

    def model(
        self, name: str, *, namespace: str | None = None, status: dict[str, Any] | None = None
    ) -> Owner:
        """A Model in `namespace` (a ClusterModel without one) with an upload source and `status`."""
        kind = ModelKind.MODEL if namespace else ModelKind.CLUSTER_MODEL
        metadata: dict[str, Any] = {"name": name}
        if namespace:
            self.emulator.cluster.apply(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
            metadata["namespace"] = namespace
        created = self.emulator.cluster.apply(
            {
                "apiVersion": f"{API_GROUP}/{API_VERSION}",
                "kind": kind.value,
                "metadata": metadata,
                "spec": {"source": {"upload": {}}},
            }
        )
        owner = Owner(kind=kind.value, namespace=namespace or "", name=name, uid=created["metadata"]["uid"])
        if status is not None:
            self.set_status(owner, status)
        return owner

    def object_path(self, owner: Owner) -> str:
        plural = ModelKind(owner.kind).plural.value
        if owner.namespace:
            return f"{MODELS}/namespaces/{owner.namespace}/{plural}/{owner.name}"
        return f"{MODELS}/{plural}/{owner.name}"

    def set_status(self, owner: Owner, status: dict[str, Any]) -> None:
        code, _, body = self.emulator.request(
            "PATCH",
            f"{self.object_path(owner)}/status",
            body={"status": status},
            content_type="application/merge-patch+json",
        )
        assert code == 200, body

    def delete_object(self, owner: Owner) -> None:
        code, _, body = self.emulator.request("DELETE", self.object_path(owner))
        assert code == 200, body


def install_api_account(emulator: RunningEmulator) -> Identity:
    """The module installed as Helm would: namespace, access-level roles and every component's
    ServiceAccount with its rendered RBAC; returns the api's identity, so what the api may do in
    tests is exactly what templates/api/rbac-for-us.yaml grants."""
    return install_module(emulator, rendered=rendered_chart()).service_accounts["api"]


@pytest.fixture
def api_cluster(request: pytest.FixtureRequest) -> ApiCluster:
    emulator: RunningEmulator = request.getfixturevalue("kube_emulator")
    return ApiCluster(emulator=emulator, api_account=install_api_account(emulator))


@pytest.fixture(name="api_cluster_type", scope="session")
def api_cluster_type_fixture() -> type[ApiCluster]:
    """For fixtures of a wider scope than `api_cluster`, which build their own."""
    return ApiCluster


@pytest.fixture(name="write_tls_files", scope="session")
def write_tls_files_fixture() -> Callable[[Path], tuple[Path, Path, Path]]:
    return write_tls_files


@pytest.fixture(name="install_api_account", scope="session")
def install_api_account_fixture() -> Callable[[RunningEmulator], Identity]:
    return install_api_account


@dataclasses.dataclass
class RunningApi:
    runtime: ApiRuntime
    server: BackgroundServer
    internal: BackgroundServer | None = None
    ca_file: Path | None = None  # trusts the internal listener's certificate

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def internal_url(self) -> str:
        assert self.internal is not None, "start the api with internal_tls=True"
        return self.internal.url


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
        internal_tls: bool = False,
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
        running = RunningApi(
            runtime=runtime, server=BackgroundServer(runtime.app, shutting_down=runtime.state.shutting_down)
        )
        started.append((running, api_client))
        running.server.start()
        if internal_tls:
            cert, key, ca = write_tls_files(tmp_path / f"tls-{len(started)}")
            running.internal = BackgroundServer(
                runtime.internal_app, shutting_down=runtime.state.shutting_down, tls=(cert, key)
            )
            running.ca_file = ca
            running.internal.start()
        return running

    yield start
    for running, api_client in started:
        running.server.stop()
        if running.internal is not None:
            running.internal.stop()
        running.runtime.close()
        api_client.close()
