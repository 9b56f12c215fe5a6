"""The S3 backend: one bucket through boto3, for AWS and S3-compatible services alike.

A PUT replaces an object atomically in S3 itself, and a multipart upload becomes visible only
when completed, so both writes give readers the old object or the new one. The boto3 client is
thread-safe; each `put_stream` gets its own transfer manager.
"""

from __future__ import annotations

import builtins
import contextlib
import io
from collections.abc import Iterator
from typing import Any, BinaryIO

import boto3  # type: ignore[import-untyped,unused-ignore]  # boto3 has no type hints
from boto3.s3.transfer import TransferConfig  # type: ignore[import-untyped,unused-ignore]  # same
from botocore.config import Config  # type: ignore[import-untyped,unused-ignore]  # botocore has none
from botocore.exceptions import (  # type: ignore[import-untyped,unused-ignore]  # same
    BotoCoreError,
    ClientError,
)

from ai_models.adapters.objectstore import s3errors
from ai_models.adapters.objectstore.base import (
    ByteSource,
    ObjectInfo,
    ObjectNotFound,
    ObjectStoreError,
    store_error,
)
from ai_models.adapters.objectstore.keys import InvalidKey, validate_key, validate_prefix
from ai_models.adapters.objectstore.ranges import check_range, http_range
from ai_models.adapters.objectstore.streams import CountingSource, SizeMismatch, reader

MIB = 1024 * 1024
MIN_PART_BYTES = 5 * MIB  # S3 refuses smaller parts (except the last)
DEFAULT_PART_BYTES = 8 * MIB
MAX_PARTS = 10_000  # S3's limit per multipart upload
PAGE_SIZE = 1000  # S3's maximum for listings and batch deletes
_TAKEN_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"})


class S3Store:
    """An ObjectStore in one S3 bucket.

    Credentials come from boto3's standard chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in the
    pods) unless a `session` is given. `put_stream` holds at most about `(concurrency + 1) *
    part_size` bytes of a stream in memory, whatever its length.
    """

    def __init__(
        self,
        bucket: str,
        *,
        endpoint_url: str | None = None,
        region: str = "us-east-1",
        path_style: bool = True,
        verify: bool | str = True,
        session: Any = None,
        part_size: int = DEFAULT_PART_BYTES,
        concurrency: int = 4,
        max_attempts: int = 5,
        connect_timeout: float = 10,
        read_timeout: float = 60,
    ) -> None:
        if part_size < MIN_PART_BYTES:
            raise ValueError(
                f"part_size must be at least {MIN_PART_BYTES} bytes (S3's minimum), got {part_size}"
            )
        config = Config(
            region_name=region,
            retries={"mode": "standard", "max_attempts": max_attempts},
            s3={"addressing_style": "path" if path_style else "virtual"},
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_pool_connections=max(10, 2 * concurrency),
            # boto3 now adds CRC32 checksums to every upload by default; several S3-compatible
            # services (older Ceph RGW and MinIO among them) reject them. Send them only when an
            # operation requires one.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        self._client = (session or boto3.session.Session()).client(
            "s3", endpoint_url=endpoint_url, verify=verify, config=config
        )
        self._part_size = part_size
        self._concurrency = concurrency
        self.bucket = bucket
        self.endpoint: str = self._client.meta.endpoint_url
        self.description = f"s3://{bucket} at {self.endpoint}"

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        validate_key(key)
        response = self._call("put_object", action="write", key=key, Body=data)
        return ObjectInfo(key=key, size=len(data), etag=_etag(response.get("ETag")))

    def put_bytes_if_absent(self, key: str, data: bytes) -> ObjectInfo | None:
        validate_key(key)
        try:
            response = self._client.put_object(Bucket=self.bucket, Key=key, Body=data, IfNoneMatch="*")
        except ClientError as exc:
            # 412: the key exists. 409 ConditionalRequestConflict: another conditional write of the
            # same key is in flight, so this one lost the race as well.
            if s3errors.error_code(exc) in _TAKEN_CODES:
                return None
            raise s3errors.translate(exc, store=self.description, action="write", key=key) from exc
        except BotoCoreError as exc:
            raise s3errors.translate(exc, store=self.description, action="write", key=key) from exc
        return ObjectInfo(key=key, size=len(data), etag=_etag(response.get("ETag")))

    def put_stream(self, key: str, stream: ByteSource, *, size: int | None = None) -> ObjectInfo:
        validate_key(key)
        part_size = part_size_for(size, minimum=self._part_size)
        source = CountingSource(
            stream,
            expected=size,
            limit=part_size * MAX_PARTS,
            chunk_bytes=part_size,
            store=self.description,
            key=key,
        )
        config = TransferConfig(
            multipart_threshold=part_size,
            multipart_chunksize=part_size,
            max_concurrency=self._concurrency,
            preferred_transfer_client="classic",
        )
        # Not a constructor argument in boto3's subclass; it caps the parts read ahead of uploads.
        config.max_in_memory_upload_chunks = self._concurrency
        with self._translating("write", key):
            # A failed upload is aborted by s3transfer, so no half-written parts linger; errors of
            # the caller's stream (and SizeMismatch) come out of it unchanged.
            self._client.upload_fileobj(source, self.bucket, key, Config=config)
        # The transfer manager does not return the completed upload's ETag; ask for it.
        info = self.head(key)
        return ObjectInfo(
            key=key,
            size=source.count,
            etag=info.etag if info else None,
            last_modified=info.last_modified if info else None,
        )

    def copy_range(self, key: str, source_key: str, *, start: int, length: int) -> ObjectInfo:
        validate_key(key)
        validate_key(source_key)
        check_range(start, None)
        if length < 0:
            raise ValueError(f"a copy takes 0 or more bytes, got length={length}")
        source = self.head(source_key)
        if source is None:
            raise ObjectNotFound(source_key, self.description)
        if start + length > source.size:
            raise SizeMismatch(
                f"cannot write {key!r} ({self.description}): {source_key!r} is {source.size} bytes long, "
                f"it ends before byte {start + length}; the previous object, if any, is kept"
            )
        if length == 0:
            return self.put_bytes(key, b"")
        # A multipart upload whose parts S3 copies from the source: a part may be 5 GiB, one
        # object 10,000 parts, as for put_stream; nothing is downloaded or uploaded here.
        part_size = part_size_for(length, minimum=self._part_size)
        upload_id = self._call("create_multipart_upload", action="write", key=key)["UploadId"]
        try:
            parts = []
            for number, offset in enumerate(range(0, length, part_size), start=1):
                last = min(offset + part_size, length) - 1
                answer = self._call(
                    "upload_part_copy",
                    action="write",
                    key=key,
                    UploadId=upload_id,
                    PartNumber=number,
                    CopySource={"Bucket": self.bucket, "Key": source_key},
                    CopySourceRange=f"bytes={start + offset}-{start + last}",
                )
                parts.append({"PartNumber": number, "ETag": answer["CopyPartResult"]["ETag"]})
            self._call(
                "complete_multipart_upload",
                action="write",
                key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
            )
        except BaseException:
            with contextlib.suppress(ObjectStoreError):
                self._call("abort_multipart_upload", action="write", key=key, UploadId=upload_id)
            raise
        info = self.head(key)
        return ObjectInfo(
            key=key,
            size=length,
            etag=info.etag if info else None,
            last_modified=info.last_modified if info else None,
        )

    def get_bytes(self, key: str) -> bytes:
        validate_key(key)
        response = self._call("get_object", action="read", key=key)
        body = response["Body"]
        with contextlib.closing(body), self._translating("read", key):
            data: bytes = body.read()
        return data

    def open_range(self, key: str, *, start: int = 0, end: int | None = None) -> BinaryIO:
        validate_key(key)
        check_range(start, end)
        header = http_range(start, end)
        try:
            response = self._call(
                "get_object", action="read", key=key, **({"Range": header} if header else {})
            )
        except _Unsatisfiable:
            # Only an existing object answers 416: the range starts at or past its end.
            return io.BytesIO(b"")
        body = response["Body"]
        return reader(
            body.read,
            close=body.close,
            limit=None,  # the server sends exactly the range
            translate=lambda exc: s3errors.translate(exc, store=self.description, action="read", key=key),
        )

    def head(self, key: str) -> ObjectInfo | None:
        validate_key(key)
        try:
            response = self._call("head_object", action="inspect", key=key)
        except ObjectNotFound:
            return None
        return ObjectInfo(
            key=key,
            size=int(response["ContentLength"]),
            etag=_etag(response.get("ETag")),
            last_modified=response.get("LastModified"),
        )

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        validate_prefix(prefix)
        return self._list(prefix)

    def list_prefixes(self, prefix: str) -> builtins.list[str]:
        validate_prefix(prefix)
        paginator = self._client.get_paginator("list_objects_v2")
        found: builtins.list[str] = []
        with self._translating("list", prefix or None):
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/"):
                found.extend(str(common["Prefix"]) for common in page.get("CommonPrefixes", []))
        return sorted(found)

    def delete(self, key: str) -> None:
        validate_key(key)
        # S3 answers 204 for a missing key too, so there is nothing to tolerate here.
        self._call("delete_object", action="delete", key=key)

    def delete_prefix(self, prefix: str) -> int:
        validate_prefix(prefix, allow_empty=False)
        if not prefix.endswith("/"):
            raise InvalidKey(prefix, "delete_prefix needs a prefix ending with '/'")
        deleted = 0
        paginator = self._client.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=self.bucket, Prefix=prefix, PaginationConfig={"PageSize": PAGE_SIZE}
        )
        # Each listed page is one batch delete; S3 continues a listing after the last key it
        # returned, so deleting a page does not disturb the next one. Folder markers go too.
        with self._translating("list", prefix):
            for page in pages:
                keys = [str(item["Key"]) for item in page.get("Contents", [])]
                if keys:
                    deleted += self._delete_batch(keys)
        return deleted

    def check(self) -> None:
        self._call("head_bucket", action="reach the bucket", key=None)

    # Helpers.

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        paginator = self._client.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=self.bucket, Prefix=prefix, PaginationConfig={"PageSize": PAGE_SIZE}
        )
        with self._translating("list", prefix or None):
            for page in pages:
                for item in page.get("Contents", []):
                    key = str(item["Key"])
                    # Consoles create empty `folder/` markers; they are no objects a key could name.
                    if key.endswith("/"):
                        continue
                    yield ObjectInfo(
                        key=key,
                        size=int(item["Size"]),
                        etag=_etag(item.get("ETag")),
                        last_modified=item.get("LastModified"),
                    )

    def _delete_batch(self, keys: builtins.list[str]) -> int:
        response = self._call(
            "delete_objects",
            action="delete",
            key=None,
            Delete={"Objects": [{"Key": key} for key in keys], "Quiet": True},
        )
        errors = response.get("Errors", [])
        if errors:
            first = errors[0]
            more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
            raise store_error(
                store=self.description,
                action="delete",
                key=str(first.get("Key")),
                cause=f"{first.get('Code')}: {first.get('Message')}{more}",
                hint=s3errors.hint_for_code(str(first.get("Code", ""))),
            )
        return len(keys)

    def _call(self, operation: str, *, action: str, key: str | None, **params: Any) -> Any:
        """One client call on the bucket with errors mapped to ObjectNotFound / ObjectStoreError."""
        if key is not None:
            params["Key"] = key
        try:
            return getattr(self._client, operation)(Bucket=self.bucket, **params)
        except ClientError as exc:
            if key is not None and s3errors.is_missing_key(exc):
                raise ObjectNotFound(key, self.description) from None
            if "Range" in params and s3errors.error_code(exc) == "InvalidRange":
                raise _Unsatisfiable(f"range {params['Range']} starts past the end of {key!r}") from None
            raise s3errors.translate(exc, store=self.description, action=action, key=key) from exc
        except BotoCoreError as exc:
            raise s3errors.translate(exc, store=self.description, action=action, key=key) from exc

    @contextlib.contextmanager
    def _translating(self, action: str, key: str | None) -> Iterator[None]:
        try:
            yield
        except (ClientError, BotoCoreError) as exc:
            raise s3errors.translate(exc, store=self.description, action=action, key=key) from exc


def part_size_for(size: int | None, *, minimum: int) -> int:
    """`minimum`, grown in whole MiB when needed so that `size` bytes fit in S3's 10,000 parts."""
    if size is None:
        return minimum
    needed = -(-size // MAX_PARTS)
    return max(minimum, -(-needed // MIB) * MIB)


class _Unsatisfiable(ObjectStoreError):
    """S3's 416: the range starts past the end of an existing object (handled by open_range)."""


def _etag(value: object) -> str | None:
    return str(value).strip('"') if value else None
