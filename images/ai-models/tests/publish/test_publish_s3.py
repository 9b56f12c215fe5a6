"""The publisher against S3 (moto over HTTP): multipart files, ranged reads of uploads, cleanup."""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from typing import TYPE_CHECKING

import pytest

from ai_models.adapters.objectstore import S3Store, open_store
from ai_models.domain.artifacts.sniff import PayloadFormat
from ai_models.names import ModelReason
from ai_models.publish.main import EXIT_FAILED, EXIT_PUBLISHED
from ai_models.settings import Settings
from fakes.hub import FakeHub, repository
from fakes.model_files import MIB, safetensors_bytes, synthetic_safetensors
from fakes.s3 import S3Bucket, isolate_aws_environment

if TYPE_CHECKING:
    from publish.conftest import Kit

REPO = "acme/s3-llama"


@pytest.fixture
def bucket_store(s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch) -> S3Store:
    """The bucket as the publisher opens it: from AI_MODELS_* settings, credentials from AWS_*."""
    isolate_aws_environment(monkeypatch)
    store = open_store(Settings(store_url=s3_bucket.url, s3_endpoint=s3_bucket.server.endpoint_url))
    assert isinstance(store, S3Store)
    return store


def test_a_hugging_face_model_is_published_into_s3_in_parts(
    kit: Kit, hub: FakeHub, s3_bucket: S3Bucket, bucket_store: S3Store
) -> None:
    big = synthetic_safetensors(19 * MIB + 3, seed=11)  # more than two 8 MiB parts
    contents = {**kit.model_files(), "model-00002-of-00002.safetensors": big}
    hub.add(repository(REPO, contents))
    job = kit.plan(hub, REPO)
    settings = kit.hf_settings(hub, job, store_url=s3_bucket.url, s3_endpoint=s3_bucket.server.endpoint_url)

    assert kit.run(settings) == EXIT_PUBLISHED

    published = kit.manifest(job.digest, store=bucket_store)
    by_path = {item.path: item for item in published.files}
    assert by_path["model-00002-of-00002.safetensors"].sha256 == big.sha256
    assert by_path["model-00002-of-00002.safetensors"].etag.endswith("-3")  # type: ignore[union-attr]
    assert (
        published.resolved["resources"]["parameterCount"] == 100 * 64 + 64 + (big.size - len(big.prefix)) // 2
    )
    assert "files/model.safetensors" in kit.keys(job.digest, store=bucket_store)


def test_a_failure_in_s3_leaves_no_manifest_and_no_files(
    kit: Kit, hub: FakeHub, s3_bucket: S3Bucket, bucket_store: S3Store
) -> None:
    hub.add(
        repository(REPO, {**kit.model_files(), "extra.safetensors": synthetic_safetensors(6 * MIB, seed=2)})
    )
    job = kit.plan(hub, REPO)
    hub.drop_next(100, after_bytes=MIB)  # the large file never arrives whole
    settings = kit.hf_settings(hub, job, store_url=s3_bucket.url, s3_endpoint=s3_bucket.server.endpoint_url)

    assert kit.run(settings) == EXIT_FAILED

    assert kit.outcome(settings)["retryable"] is True
    assert kit.keys(job.digest, store=bucket_store) == []
    client = s3_bucket.server.client()
    assert client.list_multipart_uploads(Bucket=s3_bucket.name).get("Uploads", []) == []


def test_an_uploaded_tar_and_zip_are_unpacked_from_s3(
    kit: Kit, s3_bucket: S3Bucket, bucket_store: S3Store
) -> None:
    weights = safetensors_bytes({"w": ("BF16", (3 * MIB,))})
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in {"m/config.json": b"{}", "m/model.safetensors": weights}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    digest = kit.stage_upload(buffer.getvalue(), payload_format=PayloadFormat.TAR, store=bucket_store)

    assert (
        kit.run(
            kit.upload_settings(digest, store_url=s3_bucket.url, s3_endpoint=s3_bucket.server.endpoint_url)
        )
        == EXIT_PUBLISHED
    )

    published = kit.manifest(digest, store=bucket_store)
    assert [item.path for item in published.files] == ["config.json", "model.safetensors"]
    # Members are copied inside the bucket (part copies), then read back for their sha256.
    assert [item.sha256 for item in published.files] == [
        hashlib.sha256(b"{}").hexdigest(),
        hashlib.sha256(weights).hexdigest(),
    ]
    assert [item.size for item in published.files] == [2, len(weights)]
    assert published.resolved["parameterCount"] == 3 * MIB

    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("model.safetensors", weights)
    zip_digest = kit.stage_upload(zipped.getvalue(), payload_format=PayloadFormat.ZIP, store=bucket_store)

    assert (
        kit.run(
            kit.upload_settings(
                zip_digest, store_url=s3_bucket.url, s3_endpoint=s3_bucket.server.endpoint_url
            )
        )
        == EXIT_PUBLISHED
    )
    assert kit.manifest(zip_digest, store=bucket_store).files[0].size == len(weights)


def test_an_unreachable_store_is_a_retryable_failure(
    kit: Kit, hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_aws_environment(monkeypatch)
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    with FakeHub() as closed:
        nowhere = closed.url  # a port that nobody listens on once the block ends
    settings = kit.hf_settings(hub, job, store_url="s3://absent-bucket", s3_endpoint=nowhere)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.PUBLICATION_FAILED.value
    assert result["retryable"] is True
    assert "artifacts.endpoint" in result["message"]
