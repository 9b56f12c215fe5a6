"""What only the S3 backend has to prove: multipart, pagination, and errors an admin can act on."""

from __future__ import annotations

import collections
import concurrent.futures
import io
import random
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped,unused-ignore]  # boto3 has no type hints
import pytest

from ai_models.adapters.objectstore import ObjectNotFound, ObjectStoreError, S3Store, SizeMismatch, open_store
from ai_models.adapters.objectstore.s3 import MAX_PARTS, MIN_PART_BYTES, part_size_for
from ai_models.settings import Settings
from fakes.s3 import (
    ACCESS_KEY,
    REGION,
    SECRET_KEY,
    MotoS3,
    S3Bucket,
    fresh_bucket_name,
    isolate_aws_environment,
    start_moto_server,
)

MIB = 1024 * 1024
DEFAULT_PART = 8 * MIB


class CallCounter(collections.Counter[str]):
    """Counts S3 operations a client sends, by operation name (ListObjectsV2, UploadPart, ...)."""

    def __call__(self, model: Any, **_: Any) -> None:
        self[model.name] += 1


def counted_store(bucket: S3Bucket) -> tuple[S3Store, CallCounter]:
    # A session of its own: handlers registered on it must not leak into other tests' clients.
    session = boto3.session.Session(
        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, region_name=REGION
    )
    calls = CallCounter()
    session.events.register("before-call.s3", calls)
    store = S3Store(
        bucket.name, endpoint_url=bucket.server.endpoint_url, session=session, part_size=MIN_PART_BYTES
    )
    return store, calls


@pytest.fixture
def store(s3_bucket: S3Bucket) -> S3Store:
    return S3Store(
        s3_bucket.name, endpoint_url=s3_bucket.server.endpoint_url, session=s3_bucket.server.session()
    )


class FailingAfter(io.RawIOBase):
    def __init__(self, good_bytes: int) -> None:
        super().__init__()
        self._left = good_bytes

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if self._left <= 0:
            raise ConnectionResetError("download dropped")
        count = min(size if size is not None and size >= 0 else self._left, self._left)
        self._left -= count
        return b"\x01" * count


# Multipart uploads.


def test_large_streams_go_up_as_multipart_uploads(s3_bucket: S3Bucket) -> None:
    store, calls = counted_store(s3_bucket)
    payload = random.Random(1).randbytes(4 * MIN_PART_BYTES + 123)
    info = store.put_stream("artifacts/ns/m/d/model.safetensors", io.BytesIO(payload))
    assert calls["CreateMultipartUpload"] == 1
    assert calls["UploadPart"] == 5
    assert calls["CompleteMultipartUpload"] == 1
    assert info.etag is not None
    assert info.etag.endswith("-5")
    assert store.get_bytes("artifacts/ns/m/d/model.safetensors") == payload


def test_small_streams_go_up_in_one_request(s3_bucket: S3Bucket) -> None:
    store, calls = counted_store(s3_bucket)
    store.put_stream("small", io.BytesIO(b"x" * (MIN_PART_BYTES - 1)))
    assert calls["PutObject"] == 1
    assert calls["CreateMultipartUpload"] == 0


def test_a_failed_stream_leaves_no_multipart_upload_behind(s3_bucket: S3Bucket, store: S3Store) -> None:
    with pytest.raises(ConnectionResetError):
        store.put_stream("big", FailingAfter(3 * DEFAULT_PART))
    with pytest.raises(SizeMismatch):
        store.put_stream("big", io.BytesIO(b"x" * 3 * DEFAULT_PART), size=4 * DEFAULT_PART)
    uploads = s3_bucket.server.client().list_multipart_uploads(Bucket=s3_bucket.name)
    assert uploads.get("Uploads", []) == []
    assert store.head("big") is None


def test_part_size_grows_to_fit_the_part_limit() -> None:
    assert part_size_for(None, minimum=DEFAULT_PART) == DEFAULT_PART
    assert part_size_for(10 * 1024**3, minimum=DEFAULT_PART) == DEFAULT_PART
    for size in (80 * 1024**3 + 1, 500 * 1024**3, 5 * 1024**4):
        part = part_size_for(size, minimum=DEFAULT_PART)
        assert part % MIB == 0
        assert part * MAX_PARTS >= size
        assert (part - MIB) * MAX_PARTS < size


# Pagination.


def put_objects(bucket: S3Bucket, keys: list[str]) -> None:
    """Many small objects, fast: boto3 clients are thread-safe and moto serves requests in threads."""
    client = bucket.server.client()
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda key: client.put_object(Bucket=bucket.name, Key=key, Body=b"{}"), keys))


def test_listings_and_deletes_page_through_more_than_1000_keys(s3_bucket: S3Bucket) -> None:
    # One object per "directory", so the same 1,001 objects exercise all three paginated calls.
    prefixes = [f"catalog/hf/generations/g1/part-{number:05d}/" for number in range(1001)]
    keys = [prefix + "chunk.jsonl" for prefix in prefixes]
    neighbours = ["catalog/hf/generations/g10/chunk-00000.jsonl", "catalog/hf/manifest.json"]
    put_objects(s3_bucket, keys + neighbours)
    store, calls = counted_store(s3_bucket)

    assert [info.key for info in store.list("catalog/hf/generations/g1/")] == keys
    assert calls["ListObjectsV2"] == 2

    calls.clear()
    assert store.list_prefixes("catalog/hf/generations/g1/") == prefixes
    assert calls["ListObjectsV2"] == 2

    calls.clear()
    assert store.delete_prefix("catalog/hf/generations/g1/") == 1001
    assert calls["DeleteObjects"] == 2
    assert [info.key for info in store.list("")] == neighbours


def test_folder_markers_made_by_consoles_are_not_objects(s3_bucket: S3Bucket, store: S3Store) -> None:
    client = s3_bucket.server.client()
    client.put_object(Bucket=s3_bucket.name, Key="catalog/", Body=b"")
    client.put_object(Bucket=s3_bucket.name, Key="catalog/hf/manifest.json", Body=b"{}")
    assert [info.key for info in store.list("")] == ["catalog/hf/manifest.json"]
    assert store.delete_prefix("catalog/") == 2
    assert store.list_prefixes("") == []


# Errors that tell an administrator what to fix.


def test_check_names_a_missing_bucket(moto_s3: MotoS3) -> None:
    store = S3Store("no-such-bucket", endpoint_url=moto_s3.endpoint_url, session=moto_s3.session())
    with pytest.raises(ObjectStoreError) as caught:
        store.check()
    message = str(caught.value)
    assert "s3://no-such-bucket" in message
    assert moto_s3.endpoint_url in message
    assert "check artifacts.bucket" in message


def test_calls_on_a_missing_bucket_are_store_errors_not_missing_keys(moto_s3: MotoS3) -> None:
    store = S3Store("no-such-bucket", endpoint_url=moto_s3.endpoint_url, session=moto_s3.session())
    for operation in (
        lambda: store.get_bytes("k"),
        lambda: store.open_range("k", start=1),
        lambda: store.put_bytes("k", b"v"),
        lambda: store.put_stream("k", io.BytesIO(b"v")),
        lambda: list(store.list("")),
        lambda: store.list_prefixes(""),
        lambda: store.delete("k"),
        lambda: store.delete_prefix("p/"),
    ):
        with pytest.raises(ObjectStoreError, match=r"NoSuchBucket.*check artifacts.bucket") as caught:
            operation()
        assert not isinstance(caught.value, ObjectNotFound)
    # A HEAD response has no body to say which of the two is missing; check() tells them apart.
    assert store.head("k") is None


@pytest.fixture(scope="module")
def moto_s3_with_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3]:
    with start_moto_server(tmp_path_factory.mktemp("moto-auth"), enforce_auth=True) as server:
        yield server


def test_refused_credentials_name_the_credentials_secret(moto_s3_with_auth: MotoS3) -> None:
    session = moto_s3_with_auth.session(access_key="AKIAWRONG", secret_key="wrong")
    store = S3Store("ai-models", endpoint_url=moto_s3_with_auth.endpoint_url, session=session)
    with pytest.raises(
        ObjectStoreError, match=r"Forbidden \(HTTP 403\).*check artifacts.credentialsSecretName"
    ):
        store.check()
    with pytest.raises(ObjectStoreError, match=r"InvalidAccessKeyId.*check artifacts.credentialsSecretName"):
        store.get_bytes("catalog/hf/manifest.json")


def test_missing_credentials_name_the_credentials_secret(
    moto_s3: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_aws_environment(monkeypatch, access_key=None, secret_key=None)
    store = S3Store("ai-models", endpoint_url=moto_s3.endpoint_url)
    with pytest.raises(ObjectStoreError, match=r"NoCredentialsError.*check artifacts.credentialsSecretName"):
        store.check()


@pytest.fixture
def closed_port() -> Iterator[int]:
    # Bound but not listening: connections are refused, and no other process can take the port.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_an_unreachable_endpoint_is_named(closed_port: int, moto_s3: MotoS3) -> None:
    endpoint = f"http://127.0.0.1:{closed_port}"
    store = S3Store("ai-models", endpoint_url=endpoint, session=moto_s3.session(), max_attempts=1)
    for operation in (store.check, lambda: store.put_bytes("k", b"v"), lambda: store.get_bytes("k")):
        with pytest.raises(ObjectStoreError, match="EndpointConnectionError") as caught:
            operation()
        assert f"s3://ai-models at {endpoint}" in str(caught.value)
        assert "check artifacts.endpoint" in str(caught.value)


def test_failed_connections_are_retried(closed_port: int) -> None:
    def requests_sent(max_attempts: int) -> int:
        session = boto3.session.Session(
            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, region_name=REGION
        )
        sent = CallCounter()
        session.events.register("before-send.s3", lambda **_: sent.update(["request"]))
        store = S3Store(
            "ai-models",
            endpoint_url=f"http://127.0.0.1:{closed_port}",
            session=session,
            max_attempts=max_attempts,
        )
        with pytest.raises(ObjectStoreError):
            store.check()
        return sent["request"]

    # Compared, not absolute: botocore may add a request of its own around the attempts.
    assert requests_sent(2) == requests_sent(1) + 1


# TLS.


@pytest.fixture(scope="module")
def moto_s3_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3]:
    with start_moto_server(tmp_path_factory.mktemp("moto-tls"), tls=True) as server:
        yield server


def tls_settings(server: MotoS3, bucket: str, **overrides: Any) -> Settings:
    return Settings(store_url=f"s3://{bucket}", s3_endpoint=server.endpoint_url, **overrides)


def test_a_tls_endpoint_is_trusted_through_the_ca_file(
    moto_s3_tls: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_aws_environment(monkeypatch)
    bucket = fresh_bucket_name()
    moto_s3_tls.create_bucket(bucket)
    assert moto_s3_tls.endpoint_url.startswith("https://")
    store = open_store(tls_settings(moto_s3_tls, bucket, s3_ca_file=str(moto_s3_tls.ca_file)))
    store.check()
    store.put_bytes("k", b"over TLS")
    assert store.get_bytes("k") == b"over TLS"


@pytest.mark.filterwarnings("ignore:Unverified HTTPS request")
def test_insecure_skips_certificate_verification(
    moto_s3_tls: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_aws_environment(monkeypatch)
    bucket = fresh_bucket_name()
    moto_s3_tls.create_bucket(bucket)
    store = open_store(tls_settings(moto_s3_tls, bucket, s3_insecure=True))
    store.check()


def test_an_untrusted_certificate_names_the_ca_setting(moto_s3_tls: MotoS3) -> None:
    store = S3Store(
        "ai-models", endpoint_url=moto_s3_tls.endpoint_url, session=moto_s3_tls.session(), max_attempts=1
    )
    with pytest.raises(ObjectStoreError, match=r"SSLError.*check artifacts.caSecretName"):
        store.check()


def test_a_missing_ca_file_is_refused_at_open(tmp_path: Path) -> None:
    settings = Settings(store_url="s3://ai-models", s3_ca_file=str(tmp_path / "absent.pem"))
    with pytest.raises(ValueError, match="AI_MODELS_S3_CA_FILE"):
        open_store(settings)


# The store built from settings.


def test_open_store_reaches_the_bucket_with_credentials_from_the_environment(
    s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_aws_environment(monkeypatch)
    for name, value in s3_bucket.process_env().items():
        monkeypatch.setenv(name, value)
    store = open_store(Settings())
    assert isinstance(store, S3Store)
    assert store.description == f"s3://{s3_bucket.name} at {s3_bucket.server.endpoint_url}"
    store.check()
    store.put_bytes("catalog/hf/manifest.json", b"{}")
    assert (
        s3_bucket.server.client()
        .get_object(Bucket=s3_bucket.name, Key="catalog/hf/manifest.json")["Body"]
        .read()
        == b"{}"
    )
