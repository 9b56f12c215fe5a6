"""The artifact directory being written: its files, verified on the way in, and its manifest, last.

An artifact exists only once its manifest does, so the writer first removes a manifest left by
an earlier attempt that it is about to redo, stores every file with its sha256 computed while
streaming, and writes the manifest only after the last file is stored and verified. On failure
`discard` removes whatever this attempt wrote under the artifact's prefix.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ai_models.adapters.objectstore import (
    ByteSource,
    ObjectNotFound,
    ObjectStore,
    ObjectStoreError,
    SizeMismatch,
)
from ai_models.domain.artifacts.layout import artifact_prefix, file_key, manifest_key
from ai_models.domain.artifacts.manifest import (
    ArtifactFile,
    ArtifactManifest,
    ArtifactSource,
    ManifestFormatError,
    manifest_from_json,
    manifest_to_json,
)
from ai_models.domain.storage.ledger import Owner
from ai_models.publish.streams import HashingReader

logger = logging.getLogger(__name__)

HASH_BUFFER_BYTES = 1024 * 1024


class ArtifactWriter:
    def __init__(self, store: ObjectStore, owner: Owner, digest: str) -> None:
        self.store = store
        self.owner = owner
        self.digest = digest
        self.prefix = artifact_prefix(owner, digest)
        self._files: dict[str, ArtifactFile] = {}
        self._lock = threading.Lock()  # files are stored from several threads at once
        self._begun = False

    @property
    def files(self) -> tuple[ArtifactFile, ...]:
        with self._lock:
            return tuple(sorted(self._files.values(), key=lambda item: item.path))

    def key(self, path: str) -> str:
        return file_key(self.owner, self.digest, path)

    def published(self) -> ArtifactManifest | None:
        """The manifest of an earlier attempt that finished, when every file it lists is still in
        place as written (same size and version token); a rerun of a finished Job then has
        nothing to do."""
        try:
            data = self.store.get_bytes(manifest_key(self.owner, self.digest))
        except ObjectNotFound:
            return None
        try:
            manifest = manifest_from_json(data)
        except ManifestFormatError:
            return None
        if manifest.owner != self.owner or manifest.digest != self.digest:
            return None
        for item in manifest.files:
            info = self.store.head(self.key(item.path))
            if info is None or info.size != item.size or (item.etag is not None and info.etag != item.etag):
                return None
        return manifest

    def begin(self) -> None:
        """Forget an unfinished or damaged earlier attempt: without a manifest it is no artifact."""
        self._begun = True
        self.store.delete(manifest_key(self.owner, self.digest))

    def put(
        self,
        path: str,
        stream: ByteSource,
        *,
        size: int | None,
        on_bytes: Callable[[int], None] | None = None,
    ) -> ArtifactFile:
        """Store `stream` as `path`, hashing it on the way; returns what the manifest will list."""
        started = time.monotonic()
        logger.info("storing file", extra={"file": path, "expected_bytes": size})
        hashing = HashingReader(stream, on_bytes=on_bytes)
        info = self.store.put_stream(self.key(path), hashing, size=size)
        return self._stored(
            ArtifactFile(path=path, size=info.size, sha256=hashing.hexdigest(), etag=info.etag), started
        )

    def copy(
        self,
        path: str,
        source_key: str,
        *,
        start: int,
        size: int,
        on_bytes: Callable[[int], None] | None = None,
    ) -> ArtifactFile:
        """Store `size` bytes of the stored object `source_key` from `start` as `path` (an archive
        member): copied inside the store, so no byte is downloaded and uploaded again, while this
        thread reads the same range and hashes it; the copy's wait for the disk (or for S3) then
        overlaps the hashing instead of preceding it. The copy is held to the same size."""
        started = time.monotonic()
        logger.info("storing file", extra={"file": path, "expected_bytes": size, "copied_from": source_key})
        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="copy") as pool:
            copying = pool.submit(self.store.copy_range, self.key(path), source_key, start=start, length=size)
            try:
                sha256 = self._hash_range(source_key, start=start, size=size, on_bytes=on_bytes)
            finally:
                concurrent.futures.wait([copying])  # a copy cannot be stopped; never leave it behind
            info = copying.result()
        return self._stored(ArtifactFile(path=path, size=info.size, sha256=sha256, etag=info.etag), started)

    def _hash_range(self, key: str, *, start: int, size: int, on_bytes: Callable[[int], None] | None) -> str:
        if size == 0:
            return hashlib.sha256(b"").hexdigest()
        hashing = HashingReader(
            self.store.open_range(key, start=start, end=start + size - 1), on_bytes=on_bytes
        )
        with contextlib.closing(hashing):
            buffer = memoryview(bytearray(HASH_BUFFER_BYTES))
            while hashing.readinto(buffer):
                pass
        if hashing.count != size:
            raise SizeMismatch(
                f"cannot hash {size} bytes of {key!r} ({self.store.description}) from byte {start}: it ends "
                f"after {hashing.count}"
            )
        return hashing.hexdigest()

    def _stored(self, stored: ArtifactFile, started: float) -> ArtifactFile:
        path = stored.path
        with self._lock:
            self._files[path] = stored
        seconds = time.monotonic() - started
        logger.info(
            "file stored",
            extra={
                "file": path,
                "bytes": stored.size,
                "seconds": round(seconds, 3),
                "mib_per_second": round(stored.size / (1024 * 1024) / seconds, 1) if seconds > 0 else None,
                "sha256": stored.sha256,
            },
        )
        return stored

    def move(self, path: str, new_path: str) -> ArtifactFile:
        """Store an already written file under another path (a copy, then a delete)."""
        with self._lock:
            old = self._files.pop(path)
        with self.store.open_range(self.key(path)) as stream:
            info = self.store.put_stream(self.key(new_path), stream, size=old.size)
        self.store.delete(self.key(path))
        moved = ArtifactFile(path=new_path, size=info.size, sha256=old.sha256, etag=info.etag)
        with self._lock:
            self._files[new_path] = moved
        return moved

    def remove(self, paths: Iterable[str]) -> None:
        for path in paths:
            with self._lock:
                self._files.pop(path, None)
            self.store.delete(self.key(path))

    def commit(
        self, source: ArtifactSource, resolved: Mapping[str, Any], published_at: str
    ) -> ArtifactManifest:
        """Write the manifest: from now on the artifact exists."""
        manifest = ArtifactManifest(
            owner=self.owner,
            digest=self.digest,
            source=source,
            files=self.files,
            resolved=dict(resolved),
            published_at=published_at,
        )
        self.store.put_bytes(manifest_key(self.owner, self.digest), manifest_to_json(manifest))
        return manifest

    def discard(self) -> None:
        """Remove everything under the artifact's prefix once this attempt has begun writing (a
        finished artifact found by `published` is never touched); a failure is logged, never
        raised, because the caller is already reporting why the publication failed."""
        if not self._begun:
            return
        try:
            removed = self.store.delete_prefix(self.prefix)
        except ObjectStoreError as error:
            logger.warning(
                "cannot remove the files of the failed publication; the inventory pass removes them later",
                extra={"prefix": self.prefix, "error": str(error)},
            )
            return
        with self._lock:
            self._files.clear()
        logger.info(
            "files of the failed publication removed", extra={"prefix": self.prefix, "objects": removed}
        )
