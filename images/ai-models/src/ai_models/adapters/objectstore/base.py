"""What every object store offers: the protocol, the object description and the errors."""

from __future__ import annotations

import builtins
import dataclasses
import datetime
from collections.abc import Iterator
from typing import BinaryIO, Protocol


@dataclasses.dataclass(frozen=True)
class ObjectInfo:
    """One stored object.

    `etag` is an opaque version token: it changes whenever the object is replaced. S3 gives its
    ETag without quotes (a multipart upload's ends with `-<parts>`); the directory store derives
    one from the file's identity. Never compare etags across backends or treat them as digests.
    `last_modified` is timezone-aware when known; S3 does not report it for a plain PUT.
    """

    key: str
    size: int
    etag: str | None = None
    last_modified: datetime.datetime | None = None


class ObjectNotFound(KeyError):
    """The key names no object. `key` and `store` say which."""

    def __init__(self, key: str, store: str = "") -> None:
        super().__init__(key, store)
        self.key = key
        self.store = store

    def __str__(self) -> str:
        # KeyError's own str() is the repr of its first argument, which reads badly in logs.
        where = f" in {self.store}" if self.store else ""
        return f"no object {self.key!r}{where}"


class ObjectStoreError(RuntimeError):
    """The store failed. The message names the store, the key, the cause and what to check.

    `hint` is the what-to-check part alone: it names settings, never a path, URL or key, so it may
    be shown where the message may not (a Model's status).
    """

    hint: str = ""


def store_error(*, store: str, action: str, key: str | None, cause: str, hint: str) -> ObjectStoreError:
    """One wording for every backend: `cannot read 'k' from s3://b at https://e: cause; hint`."""
    subject = f" {key!r}" if key is not None else ""
    error = ObjectStoreError(f"cannot {action}{subject} ({store}): {cause}; {hint}")
    error.hint = hint
    return error


class ByteSource(Protocol):
    """What `put_stream` reads from: any binary file, HTTP body or socket reader with `read(n)`.

    Short reads are fine; an empty result means the end.
    """

    def read(self, size: int = -1, /) -> bytes: ...


class ObjectStore(Protocol):
    """A flat namespace of immutable-per-write objects addressed by `/`-separated keys.

    Every method is synchronous and safe to call from several threads; async code wraps calls in
    `asyncio.to_thread`. Keys are validated by `keys.validate_key` (prefixes by
    `keys.validate_prefix`) and a bad one raises `InvalidKey` before any I/O.
    """

    description: str

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        """Store `data` under `key`, replacing any object atomically: readers see old or new."""
        ...

    def put_bytes_if_absent(self, key: str, data: bytes) -> ObjectInfo | None:
        """Store `data` under `key` only if no object is there: None (and nothing written) when one is.

        Atomic across processes and replicas sharing the store: of concurrent calls for one key
        exactly one stores its data (directory: a hard link, which fails if the name exists; S3:
        `PutObject` with `If-None-Match: *`). A claim that must be unique is written this way.
        """
        ...

    def put_stream(self, key: str, stream: ByteSource, *, size: int | None = None) -> ObjectInfo:
        """Store everything `stream` yields, in constant memory, replacing atomically.

        `size`, when given, is a promise: a stream that yields more or fewer bytes raises
        ObjectStoreError and leaves the previous object (or none) in place. S3 also uses it to pick a
        part size that keeps very large objects within the 10,000-part limit. Errors raised by the
        stream itself propagate unchanged and leave nothing behind.
        """
        ...

    def copy_range(self, key: str, source_key: str, *, start: int, length: int) -> ObjectInfo:
        """Store `length` bytes of `source_key` from `start` as `key`, copied inside the store (a
        kernel copy, S3's server-side part copy): no byte passes through the caller.

        Raises ObjectNotFound for a missing source and SizeMismatch when it ends before
        `start + length`; on failure the previous object under `key`, if any, is kept.
        """
        ...

    def get_bytes(self, key: str) -> bytes:
        """The whole object; raises ObjectNotFound."""
        ...

    def open_range(self, key: str, *, start: int = 0, end: int | None = None) -> BinaryIO:
        """Stream bytes `start..end` inclusive (as in HTTP Range); `end=None` reads to the end.

        A range reaching past the end yields what exists, like slicing: the result always equals
        `get_bytes(key)[start : end + 1]`. Raises ObjectNotFound; close the stream when done.
        """
        ...

    def head(self, key: str) -> ObjectInfo | None:
        """The object's description, or None when there is no such object."""
        ...

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object whose key starts with `prefix` (a plain string prefix, as in S3), sorted by key.

        Lazy: pages are fetched while iterating, so errors surface during iteration.
        """
        ...

    def list_prefixes(self, prefix: str) -> builtins.list[str]:
        """Sorted full key prefixes one level below `prefix`, each ending with `/`.

        `list_prefixes("catalog/")` gives `["catalog/hf/", "catalog/other/"]` when objects exist under
        them; objects directly under `prefix` are not prefixes and are left out.
        """
        ...

    def delete(self, key: str) -> None:
        """Remove the object; a missing one is not an error."""
        ...

    def delete_prefix(self, prefix: str) -> int:
        """Remove every object under `prefix` and return how many were removed.

        `prefix` must be non-empty and end with `/`: a slip such as `artifacts/ns/model` would also
        delete `artifacts/ns/model-2/...`, and an empty prefix would empty the store.
        """
        ...

    def check(self) -> None:
        """Cheap reachability check; raises ObjectStoreError with a hint on how to fix the setup."""
        ...
