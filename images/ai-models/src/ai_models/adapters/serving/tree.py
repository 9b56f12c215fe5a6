"""One artifact onto the claim: verified in staging, published by rename, then marked complete.

    completion record matches          -> nothing to do
    manifest -> every file into staging_dir(digest), resumed where a killed Job left it
             -> every sha256 and size checked -> fsync -> rename to object_dir(digest)
             -> completion record (written to a temporary name, fsync'd, renamed)

A file already in staging is hashed as it is: complete and matching, it is kept; shorter, it is
continued with a Range request from its end (If-Range on its sha256, so a changed file comes
whole); longer, it starts over. A file whose bytes do not match the manifest is fetched once more
from the start (the kept prefix may have been the damaged part) and then fails the artifact: its
staging copy is removed and nothing is published. Memory is one reused buffer per process.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import http.client
import io
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from ai_models.adapters.serving.client import Momentary, Refused, ServingClient
from ai_models.domain.artifacts.manifest import ArtifactFile, ManifestFormatError, manifest_from_json
from ai_models.domain.artifacts.sniff import safe_member_path
from ai_models.domain.backoff import Backoff
from ai_models.domain.delivery.claim_layout import completion_record, object_dir, staging_dir
from ai_models.domain.delivery.materialization import CompletionRecord, RecordedFile, RequestedArtifact

logger = logging.getLogger(__name__)

BUFFER_BYTES: Final = 1024 * 1024
PROGRESS_INTERVAL_SECONDS: Final = 5.0
_SHA256: Final = re.compile(r"^[0-9a-f]{64}$")


class MaterializationFailure(Exception):
    """The artifact cannot be delivered by this Job; `retryable`: a new Job may succeed."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable


@dataclasses.dataclass(frozen=True)
class Retry:
    """`attempts` tries in a row without progress, waiting `base_seconds`, then twice as long each
    time (at most `max_seconds`, the API's Retry-After when it is longer)."""

    attempts: int = 5
    base_seconds: float = 0.5
    max_seconds: float = 8.0
    sleep: Callable[[float], None] = time.sleep

    def wait(self, failures: int, error: Momentary) -> None:
        delay = Backoff(base=self.base_seconds, cap=self.max_seconds).delay(failures)
        self.sleep(max(delay, error.retry_after or 0.0))


@dataclasses.dataclass
class Tally:
    """Bytes of this run: fetched from the API, kept from staging; logged every few seconds."""

    total: int = 0
    fetched: int = 0
    reused: int = 0
    clock: Callable[[], float] = time.monotonic
    event: str = "materializing"  # the progress line's message
    _last_report: float = dataclasses.field(default=0.0)

    def count(self, fetched: int) -> None:
        self.fetched += fetched
        now = self.clock()
        if now - self._last_report >= PROGRESS_INTERVAL_SECONDS:
            self._last_report = now
            done = self.fetched + self.reused
            logger.info(
                self.event,
                extra={
                    "bytes_done": done,
                    "bytes_total": self.total,
                    "percent": done * 100 // self.total if self.total else 100,
                },
            )


@dataclasses.dataclass(frozen=True)
class Wording:
    """How failures name where the copy goes and what happens next: a materialize Job's words by
    default; the node cache has its own."""

    target: str = "the claim"
    write_fix: str = "check the claim's free space and that it is mounted writable"
    resume: str = "a new materialize Job continues where this one stopped"
    republished: str = "the controller starts a Job for the new artifact"


JOB_WORDING: Final = Wording()


@dataclasses.dataclass(frozen=True)
class Delivered:
    digest: str
    files: int
    size_bytes: int
    skipped: bool  # the claim had it complete already


def is_complete(root: Path, digest: str) -> CompletionRecord | None:
    """The completion record when it names `digest` and every file it lists is in the tree with its
    size (hashes were checked before the record was written)."""
    try:
        record = CompletionRecord.from_json((root / completion_record(digest)).read_bytes())
    except OSError:
        return None
    tree = root / object_dir(digest)
    if record is None or record.digest != digest or not tree.is_dir():
        return None
    for item in record.files:
        try:
            if (tree / item.path).stat().st_size != item.size:
                return None
        except OSError:
            return None
    return record


class ArtifactCopy:
    def __init__(
        self,
        *,
        client: ServingClient,
        root: Path,
        artifact: RequestedArtifact,
        buffer: bytearray,
        tally: Tally,
        retry: Retry,
        wording: Wording = JOB_WORDING,
        admit: Callable[[tuple[ArtifactFile, ...]], None] | None = None,
    ) -> None:
        """`admit` sees the manifest's files before anything is written (the node cache reserves
        their space there, and may raise to stop the copy)."""
        self._client = client
        self._wording = wording
        self._admit = admit
        self._root = root
        self._artifact = artifact
        self._ref = artifact.ref.key
        self._buffer = buffer
        self._tally = tally
        self._retry = retry
        self._what = f"{self._ref.describe()} (artifact {artifact.digest})"

    def run(self) -> Delivered:
        try:
            return self._run()
        except OSError as error:
            raise MaterializationFailure(
                f"cannot write {self._what} to {self._wording.target} ({type(error).__name__}: "
                f"{error.strerror}); {self._wording.write_fix}",
                retryable=True,
            ) from error

    def _run(self) -> Delivered:
        digest = self._artifact.digest
        record = is_complete(self._root, digest)
        if record is not None:
            logger.info(
                f"artifact already on {self._wording.target}",
                extra={"model": self._artifact.name, "digest": digest},
            )
            return Delivered(digest, len(record.files), record.size_bytes, skipped=True)
        # A record that does not match its tree must not make the tree look complete meanwhile.
        (self._root / completion_record(digest)).unlink(missing_ok=True)
        files = self._manifest_files()
        if self._admit is not None:
            self._admit(files)
        self._tally.total += sum(item.size for item in files)
        staging = self._root / staging_dir(digest)
        staging.mkdir(parents=True, exist_ok=True)
        for item in files:
            self._file(staging, item)
        _remove_unlisted(staging, {item.path for item in files})
        self._publish(staging, files)
        return Delivered(digest, len(files), sum(item.size for item in files), skipped=False)

    # The manifest.

    def _manifest_files(self) -> tuple[ArtifactFile, ...]:
        body = self._retrying(lambda: self._client.manifest(self._ref), what="the manifest")
        try:
            manifest = manifest_from_json(body)
        except ManifestFormatError as error:
            raise MaterializationFailure(
                f"the manifest of {self._what} cannot be read ({error}): the artifact is damaged; "
                "publishing the object again repairs it",
                retryable=False,
            ) from error
        if manifest.digest != self._artifact.digest:
            raise MaterializationFailure(
                f"the serving API has artifact {manifest.digest} for {self._ref.describe()}, the Job was "
                f"made for {self._artifact.digest}: the object was published again; "
                f"{self._wording.republished}",
                retryable=True,
            )
        for item in manifest.files:
            if safe_member_path(item.path) != item.path or not _SHA256.match(item.sha256) or item.size < 0:
                raise MaterializationFailure(
                    f"the manifest of {self._what} lists a file the materializer refuses ({item.path!r}): "
                    "the artifact is damaged; publishing the object again repairs it",
                    retryable=False,
                )
        return manifest.files

    # One file.

    def _file(self, staging: Path, item: ArtifactFile) -> None:
        target = staging / item.path
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or (target.exists() and not target.is_file()):
            _remove(target)
        fresh_start = False
        while True:
            with target.open("r+b" if target.exists() else "w+b") as out:
                hasher = self._kept(out, item) if not fresh_start else _restart(out)
                if hasher is None or out.tell() < item.size:
                    hasher = self._fetch(out, item, hasher)
                out.flush()
                os.fsync(out.fileno())
                matches = out.tell() == item.size and hasher.hexdigest() == item.sha256
            if matches:
                return
            if fresh_start:
                target.unlink(missing_ok=True)
                raise MaterializationFailure(
                    f"file {item.path!r} of {self._what} does not match the sha256 its manifest records "
                    "(fetched twice): the artifact is damaged; publishing the object again repairs it",
                    retryable=False,
                )
            logger.warning(
                "a file does not match its manifest; fetching it again from the start",
                extra={"file": item.path, "digest": self._artifact.digest},
            )
            fresh_start = True

    def _kept(self, out: io.BufferedRandom, item: ArtifactFile) -> hashlib._Hash | None:
        """The hash of what staging has of the file (positioned at its end), None to start over."""
        size = os.fstat(out.fileno()).st_size
        if size == 0 or size > item.size:
            return _restart(out) if size else None
        hasher = hashlib.sha256()
        view = memoryview(self._buffer)
        while count := out.readinto(view):
            hasher.update(view[:count])
        if size == item.size and hasher.hexdigest() != item.sha256:
            return _restart(out)
        self._tally.reused += size
        return hasher

    def _fetch(
        self, out: io.BufferedRandom, item: ArtifactFile, hasher: hashlib._Hash | None
    ) -> hashlib._Hash:
        hasher = hasher or hashlib.sha256()
        failures = 0
        view = memoryview(self._buffer)
        while out.tell() < item.size:
            position = out.tell()
            try:
                answer = self._client.file(self._ref, item.path, start=position, sha256=item.sha256)
                if answer.start != position:  # the file changed since: the whole of it came
                    hasher = _restart(out)
                if answer.length > item.size - answer.start:
                    self._client.close()
                    raise MaterializationFailure(
                        f"file {item.path!r} of {self._what} is longer than its manifest says: the artifact "
                        "is damaged; publishing the object again repairs it",
                        retryable=False,
                    )
                remaining = answer.length
                while remaining > 0:
                    count = self._read(answer.response, view[: min(len(view), remaining)], item)
                    piece = view[:count]
                    hasher.update(piece)
                    out.write(piece)
                    remaining -= count
                    self._tally.count(count)
                    failures = 0
            except Momentary as error:
                self._client.close()
                failures += 1
                self._give_up_after(failures, error, what=f"file {item.path!r}")
            except Refused as error:
                raise MaterializationFailure(str(error), retryable=error.retryable) from error
        return hasher

    def _read(self, response: http.client.HTTPResponse, view: memoryview, item: ArtifactFile) -> int:
        try:
            count = response.readinto(view)
        except (OSError, http.client.HTTPException) as error:
            raise Momentary(f"file {item.path!r} was cut off ({type(error).__name__})") from error
        if not count:
            raise Momentary(f"file {item.path!r} was cut off")
        return count

    # Retries.

    def _retrying(self, call: Callable[[], bytes], *, what: str) -> bytes:
        failures = 0
        while True:
            try:
                return call()
            except Momentary as error:
                failures += 1
                self._give_up_after(failures, error, what=what)
            except Refused as error:
                raise MaterializationFailure(str(error), retryable=error.retryable) from error

    def _give_up_after(self, failures: int, error: Momentary, *, what: str) -> None:
        if failures >= self._retry.attempts:
            raise MaterializationFailure(
                f"cannot read {what} of {self._what} from the serving API at {self._client.where} "
                f"({failures} attempts, the last: {error}); check that the api pods of the module are "
                f"running; {self._wording.resume}",
                retryable=True,
            ) from error
        logger.info("retrying", extra={"what": what, "attempt": failures, "error": str(error)})
        self._retry.wait(failures, error)

    # Publishing.

    def _publish(self, staging: Path, files: tuple[ArtifactFile, ...]) -> None:
        digest = self._artifact.digest
        tree = self._root / object_dir(digest)
        tree.parent.mkdir(parents=True, exist_ok=True)
        _fsync_tree(staging)
        if tree.exists() or tree.is_symlink():
            # Incomplete (no matching record): never mounted, replaced whole.
            stale = staging.with_name(f"{staging.name}.stale-{os.getpid()}")
            os.rename(tree, stale)
            _remove(stale)
        os.rename(staging, tree)
        fsync_directory(tree.parent)
        fsync_directory(staging.parent)
        record = CompletionRecord(
            digest=digest,
            files=tuple(RecordedFile(path=item.path, size=item.size, sha256=item.sha256) for item in files),
            bytes=sum(item.size for item in files),
            completedAt=_now(),
        )
        final = self._root / completion_record(digest)
        temporary = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        with temporary.open("wb") as out:
            out.write(record.to_json())
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, final)
        fsync_directory(final.parent)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _restart(out: io.BufferedRandom) -> hashlib._Hash:
    out.seek(0)
    out.truncate()
    return hashlib.sha256()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _remove_unlisted(staging: Path, listed: set[str]) -> None:
    """Anything in staging the manifest does not list (left by a Job of a damaged attempt) goes: the
    published tree is exactly the manifest's files."""
    for directory, subdirectories, names in os.walk(staging, topdown=False):
        base = Path(directory)
        for name in names:
            if (base / name).relative_to(staging).as_posix() not in listed:
                (base / name).unlink()
        for name in subdirectories:
            path = base / name
            if path.is_symlink():
                path.unlink()
            elif not any(path.iterdir()):
                path.rmdir()


def _fsync_tree(root: Path) -> None:
    for directory, _subdirectories, _names in os.walk(root, topdown=False):
        fsync_directory(Path(directory))


def fsync_directory(path: Path) -> None:
    """Make a rename or a new entry in `path` durable (the directory's own fsync)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
