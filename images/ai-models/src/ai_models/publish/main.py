"""`ai-models publish`: one publication, from source to a complete artifact, then an outcome.

    files -> verified in the store -> profile read back from them -> manifest (last)

What to publish is the controller's `PublicationRequest` (`domain.publication.request`). The
outcome goes to the Pod's termination message (the request's `termination_message_path`)
in the Model's reason vocabulary, on success and on failure. Exit codes: 0 published, 1 failed
with an outcome written, 2 bad settings.
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ai_models.adapters.hub.http import EndpointPolicy
from ai_models.adapters.hub.repository import HubRepository
from ai_models.adapters.objectstore import ObjectStore, ObjectStoreError, open_store
from ai_models.domain.artifacts.manifest import ArtifactManifest, ArtifactSource
from ai_models.domain.artifacts.profile import ProfileInputs, ResolvedProfile, resolve_profile
from ai_models.domain.artifacts.selection import select_files
from ai_models.domain.catalog.record import WeightsFormat
from ai_models.domain.publication.outcome import PublicationOutcome, outcome_to_json
from ai_models.domain.publication.request import (
    DEFAULT_TERMINATION_MESSAGE_PATH,
    AIModelsPublication,
    HuggingFacePublication,
)
from ai_models.domain.text import counted
from ai_models.names import ENV_PREFIX, ModelReason, PublishVariable, SourceType
from ai_models.publish import huggingface, readback
from ai_models.publish.artifact import ArtifactWriter
from ai_models.publish.cluster import publish_from_cluster
from ai_models.publish.failures import PublicationFailure, store_failure, unexpected_failure
from ai_models.publish.progress import DEFAULT_INTERVAL_SECONDS, Progress, Report, kube_reporter
from ai_models.publish.retry import RetryPolicy
from ai_models.publish.settings import BadSettings, PublishJob, PublishSettings
from ai_models.publish.upload import publish_upload, read_record

logger = logging.getLogger(__name__)

EXIT_PUBLISHED = 0
EXIT_FAILED = 1
EXIT_BAD_SETTINGS = 2


def main(
    *,
    retry: RetryPolicy | None = None,
    progress_interval: float = DEFAULT_INTERVAL_SECONDS,
    reporter: Callable[[PublishJob], Report | None] | None = None,
) -> int:
    """Read the request and the settings from the environment and publish; the exit code."""
    try:
        job = PublishJob.from_environment()
    except BadSettings as error:
        return bad_settings(error)
    return publish(job, retry=retry, progress_interval=progress_interval, reporter=reporter)


def bad_settings(error: BadSettings) -> int:
    problems = [f"invalid setting {problem}" for problem in error.problems]
    for line in problems:
        logger.error(line)
        print(f"ai-models publish: {line}", file=sys.stderr, flush=True)
    # The controller reads the termination message; without one it would just retry the Job.
    _write_outcome(
        _termination_path_from_environment(),
        PublicationOutcome(
            reason=ModelReason.PUBLICATION_FAILED,
            message="the publish Job was started with invalid settings (a controller bug): "
            + "; ".join(problems),
        ),
    )
    return EXIT_BAD_SETTINGS


def publish(
    job: PublishJob,
    *,
    retry: RetryPolicy | None = None,
    progress_interval: float = DEFAULT_INTERVAL_SECONDS,
    reporter: Callable[[PublishJob], Report | None] | None = None,
) -> int:
    owner, digest, settings = job.owner, job.digest, job.settings
    facts = {"owner_kind": owner.kind, "namespace": owner.namespace, "model": owner.name, "digest": digest}
    try:
        store = open_store(settings)
    except ValueError as error:
        logger.error("invalid store settings", extra={**facts, "error": str(error)})
        _write_outcome(
            job.termination_message_path,
            PublicationOutcome(
                ModelReason.PUBLICATION_FAILED,
                "the publish Job cannot use its object store settings "
                f"({PublishSettings.variable('store_url')}, {ENV_PREFIX}S3_*: a module configuration "
                "problem); the log of the publish Job says which",
                digest,
            ),
        )
        return EXIT_BAD_SETTINGS
    report = None
    if job.request.report_progress:
        report = (reporter or _kube_reporter)(job)
    started = time.monotonic()
    writer = ArtifactWriter(store, owner, digest)
    logger.info("publication started", extra={**facts, "source": job.request.source.type.value})
    try:
        with Progress(total=0, report=report, interval=progress_interval) as progress:
            manifest = _publish(job, store, writer, progress, retry or RetryPolicy())
    except PublicationFailure as failure:
        writer.discard()
        logger.error(
            "publication failed",
            extra={
                **facts,
                "reason": failure.reason.value,
                "retryable": failure.retryable,
                "error": failure.message,
            },
        )
        _write_outcome(job.termination_message_path, failure.outcome(digest))
        return EXIT_FAILED
    except Exception as error:
        # A bug or an error nobody foresaw: say so, and let the controller's bounded retries decide.
        logger.exception("publication failed unexpectedly", extra=facts)
        writer.discard()
        _write_outcome(job.termination_message_path, unexpected_failure(error).outcome(digest))
        return EXIT_FAILED
    seconds = time.monotonic() - started
    logger.info(
        "publication finished",
        extra={
            **facts,
            "files": len(manifest.files),
            "bytes": manifest.size_bytes,
            "seconds": round(seconds, 3),
            "mib_per_second": round(manifest.size_bytes / (1024 * 1024) / seconds, 1)
            if seconds > 0
            else None,
            "format": manifest.resolved.get("format"),
        },
    )
    _write_outcome(
        job.termination_message_path,
        PublicationOutcome(
            ModelReason.ARTIFACT_PUBLISHED,
            f"published {counted(len(manifest.files), 'file')}, {counted(manifest.size_bytes, 'byte')}, "
            f"as {digest}",
            digest,
        ),
    )
    return EXIT_PUBLISHED


def _publish(
    job: PublishJob,
    store: ObjectStore,
    writer: ArtifactWriter,
    progress: Progress,
    retry: RetryPolicy,
) -> ArtifactManifest:
    try:
        existing = writer.published()
        if existing is not None:
            logger.info("artifact already published by an earlier attempt", extra={"digest": writer.digest})
            return existing
        writer.begin()
        source = job.request.source
        if isinstance(source, HuggingFacePublication):
            return _from_hugging_face(job, source, writer, progress, retry)
        if isinstance(source, AIModelsPublication):
            policy = EndpointPolicy(allow_link_local=job.settings.sources_allow_link_local_endpoints)
            return publish_from_cluster(
                source, writer, token=job.token, policy=policy, progress=progress, retry=retry
            )
        return _from_upload(store, job, writer, progress)
    except ObjectStoreError as error:
        raise store_failure(error) from error


def _from_hugging_face(
    job: PublishJob,
    source: HuggingFacePublication,
    writer: ArtifactWriter,
    progress: Progress,
    retry: RetryPolicy,
) -> ArtifactManifest:
    repository, revision, files = source.repository, source.revision, source.files
    # The controller chose the files; their weights format is what the profile describes.
    selection = select_files(item.path for item in files)
    if selection.format is None:
        raise PublicationFailure(
            ModelReason.UNSUPPORTED_SOURCE,
            f"the files to publish from {repository} at revision {revision} hold no weights: "
            f"{selection.refusal}",
        )
    hub = HubRepository(
        endpoint=job.endpoint,
        token=job.token,
        policy=EndpointPolicy(allow_link_local=job.settings.sources_allow_link_local_endpoints),
    )
    snapshot = huggingface.read_snapshot(hub, repository, revision, retry)
    if snapshot.sha != revision:
        # The controller passes a commit; should it pass a branch, the files still come from one
        # commit, the one the listing described, and the manifest names it.
        logger.warning(
            "the revision is not a commit; publishing the commit it points at",
            extra={"repository": repository, "revision": revision, "commit": snapshot.sha},
        )
        revision = snapshot.sha
    huggingface.check_listing(files, snapshot, repository=repository, revision=revision)
    progress.total = sum(item.size or 0 for item in files)
    huggingface.publish_files(
        hub,
        writer,
        files,
        repository=repository,
        revision=revision,
        snapshot=snapshot,
        progress=progress,
        retry=retry,
    )
    try:
        profile = _profile(
            writer,
            weights_format=selection.format,
            pipeline_tag=snapshot.pipeline_tag,
            tags=snapshot.tags,
            library_name=snapshot.library_name,
            hub_gguf=snapshot.gguf,
        )
    except readback.WeightsHeaderError as error:
        raise PublicationFailure(
            ModelReason.UNSUPPORTED_SOURCE,
            f"the weights of {repository} at revision {revision} are not valid: {error}; publish a "
            "revision whose weights load",
        ) from error
    published = ArtifactSource(
        type=SourceType.HUGGING_FACE, repository=repository, revision=revision, endpoint=job.endpoint
    )
    return writer.commit(published, profile.resolved, _now())


def _from_upload(
    store: ObjectStore, job: PublishJob, writer: ArtifactWriter, progress: Progress
) -> ArtifactManifest:
    record = read_record(store, job.owner)
    selection = publish_upload(store, job.owner, record, writer, progress)
    assert selection.format is not None  # an accepted selection has a format
    try:
        profile = _profile(writer, weights_format=selection.format)
    except readback.WeightsHeaderError as error:
        raise PublicationFailure(
            ModelReason.UNSUPPORTED_SOURCE,
            f"the uploaded weights are not valid: {error}; upload the model again",
        ) from error
    source = ArtifactSource(type=SourceType.UPLOAD, upload_sha256=record.sha256)
    return writer.commit(source, profile.resolved, _now())


def _profile(
    writer: ArtifactWriter,
    *,
    weights_format: WeightsFormat,
    pipeline_tag: str | None = None,
    tags: tuple[str, ...] = (),
    library_name: str | None = None,
    hub_gguf: Mapping[str, Any] | None = None,
) -> ResolvedProfile:
    files = writer.files
    profile = resolve_profile(
        ProfileInputs(
            format=weights_format,
            filenames=[item.path for item in files],
            config=readback.read_config(writer, files),
            safetensors_counts=readback.total_safetensors_counts(writer, files),
            gguf_headers=readback.read_gguf_headers(writer, files),
            hub_gguf=hub_gguf,
            pipeline_tag=pipeline_tag,
            tags=tags,
            library_name=library_name,
        )
    )
    logger.info(
        "profile resolved", extra={"resolved": dict(profile.resolved), "metadata_complete": profile.complete}
    )
    return profile


def _kube_reporter(job: PublishJob) -> Report | None:
    return kube_reporter(job.owner)


def _write_outcome(path: Path, outcome: PublicationOutcome) -> None:
    try:
        path.write_text(outcome_to_json(outcome))
    except OSError as error:
        logger.error("cannot write the termination message", extra={"path": str(path), "error": str(error)})


def _termination_path_from_environment() -> Path:
    # The request did not validate, so the one variable this needs is read by hand.
    value = os.environ.get(PublishVariable.TERMINATION_MESSAGE_PATH.value)
    return Path(value or DEFAULT_TERMINATION_MESSAGE_PATH)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
