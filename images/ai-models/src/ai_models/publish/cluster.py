"""Publishing from another ai-models cluster: a Ready ClusterModel there, copied file by file from
its serving API into this cluster's store, each file's sha256 checked against that cluster's
manifest, into an artifact with the same digest.

The manifest is read again first: its digest must be the one the controller planned (the
artifact's directory here), and its files the planned ones, else the ClusterModel was published
again there since and the controller plans anew. Files go one at a time over kept-alive
connections (through the egress proxy, as `adapters.serving.remote` sends them), straight from the
HTTP body into `put`; a file that fails for a moment is fetched again
from its start, a few times with backoff. The resolved profile is the other cluster's: the bytes
are the same, and so are the facts it read from them.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable

from ai_models.adapters.hub.http import EndpointPolicy
from ai_models.adapters.objectstore import ObjectStoreError, SizeMismatch
from ai_models.adapters.serving.remote import (
    Momentary,
    Refused,
    RemoteCluster,
    RemoteManifestInvalid,
    RemoteServing,
)
from ai_models.domain.artifacts.manifest import ArtifactFile, ArtifactManifest, ArtifactSource
from ai_models.domain.publication.request import AIModelsPublication, FileSpec
from ai_models.names import ModelReason, SourceType
from ai_models.publish.artifact import ArtifactWriter
from ai_models.publish.failures import PublicationFailure, store_failure
from ai_models.publish.progress import Progress
from ai_models.publish.retry import RetryPolicy

logger = logging.getLogger(__name__)


def publish_from_cluster(
    source: AIModelsPublication,
    writer: ArtifactWriter,
    *,
    token: str | None,
    policy: EndpointPolicy,
    progress: Progress,
    retry: RetryPolicy,
) -> ArtifactManifest:
    """`policy` is the process's endpoint policy (the module setting sources.allowLinkLocalEndpoints)."""
    where = f"ClusterModel {source.cluster_model} of the cluster at {source.endpoint}"
    if token is None:
        raise PublicationFailure(
            ModelReason.PUBLICATION_FAILED,
            f"the publish Job has no token for {where} (a controller bug: it passes the token of "
            "spec.aiModels.tokenSecretRef)",
        )
    cluster = RemoteCluster(endpoint=source.endpoint, token=token, ca_bundle=source.ca_bundle)
    try:
        client = cluster.serving(policy=policy)
    except Refused as error:
        raise _refused(error, where) from error
    try:
        remote = _with_retries(lambda: client.manifest(source.cluster_model), retry, where=where)
        _check_planned(remote, source, writer.digest, where=where)
        progress.total = sum(item.size or 0 for item in source.files)
        # Largest first, as from the Hub: the progress shows the long part early.
        for spec in sorted(source.files, key=lambda item: -(item.size or 0)):
            _copy(client, writer, spec, source=source, progress=progress, retry=retry, where=where)
    finally:
        client.close()
    published = ArtifactSource(
        type=SourceType.AI_MODELS,
        repository=source.cluster_model,
        revision=remote.source.revision,
        endpoint=source.endpoint,
    )
    return writer.commit(published, remote.resolved, _now())


def _check_planned(remote: ArtifactManifest, source: AIModelsPublication, digest: str, *, where: str) -> None:
    planned = {(item.path, item.size, item.lfs_sha256) for item in source.files}
    listed = {(item.path, item.size, item.sha256) for item in remote.files}
    if remote.digest != digest or planned != listed:
        raise PublicationFailure(
            ModelReason.SOURCE_NOT_FOUND,
            f"{where} now has artifact {remote.digest}, not {digest} the controller planned: it was "
            "published again there since; the controller plans again",
        )


def _copy(
    client: RemoteServing,
    writer: ArtifactWriter,
    spec: FileSpec,
    *,
    source: AIModelsPublication,
    progress: Progress,
    retry: RetryPolicy,
    where: str,
) -> ArtifactFile:
    what = f"{spec.path} of {where}"
    expected = spec.lfs_sha256
    assert expected is not None  # the request is refused without every sha256
    attempt = 1
    while True:
        counted = 0

        def count(size: int) -> None:
            nonlocal counted
            counted += size
            progress.add(size)

        try:
            with client.file(source.cluster_model, spec.path) as (length, body):
                if length != spec.size:
                    raise _damaged(f"{what} is served with {length} bytes, its manifest lists {spec.size}")
                stored = writer.put(spec.path, body, size=spec.size, on_bytes=count)
            break
        except (Momentary, ObjectStoreError) as error:
            progress.add(-counted)
            delay = retry.delay(attempt, error)
            if delay is None:
                if isinstance(error, SizeMismatch):
                    raise _damaged(f"{what} did not arrive whole ({spec.size} bytes listed)") from error
                if isinstance(error, ObjectStoreError):
                    raise store_failure(error) from error
                raise _unreachable(error, where) from error
            logger.warning(
                "file failed, retrying",
                extra={"file": spec.path, "attempt": attempt, "retry_in": delay, "error": str(error)},
            )
            retry.sleep(delay)
            attempt += 1
        except Refused as error:
            raise _refused(error, where) from error
    if stored.sha256 != expected:
        raise _damaged(f"{what} has sha256 {stored.sha256}, but the manifest there lists {expected}")
    return stored


def _with_retries(
    read: Callable[[], ArtifactManifest], retry: RetryPolicy, *, where: str
) -> ArtifactManifest:
    attempt = 1
    while True:
        try:
            return read()
        except Momentary as error:
            delay = retry.delay(attempt, error)
            if delay is None:
                raise _unreachable(error, where) from error
            retry.sleep(error.retry_after or delay)
            attempt += 1
        except Refused as error:
            raise _refused(error, where) from error
        except RemoteManifestInvalid as error:
            raise PublicationFailure(ModelReason.PUBLICATION_FAILED, f"{where}: {error}") from error


def _refused(error: Refused, where: str) -> PublicationFailure:
    if error.status == 404:
        return PublicationFailure(ModelReason.SOURCE_NOT_FOUND, f"{where} is gone: {error}")
    # 409 (not Ready there for now) is worth another Job; a refused token or CA is not.
    return PublicationFailure(
        ModelReason.PUBLICATION_FAILED, f"{where} cannot be read: {error}", retryable=error.status == 409
    )


def _unreachable(error: Momentary, where: str) -> PublicationFailure:
    return PublicationFailure(
        ModelReason.PUBLICATION_FAILED,
        f"{where} cannot be read, the cluster is unreachable: {error}; the publication is retried",
        retryable=True,
    )


def _damaged(message: str) -> PublicationFailure:
    return PublicationFailure(
        ModelReason.ARTIFACT_DAMAGED,
        f"{message}: the download was corrupted or that cluster serves other content than it lists; "
        "the publication is retried",
        retryable=True,
    )


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
