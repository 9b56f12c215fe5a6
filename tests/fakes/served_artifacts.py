"""Ready Models whose artifacts the serving API serves, and the delivery tokens that read them,
written as the publisher and the controller leave them (store layout and status from the runtime
package), for the serving and materialize tests and the materialize benchmark.

    owner, digest = publish_ready(emulator, store, "llama", {"w.bin": b"..."}, namespace="team-a")
    put_delivery_key(emulator, KEY)
    token = delivery_token([(owner, digest)], workload=WORKLOAD, key=KEY)
"""

from __future__ import annotations

import base64
import datetime
import hashlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ai_models.adapters.objectstore import ObjectStore
from ai_models.domain.artifacts.layout import artifact_prefix, file_key, manifest_key
from ai_models.domain.artifacts.manifest import (
    ArtifactFile,
    ArtifactManifest,
    ArtifactSource,
    manifest_to_json,
)
from ai_models.domain.delivery.contract import Workload, WorkloadKind
from ai_models.domain.delivery.token import DeliveryGrant, GrantedArtifact, issue
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage.ledger import Owner
from ai_models.names import (
    API_GROUP,
    API_VERSION,
    DELIVERY_SIGNING_KEY,
    DELIVERY_SIGNING_SECRET,
    MODULE_NAMESPACE,
    ModelKind,
    SourceType,
)
from fakes.model_files import FileContent, content_chunks, content_sha256

WORKLOAD = Workload(WorkloadKind.DEPLOYMENT, "team-a", "web", "uid-web")


class _Chunks:
    """`read(n)` over content chunks: what `put_stream` takes."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._pending = b""

    def read(self, size: int = -1, /) -> bytes:
        if not self._pending:
            self._pending = next(self._chunks, b"")
        cut = len(self._pending) if size < 0 else size
        piece, self._pending = self._pending[:cut], self._pending[cut:]
        return piece


def object_path(owner: Owner) -> str:
    plural = ModelKind(owner.kind).plural.value
    if owner.namespace:
        return f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{owner.namespace}/{plural}/{owner.name}"
    return f"/apis/{API_GROUP}/{API_VERSION}/{plural}/{owner.name}"


def set_status(emulator: Any, owner: Owner, status: dict[str, Any]) -> None:
    code, _, body = emulator.request(
        "PATCH",
        f"{object_path(owner)}/status",
        body={"status": status},
        content_type="application/merge-patch+json",
    )
    assert code == 200, body


def create_model(emulator: Any, name: str, *, namespace: str | None) -> Owner:
    """A Model in `namespace` (a ClusterModel without one) with an upload source, no status yet."""
    kind = ModelKind.MODEL if namespace else ModelKind.CLUSTER_MODEL
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        emulator.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        metadata["namespace"] = namespace
    created = emulator.cluster.apply(
        {
            "apiVersion": f"{API_GROUP}/{API_VERSION}",
            "kind": kind.value,
            "metadata": metadata,
            "spec": {"source": {"upload": {}}},
        }
    )
    return Owner(kind=kind.value, namespace=namespace or "", name=name, uid=created["metadata"]["uid"])


def store_artifact(
    store: ObjectStore,
    owner: Owner,
    files: Mapping[str, FileContent],
    *,
    salt: str = "",
    manifest_sha256: Mapping[str, str] | None = None,
) -> str:
    """The artifact's files and manifest in the store; its digest. `manifest_sha256` overrides what
    the manifest records for some files (a damaged artifact)."""
    digest = "sha256:" + hashlib.sha256(f"{owner.uid}/{salt}/{sorted(files)}".encode()).hexdigest()
    for path, content in files.items():
        key = file_key(owner, digest, path)
        if isinstance(content, bytes):
            store.put_bytes(key, content)
        else:
            store.put_stream(key, _Chunks(content_chunks(content)), size=len(content))
    recorded = dict(manifest_sha256 or {})
    manifest = ArtifactManifest(
        owner=owner,
        digest=digest,
        source=ArtifactSource(type=SourceType.UPLOAD, upload_sha256="0" * 64),
        files=tuple(
            ArtifactFile(path=path, size=len(content), sha256=recorded.get(path) or content_sha256(content))
            for path, content in files.items()
        ),
        resolved={"format": "Safetensors"},
        published_at="2026-02-01T12:00:00Z",
    )
    store.put_bytes(manifest_key(owner, digest), manifest_to_json(manifest))
    return digest


def mark_ready(emulator: Any, owner: Owner, digest: str, *, size: int) -> None:
    uri = f"store://{artifact_prefix(owner, digest)}"
    set_status(
        emulator, owner, {"phase": "Ready", "artifact": {"uri": uri, "digest": digest, "sizeBytes": size}}
    )


def publish_ready(
    emulator: Any,
    store: ObjectStore,
    name: str,
    files: Mapping[str, FileContent],
    *,
    namespace: str | None,
    manifest_sha256: Mapping[str, str] | None = None,
) -> tuple[Owner, str]:
    """A Ready object whose artifact holds `files`, as the publisher and the controller leave it."""
    owner = create_model(emulator, name, namespace=namespace)
    digest = store_artifact(store, owner, files, manifest_sha256=manifest_sha256)
    mark_ready(emulator, owner, digest, size=sum(len(content) for content in files.values()))
    return owner, digest


def put_delivery_key(emulator: Any, key: bytes) -> None:
    """The delivery signing key, as the controller creates it."""
    emulator.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": DELIVERY_SIGNING_SECRET, "namespace": MODULE_NAMESPACE},
            "data": {DELIVERY_SIGNING_KEY: base64.b64encode(key).decode()},
        }
    )


def model_key(owner: Owner) -> ModelKey:
    return ModelKey(ModelKind(owner.kind), owner.namespace, owner.name)


def delivery_token(
    artifacts: Sequence[tuple[Owner, str]],
    *,
    key: bytes,
    workload: Workload = WORKLOAD,
    lifetime: datetime.timedelta = datetime.timedelta(hours=1),
) -> str:
    grant = DeliveryGrant(
        workload=workload,
        artifacts=tuple(GrantedArtifact(ref=model_key(owner), digest=digest) for owner, digest in artifacts),
        expires_at=datetime.datetime.now(datetime.UTC) + lifetime,
    )
    return issue(grant, key=key)
