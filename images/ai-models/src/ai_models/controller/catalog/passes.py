"""One indexing pass of a source, run in the reconciling worker's thread.

The pass reads the Hub token, builds the spec, and indexes chunk by chunk, checkpointing into
`status.resume` after every chunk; `should_stop` (a spec change, the source's deletion, the
controller stopping) ends it at its last checkpoint. Its start, success or failure is written as
the pure outcomes of `domain.catalog.outcomes` say, with an Event on the source each time.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ai_models.adapters.hub.errors import (
    ProviderError,
    ProviderInvalidResponse,
    ProviderRateLimited,
    ProviderRequestRejected,
)
from ai_models.adapters.kube.source_tokens import TokenSecretMissing, source_token
from ai_models.adapters.objectstore import ObjectStoreError
from ai_models.catalog.indexing import Checkpoint, PassResult, run_pass
from ai_models.catalog.remote import RemoteSourceSpec, run_remote_pass
from ai_models.catalog.source import SourceSpec
from ai_models.controller.catalog.context import CatalogRuntime
from ai_models.controller.catalog.status import SourceStatusWriter, checkpoint_of
from ai_models.domain.catalog.outcomes import (
    Failure,
    StatusChange,
    pass_failed,
    pass_started,
    pass_succeeded,
)
from ai_models.domain.catalog.schedule import Action, Decision
from ai_models.names import CatalogProvider, CatalogSourceStatus
from ai_models.names import CatalogSourceReason as Reason

log = logging.getLogger(__name__)


class InvalidSourceSpec(Exception):
    """A spec the schema let through but the indexer cannot use."""


PASS_ERRORS = (ProviderError, ObjectStoreError, TokenSecretMissing, InvalidSourceSpec)


def failure_of(error: Exception) -> Failure:
    """How a pass error is reported: the reason of the table in the admin guide, and our own message
    (provider errors never carry what the remote sent, see adapters.hub.errors)."""
    if isinstance(error, ProviderRateLimited):
        return Failure(
            reason=str(error.reason),
            message=str(error),
            retry_after=datetime.timedelta(seconds=error.retry_after),
        )
    if isinstance(error, ProviderError):
        # The provider refuses the checkpointed cursor itself; resuming would fail forever.
        drop = isinstance(error, (ProviderRequestRejected, ProviderInvalidResponse))
        return Failure(reason=str(error.reason), message=str(error), drop_checkpoint=drop)
    if isinstance(error, TokenSecretMissing):
        return Failure(reason=Reason.TOKEN_SECRET_NOT_FOUND, message=str(error))
    if isinstance(error, InvalidSourceSpec):
        return Failure(reason=Reason.INVALID_SPEC, message=str(error))
    return Failure(reason=Reason.OBJECT_STORE_UNAVAILABLE, message=str(error))


def _report(runtime: CatalogRuntime, writer: SourceStatusWriter, change: StatusChange) -> None:
    now = runtime.clock()
    writer.apply(change, now=now)
    if change.event is not None:
        event = change.event
        runtime.record_event(writer.obj, type_=event.type_, reason=event.reason, message=event.message)


def index(
    runtime: CatalogRuntime,
    writer: SourceStatusWriter,
    decision: Decision,
    *,
    should_stop: Callable[[], bool],
) -> PassResult | None:
    """Start (or resume) a pass and run it to its end: its result, or None when it failed or stopped
    early (the status says which)."""
    obj = writer.obj
    name = writer.name
    generation = int(obj["metadata"].get("generation") or 0)
    resume = checkpoint_of(obj) if decision.action is Action.RESUME else None
    served = writer.status.get("servedGeneration")
    _report(
        runtime,
        writer,
        pass_started(
            trigger=decision.trigger,
            generation=generation,
            resumed_at=resume.processed_models if resume else None,
            served=bool(served),
            now=runtime.clock(),
        ),
    )
    runtime.metrics.catalog_indexing.labels(name).set(1)
    log.info("indexing pass starts", extra={"source": name, "trigger": str(decision.trigger)})
    try:
        result = _run(runtime, writer, obj, resume=resume, should_stop=should_stop)
    except PASS_ERRORS as error:
        _failed(runtime, writer, failure_of(error), served=served)
        return None
    finally:
        runtime.metrics.catalog_indexing.labels(name).set(0)
    if result is None:
        log.info("indexing pass stopped at its checkpoint", extra={"source": name})
        return None
    _report(
        runtime,
        writer,
        pass_succeeded(models=result.models, generation=result.generation, now=runtime.clock()),
    )
    metrics = runtime.metrics
    metrics.catalog_indexed_models.labels(name).set(result.models)
    metrics.catalog_last_success.labels(name).set(runtime.clock().timestamp())
    metrics.catalog_sync_failing.labels(name).set(0)
    log.info("indexing pass completed", extra={"source": name, "models": result.models})
    return result


def _run(
    runtime: CatalogRuntime,
    writer: SourceStatusWriter,
    obj: Mapping[str, Any],
    *,
    resume: Checkpoint | None,
    should_stop: Callable[[], bool],
) -> PassResult | None:
    token = source_token(runtime.api, runtime.settings.namespace, obj)
    if (obj.get("spec") or {}).get("provider") == CatalogProvider.AI_MODELS:
        return _run_remote(runtime, writer, obj, token=token, resume=resume, should_stop=should_stop)
    try:
        spec = SourceSpec.from_resource(obj, default_endpoint=runtime.settings.hf_endpoint, token=token)
    except ValueError as error:
        # An object older than a CRD rule (or written past it) gets the rule's answer here.
        raise InvalidSourceSpec(str(error)) from error
    with runtime.hub_for(spec) as hub:
        return run_pass(
            spec=spec,
            hub=hub,
            store=runtime.store,
            resume=resume,
            on_checkpoint=lambda checkpoint: writer.checkpoint(checkpoint, now=runtime.clock()),
            clock=runtime.clock,
            should_stop=should_stop,
        )


def _run_remote(
    runtime: CatalogRuntime,
    writer: SourceStatusWriter,
    obj: Mapping[str, Any],
    *,
    token: str | None,
    resume: Checkpoint | None,
    should_stop: Callable[[], bool],
) -> PassResult | None:
    """A pass of an AIModels source: the other cluster's Ready ClusterModels (catalog.remote)."""
    if token is None:
        raise InvalidSourceSpec(
            "spec.aiModels.tokenSecretRef is not set: name a Secret in the module namespace holding a "
            "token the other ai-models cluster accepts (key `token`)"
        )
    try:
        spec = RemoteSourceSpec.from_resource(obj, token=token)
    except ValueError as error:
        raise InvalidSourceSpec(str(error)) from error
    with runtime.remote_for(spec) as listing:
        return run_remote_pass(
            spec=spec,
            listing=listing,
            store=runtime.store,
            resume=resume,
            on_checkpoint=lambda checkpoint: writer.checkpoint(checkpoint, now=runtime.clock()),
            clock=runtime.clock,
            should_stop=should_stop,
        )


def _failed(runtime: CatalogRuntime, writer: SourceStatusWriter, failure: Failure, *, served: object) -> None:
    # The count the start of this pass left (an admin's trigger began a fresh backoff).
    before = int(writer.status.get(CatalogSourceStatus.FAILED_PASSES) or 0)
    change = pass_failed(
        failure,
        failed_passes=before,
        served=str(served) if served else None,
        now=runtime.clock(),
        base=runtime.retry_base,
        cap=runtime.retry_cap,
    )
    _report(runtime, writer, change)
    metrics = runtime.metrics
    metrics.catalog_sync_failures.labels(writer.name, failure.reason).inc()
    metrics.catalog_sync_failing.labels(writer.name).set(1)
    log.warning(
        "indexing pass failed",
        extra={
            "source": writer.name,
            "reason": failure.reason,
            "error": failure.message,
            "failed_passes": before + 1,
        },
    )
