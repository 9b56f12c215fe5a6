"""Fixtures of the publisher tests: requests as the controller makes them, a fast retry policy, the
fake Hub with real file contents, directory stores in tmp_path, moto S3 and the API emulator."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ai_models.adapters.hub.repository import repository_snapshot
from ai_models.adapters.objectstore import DirectoryStore, ObjectStore
from ai_models.domain.artifacts.digest import repository_digest, upload_digest
from ai_models.domain.artifacts.layout import (
    artifact_prefix,
    manifest_key,
    upload_payload_key,
    upload_record_key,
)
from ai_models.domain.artifacts.manifest import ArtifactManifest, manifest_from_json
from ai_models.domain.artifacts.selection import select_files
from ai_models.domain.artifacts.sniff import PayloadFormat
from ai_models.domain.artifacts.upload_record import UploadRecord, record_to_json
from ai_models.domain.publication.request import (
    FileSpec,
    HuggingFacePublication,
    PublicationRequest,
    PublicationSource,
    UploadPublication,
)
from ai_models.domain.storage.ledger import Owner
from ai_models.names import ModelKind
from ai_models.publish.main import publish
from ai_models.publish.progress import Report
from ai_models.publish.retry import RetryPolicy
from ai_models.publish.settings import PublishJob, PublishSettings
from fakes.hub import FakeHub
from fakes.model_files import FileContent, content_sha256, safetensors_bytes
from fakes.s3 import moto_s3, s3_bucket  # noqa: F401  (fixtures used by this package's tests)
from kubeemu.pytest_fixtures import kube_emulator, kube_emulator_factory  # noqa: F401  (fixtures)

OWNER = Owner(
    kind=ModelKind.MODEL.value, namespace="team-a", name="tiny", uid="6f1c2a1e-0000-4000-8000-000000000001"
)
CLUSTER_OWNER = Owner(
    kind=ModelKind.CLUSTER_MODEL.value,
    namespace="",
    name="shared",
    uid="6f1c2a1e-0000-4000-8000-000000000002",
)
FAST_RETRY = RetryPolicy(attempts=3, base_seconds=0.01, max_seconds=0.05, max_rate_limit_seconds=0.0)

LLAMA_CONFIG: Mapping[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "max_position_embeddings": 4096,
    "vocab_size": 100,
    "torch_dtype": "bfloat16",
}
TENSORS: Mapping[str, tuple[str, tuple[int, ...]]] = {
    "model.embed_tokens.weight": ("BF16", (100, 64)),
    "model.norm.weight": ("F32", (64,)),
}


def small_model_files() -> dict[str, FileContent]:
    """A tiny but real safetensors model with its companions (and files the selection leaves out)."""
    return {
        "config.json": json.dumps(LLAMA_CONFIG).encode(),
        "model.safetensors": safetensors_bytes(TENSORS),
        "tokenizer.json": b'{"version": "1.0", "model": {"type": "BPE"}}',
        "generation_config.json": b'{"max_new_tokens": 64}',
        "README.md": b"# tiny\n",
        "convert.py": b"print('not published')\n",
        "pytorch_model.bin": b"\x80\x02 not published",
    }


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the controller hands a publish Job for a Hugging Face source."""

    repository: str
    revision: str
    files: list[dict[str, Any]]
    digest: str


def plan(hub: FakeHub, repository: str, *, token: str | None = None) -> Plan:
    """Resolve and select like the controller: snapshot, select_files, digest over the selection."""
    snapshot = repository_snapshot(repository, "main", endpoint=hub.url, token=token)
    selection = select_files(item.path for item in snapshot.files)
    chosen = [item for item in snapshot.files if item.path in set(selection.files)]
    return Plan(
        repository=repository,
        revision=snapshot.sha,
        files=[{"path": item.path, "size": item.size, "lfsSha256": item.lfs_sha256} for item in chosen],
        digest=repository_digest(repository, snapshot.sha, chosen),
    )


@dataclasses.dataclass
class Kit:
    """What a publisher test needs, bound to its tmp_path and directory store.

    Tests cannot import this conftest (pytest imports it by path), so helpers come as a fixture.
    """

    tmp_path: Path
    store: DirectoryStore
    owner: Owner = OWNER
    cluster_owner: Owner = CLUSTER_OWNER

    @property
    def store_url(self) -> str:
        return str(self.store.root)

    def model_files(self) -> dict[str, FileContent]:
        return small_model_files()

    def plan(self, hub: FakeHub, repository: str, *, token: str | None = None) -> Plan:
        return plan(hub, repository, token=token)

    def hf_settings(
        self,
        hub: FakeHub,
        job: Plan,
        *,
        owner: Owner = OWNER,
        token: str | None = None,
        store_url: str | None = None,
        files: Sequence[Mapping[str, Any]] | None = None,
        report_progress: bool = False,
        **extra: Any,
    ) -> PublishJob:
        source = HuggingFacePublication(
            repository=job.repository,
            revision=job.revision,
            endpoint=hub.url,
            files=tuple(
                FileSpec.model_validate(item) for item in (files if files is not None else job.files)
            ),
        )
        return self._job(
            owner,
            job.digest,
            source,
            token=token,
            report_progress=report_progress,
            store_url=store_url,
            **extra,
        )

    def _job(
        self,
        owner: Owner,
        digest: str,
        source: PublicationSource,
        *,
        token: str | None,
        report_progress: bool,
        store_url: str | None,
        **extra: Any,
    ) -> PublishJob:
        request = PublicationRequest(
            owner=owner,
            digest=digest,
            source=source,
            hub_token=token is not None,
            termination_message_path=str(self.tmp_path / "termination-log"),
            report_progress=report_progress,
        )
        settings = PublishSettings(**{"store_url": store_url or self.store_url, **extra})
        return PublishJob(request=request, settings=settings, token=token)

    def stage_upload(
        self,
        payload: bytes,
        *,
        payload_format: PayloadFormat,
        filename: str = "model",
        owner: Owner = OWNER,
        store: ObjectStore | None = None,
    ) -> str:
        """Put a payload and its record where the upload API leaves them; returns the artifact digest."""
        target = store or self.store
        target.put_bytes(upload_payload_key(owner), payload)
        sha256 = content_sha256(payload)
        record = UploadRecord(
            sha256=sha256,
            size_bytes=len(payload),
            format=payload_format,
            filename=filename,
            received_at="2026-01-02T03:04:05Z",
        )
        target.put_bytes(upload_record_key(owner), record_to_json(record))
        return upload_digest(sha256)

    def upload_settings(
        self,
        digest: str,
        *,
        owner: Owner = OWNER,
        store_url: str | None = None,
        report_progress: bool = False,
        **extra: Any,
    ) -> PublishJob:
        return self._job(
            owner,
            digest,
            UploadPublication(),
            token=None,
            report_progress=report_progress,
            store_url=store_url,
            **extra,
        )

    def run(self, settings: PublishJob, *, report: Report | None = None, interval: float = 2.0) -> int:
        return publish(
            settings,
            retry=FAST_RETRY,
            progress_interval=interval,
            reporter=(lambda _settings: report) if report is not None else None,
        )

    def outcome(self, settings: PublishJob) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(settings.termination_message_path.read_text())
        return document

    def manifest(
        self, digest: str, *, owner: Owner = OWNER, store: ObjectStore | None = None
    ) -> ArtifactManifest:
        return manifest_from_json((store or self.store).get_bytes(manifest_key(owner, digest)))

    def has_manifest(self, digest: str, *, owner: Owner = OWNER) -> bool:
        return self.store.head(manifest_key(owner, digest)) is not None

    def keys(self, digest: str, *, owner: Owner = OWNER, store: ObjectStore | None = None) -> list[str]:
        """Keys under the artifact's directory, relative to it."""
        prefix = artifact_prefix(owner, digest)
        return sorted(info.key.removeprefix(prefix) for info in (store or self.store).list(prefix))

    def file_bytes(self, digest: str, path: str, *, owner: Owner = OWNER) -> bytes:
        return self.store.get_bytes(artifact_prefix(owner, digest) + "files/" + path)


@pytest.fixture
def store(tmp_path: Path) -> DirectoryStore:
    return DirectoryStore(tmp_path / "store")


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub() as running:
        yield running


@pytest.fixture
def kit(tmp_path: Path, store: DirectoryStore) -> Kit:
    return Kit(tmp_path=tmp_path, store=store)
