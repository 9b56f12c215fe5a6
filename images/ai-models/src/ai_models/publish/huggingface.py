"""Publishing from a Hugging Face repository: each selected file streamed from the Hub (or a mirror)
into the store, verified against the sha256 the Hub lists for LFS files.

Each file goes straight from its HTTP body into `put_stream` (two at a time into a directory
store, see `parallel`), so memory stays at a few chunks per file whatever the model's size. A
file that fails for a moment (5xx, rate limit, a dropped connection, a store hiccup) is tried
again from its start, a few times with backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ai_models.adapters.hub.errors import ProviderError
from ai_models.adapters.hub.repository import HubRepository, RepositorySnapshot
from ai_models.adapters.objectstore import ObjectStoreError, SizeMismatch
from ai_models.domain.artifacts.manifest import ArtifactFile
from ai_models.domain.models.source import revision_problem
from ai_models.domain.publication.request import FileSpec
from ai_models.names import ModelReason
from ai_models.publish.artifact import ArtifactWriter
from ai_models.publish.failures import PublicationFailure, source_failure, store_failure
from ai_models.publish.parallel import files_at_once, run_parallel
from ai_models.publish.progress import Progress
from ai_models.publish.retry import RetryPolicy

logger = logging.getLogger(__name__)


def read_snapshot(
    hub: HubRepository, repository: str, revision: str, retry: RetryPolicy
) -> RepositorySnapshot:
    problem = revision_problem(revision)
    if problem is not None:
        # Sent as it is, `..` would be normalized away by the HTTP client and the default branch
        # published in its place.
        raise PublicationFailure(
            ModelReason.UNSUPPORTED_SOURCE,
            f"the revision {revision!r} of {repository} {problem}: only a branch, tag or commit name "
            "can be published (check ?revision= in spec.source.url)",
        )
    attempt = 1
    while True:
        try:
            return hub.repository_snapshot(repository, revision)
        except ProviderError as error:
            delay = retry.delay(attempt, error)
            if delay is None:
                raise source_failure(error) from error
            logger.warning(
                "reading the repository failed, retrying",
                extra={
                    "repository": repository,
                    "attempt": attempt,
                    "retry_in": delay,
                    "error": error.message,
                },
            )
            retry.sleep(delay)
            attempt += 1


def check_listing(
    files: Sequence[FileSpec], snapshot: RepositorySnapshot, *, repository: str, revision: str
) -> None:
    """Fail before the first byte when a selected file is not in the repository at that commit."""
    listed = {item.path for item in snapshot.files}
    missing = [item.path for item in files if item.path not in listed]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise PublicationFailure(
            ModelReason.SOURCE_NOT_FOUND,
            f"{repository} at revision {revision} has no file {shown}: the repository changed since the "
            "publication was planned, or the revision is not the commit it was; the controller plans again",
        )


def publish_files(
    hub: HubRepository,
    writer: ArtifactWriter,
    files: Sequence[FileSpec],
    *,
    repository: str,
    revision: str,
    snapshot: RepositorySnapshot,
    progress: Progress,
    retry: RetryPolicy,
) -> list[ArtifactFile]:
    def task(spec: FileSpec) -> Callable[[], ArtifactFile]:
        listed = snapshot.file(spec.path)
        expected_sha = spec.lfs_sha256 or (listed.lfs_sha256 if listed is not None else None)
        return lambda: _publish_file(
            hub,
            writer,
            spec,
            repository=repository,
            revision=revision,
            expected_sha=expected_sha,
            progress=progress,
            retry=retry,
        )

    # Largest first: the small companions fill the gaps at the end.
    ordered = sorted(files, key=lambda spec: -(spec.size or 0))
    return run_parallel(
        [task(spec) for spec in ordered], workers=files_at_once(writer.store), progress=progress
    )


def _publish_file(
    hub: HubRepository,
    writer: ArtifactWriter,
    spec: FileSpec,
    *,
    repository: str,
    revision: str,
    expected_sha: str | None,
    progress: Progress,
    retry: RetryPolicy,
) -> ArtifactFile:
    what = f"{spec.path} of {repository} at revision {revision}"
    attempt = 1
    while True:
        counted = 0

        def count(size: int) -> None:
            nonlocal counted
            counted += size
            progress.add(size)

        try:
            # A body longer than the listed size is cut off: it cannot be the file that was planned.
            with hub.open_file(repository, revision, spec.path, size=spec.size) as remote:
                stored = writer.put(spec.path, remote, size=spec.size, on_bytes=count)
            break
        except (ProviderError, ObjectStoreError) as error:
            progress.add(-counted)  # this attempt's bytes are written again
            delay = retry.delay(attempt, error)
            if delay is None:
                raise _failure(error, what=what, spec=spec) from error
            logger.warning(
                "file failed, retrying",
                extra={"file": spec.path, "attempt": attempt, "retry_in": delay, "error": str(error)},
            )
            retry.sleep(delay)
            attempt += 1
    if expected_sha is not None and stored.sha256 != expected_sha:
        raise PublicationFailure(
            ModelReason.ARTIFACT_DAMAGED,
            f"{what} has sha256 {stored.sha256}, but the Hub lists {expected_sha} for it: the download "
            "was corrupted or the endpoint serves other content than it lists; the publication is retried",
            retryable=True,
        )
    return stored


def _failure(error: Exception, *, what: str, spec: FileSpec) -> PublicationFailure:
    if isinstance(error, SizeMismatch):
        # The store's message names its location and key: the log has it, the status does not.
        logger.warning("file did not arrive whole", extra={"file": spec.path, "error": str(error)})
        return PublicationFailure(
            ModelReason.ARTIFACT_DAMAGED,
            f"{what} did not arrive whole: the Hub listed {spec.size} bytes; the publication is retried",
            retryable=True,
        )
    if isinstance(error, ProviderError):
        return source_failure(error)
    assert isinstance(error, ObjectStoreError)
    return store_failure(error)
