"""The ModelCatalogSource reconciler of kopf, kept only until `controller.main` runs
`controller.catalog` (the reconciler on the controller runtime) instead; then this module goes.

One kopf daemon per source runs its indexing passes.

The daemon loops over a pure decision (`domain.catalog.schedule.decide`) made from the live
object, so every trigger — opt-in, spec change, request annotation, timer, resume after a
restart or a provider error — goes through one place. Passes run in a worker thread (the Hub
client and the object store are synchronous) and checkpoint into `status.resume` after every
chunk; nothing reaches the provider before the opt-in annotation.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import kopf
from kubernetes import client as k8s

from ai_models.adapters.hub import HubClient
from ai_models.adapters.hub.errors import (
    ProviderError,
    ProviderInvalidResponse,
    ProviderRateLimited,
    ProviderRequestRejected,
)
from ai_models.adapters.objectstore import ObjectStore, ObjectStoreError
from ai_models.catalog.indexing import Checkpoint, PassResult, run_pass
from ai_models.catalog.layout import source_prefix
from ai_models.catalog.source import SourceSpec
from ai_models.controller.catalog.token import TokenSecretMissing, source_token
from ai_models.controller.metrics import ControllerMetrics
from ai_models.controller.settings import ControllerSettings
from ai_models.domain.catalog.schedule import (
    Action,
    Decision,
    SourceObservation,
    backoff,
    decide,
    parse_duration,
)
from ai_models.domain.conditions import set_condition, timestamp
from ai_models.names import (
    API_GROUP,
    API_VERSION,
    CATALOG_SYNC_ANNOTATION,
    CATALOG_SYNC_ENABLED,
    CATALOG_SYNC_REQUESTED_AT_ANNOTATION,
    CatalogConditionType,
    Plural,
)
from ai_models.names import CatalogSourceEvent as Event
from ai_models.names import CatalogSourceReason as Reason

__all__ = ["CatalogRuntime", "TokenSecretMissing", "register", "source_token"]
log = logging.getLogger(__name__)
READY = CatalogConditionType.READY
INDEXING = CatalogConditionType.INDEXING
# How often a sleeping daemon looks at its (live, in-memory) object for a new trigger.
POLL_SECONDS = 1.0
STATUS_ECHO_TIMEOUT = datetime.timedelta(seconds=10)


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class InvalidSourceSpec(Exception):
    """A spec the schema let through but the indexer cannot use."""


def _failure_reason(error: Exception) -> str:
    if isinstance(error, ProviderError):
        return str(error.reason)
    if isinstance(error, TokenSecretMissing):
        return Reason.TOKEN_SECRET_NOT_FOUND
    if isinstance(error, InvalidSourceSpec):
        return Reason.INVALID_SPEC
    return Reason.OBJECT_STORE_UNAVAILABLE


@dataclasses.dataclass
class CatalogRuntime:
    """What the reconciler needs from the process; built once by the controller's main."""

    settings: ControllerSettings
    store: ObjectStore
    api: Any
    hub_for: Callable[[SourceSpec], HubClient]
    metrics: ControllerMetrics


def register(registry: kopf.OperatorRegistry, runtime: CatalogRuntime) -> None:
    @kopf.daemon(
        API_GROUP,
        API_VERSION,
        Plural.MODEL_CATALOG_SOURCES,
        registry=registry,
        # A stopping daemon gets a grace period (it may be writing a chunk, and on deletion it
        # removes the source's index) before kopf cancels it; without a backoff kopf cancels at once.
        cancellation_backoff=30.0,
        cancellation_timeout=10.0,
    )
    async def catalog_source(name: str, body: kopf.Body, stopped: kopf.DaemonStopped, **_: Any) -> None:
        loop = SourceLoop(name=name, runtime=runtime)
        await loop.run(body, stopped)
        if stopped.reason is not None and stopped.reason & kopf.DaemonStoppingReason.RESOURCE_DELETED:
            await loop.forget()


def _trigger_fingerprint(body: Mapping[str, Any]) -> tuple[Any, ...]:
    meta = body.get("metadata", {})
    return (meta.get("generation"), tuple(sorted((meta.get("annotations") or {}).items())))


@dataclasses.dataclass
class SourceLoop:
    name: str
    runtime: CatalogRuntime
    failures: int = 0
    retry_not_before: datetime.datetime | None = None
    _reported_waiting_for: int | None = None

    async def run(self, body: kopf.Body, stopped: kopf.DaemonStopped) -> None:
        while not stopped:
            try:
                await self._step(body, stopped)
            except Exception:
                # The loop must outlive a slow or failing API server: a dead daemon would miss the
                # source's deletion (and leave its index behind) until kopf respawned it.
                self.failures += 1
                delay = backoff(
                    self.failures,
                    base=datetime.timedelta(seconds=self.runtime.settings.catalog_retry_base_seconds),
                    cap=datetime.timedelta(seconds=self.runtime.settings.catalog_retry_cap_seconds),
                )
                log.exception(
                    "reconciling the catalog source failed; retrying",
                    extra={"source": self.name, "retry_in_seconds": delay.total_seconds()},
                )
                await stopped.wait(delay.total_seconds())

    async def _step(self, body: kopf.Body, stopped: kopf.DaemonStopped) -> None:
        decision = decide(observe(body, retry_not_before=self.retry_not_before), now=utcnow())
        if decision.action is Action.WAIT_FOR_OPT_IN:
            await self._report_waiting(body)
            await self._wait(body, stopped, until=None)
        elif decision.action is Action.SLEEP:
            await self._wait(body, stopped, until=decision.wake_at)
        else:
            await self._index(body, stopped, decision)

    async def forget(self) -> None:
        try:
            removed = await asyncio.to_thread(self.runtime.store.delete_prefix, source_prefix(self.name))
        except ObjectStoreError as error:
            log.error(
                "catalog source deleted, but its index could not be removed; delete it from the bucket",
                extra={"source": self.name, "prefix": source_prefix(self.name), "error": str(error)},
            )
            return
        self.runtime.metrics.forget_source(self.name)
        log.info("catalog source deleted, its index removed", extra={"source": self.name, "objects": removed})

    async def _wait(
        self, body: kopf.Body, stopped: kopf.DaemonStopped, *, until: datetime.datetime | None
    ) -> None:
        seen = _trigger_fingerprint(body)
        while not stopped and _trigger_fingerprint(body) == seen:
            if until is not None and utcnow() >= until:
                return
            await stopped.wait(POLL_SECONDS)

    async def _report_waiting(self, body: kopf.Body) -> None:
        generation = int(body["metadata"].get("generation") or 0)
        if self._reported_waiting_for == generation:
            return
        writer = _SourceStatusWriter.for_body(self.runtime.api, body)
        message = "add the annotation ai.deckhouse.io/catalog-sync=Enabled to start indexing"
        served = bool((body.get("status") or {}).get("servedGeneration"))
        conditions = {INDEXING: (False, Reason.WAITING_FOR_OPT_IN, message)}
        if not served:
            conditions[READY] = (False, Reason.WAITING_FOR_OPT_IN, message)
        await asyncio.to_thread(writer.update, now=utcnow(), conditions=conditions)
        self._reported_waiting_for = generation

    async def _index(self, body: kopf.Body, stopped: kopf.DaemonStopped, decision: Decision) -> None:
        runtime = self.runtime
        generation = int(body["metadata"].get("generation") or 0)
        resume = checkpoint_of(body) if decision.action is Action.RESUME else None
        writer = _SourceStatusWriter.for_body(runtime.api, body)
        status = body.get("status") or {}
        served = status.get("servedGeneration")
        started = utcnow()
        fields: dict[str, Any] = {"observedGeneration": generation, "lastSyncStartTime": timestamp(started)}
        if resume is None:
            fields["resume"] = None  # a fresh pass never continues an older checkpoint
        what = f"resuming at {resume.processed_models} models" if resume else f"started ({decision.trigger})"
        conditions = {INDEXING: (True, Reason.INDEXING, f"indexing {what}")}
        if not served:
            conditions[READY] = (
                False,
                Reason.NOT_INDEXED_YET,
                f"the first indexing pass is running ({what})",
            )
        await asyncio.to_thread(writer.update, now=started, fields=fields, conditions=conditions)
        reason = Event.INDEXING_RESUMED if resume else Event.INDEXING_STARTED
        kopf.event(body, type="Normal", reason=reason, message=f"Indexing {what}")
        runtime.metrics.catalog_indexing.labels(self.name).set(1)
        log.info("indexing pass starts", extra={"source": self.name, "trigger": str(decision.trigger)})
        try:
            result = await self._run_pass(body, stopped, writer=writer, resume=resume, generation=generation)
        except (ProviderError, ObjectStoreError, TokenSecretMissing, InvalidSourceSpec) as error:
            await self._failed(body, writer, error=error, served=served)
            return
        finally:
            runtime.metrics.catalog_indexing.labels(self.name).set(0)
        if result is None:
            log.info("indexing pass stopped at its checkpoint", extra={"source": self.name})
            return
        await self._succeeded(body, writer, result)
        # The next decision reads the live object; until our status write arrives through the
        # watch it still shows the finished pass's checkpoint, which would look like a resume.
        await self._await_status(
            body,
            stopped,
            lambda status: status.get("servedGeneration") == result.generation and not status.get("resume"),
        )

    async def _await_status(
        self, body: kopf.Body, stopped: kopf.DaemonStopped, arrived: Callable[[Mapping[str, Any]], bool]
    ) -> None:
        deadline = utcnow() + STATUS_ECHO_TIMEOUT
        while not stopped and not arrived(body.get("status") or {}) and utcnow() < deadline:
            await stopped.wait(0.05)

    async def _run_pass(
        self,
        body: kopf.Body,
        stopped: kopf.DaemonStopped,
        *,
        writer: _SourceStatusWriter,
        resume: Checkpoint | None,
        generation: int,
    ) -> PassResult | None:
        runtime = self.runtime
        token = await asyncio.to_thread(source_token, self.runtime.api, self.runtime.settings.namespace, body)
        try:
            spec = SourceSpec.from_resource(
                dict(body), default_endpoint=runtime.settings.hf_endpoint, token=token
            )
        except ValueError as error:
            # An object older than a CRD rule (or written past it) gets the rule's answer here.
            raise InvalidSourceSpec(str(error)) from error

        def should_stop() -> bool:
            # A spec change or losing the lease ends the pass at its last checkpoint.
            return bool(stopped) or int(body["metadata"].get("generation") or 0) != generation

        def index() -> PassResult | None:
            with runtime.hub_for(spec) as hub:
                return run_pass(
                    spec=spec,
                    hub=hub,
                    store=runtime.store,
                    resume=resume,
                    on_checkpoint=lambda checkpoint: writer.checkpoint(checkpoint, now=utcnow()),
                    clock=utcnow,
                    should_stop=should_stop,
                )

        return await asyncio.to_thread(index)

    async def _succeeded(self, body: kopf.Body, writer: _SourceStatusWriter, result: PassResult) -> None:
        now = utcnow()
        self.failures, self.retry_not_before = 0, None
        message = f"{result.models} models served from generation {result.generation}"
        await asyncio.to_thread(
            writer.update,
            now=now,
            fields={
                "resume": None,
                "servedGeneration": result.generation,
                "indexedModels": result.models,
                "lastSuccessfulSyncTime": timestamp(now),
            },
            conditions={
                READY: (True, Reason.CATALOG_SERVED, message),
                INDEXING: (False, Reason.SUCCEEDED, f"the last pass indexed {result.models} models"),
            },
        )
        kopf.event(body, type="Normal", reason=Event.INDEXING_SUCCEEDED, message=message)
        metrics = self.runtime.metrics
        metrics.catalog_indexed_models.labels(self.name).set(result.models)
        metrics.catalog_last_success.labels(self.name).set(now.timestamp())
        metrics.catalog_sync_failing.labels(self.name).set(0)
        log.info("indexing pass completed", extra={"source": self.name, "models": result.models})

    async def _failed(
        self, body: kopf.Body, writer: _SourceStatusWriter, *, error: Exception, served: str | None
    ) -> None:
        settings = self.runtime.settings
        now = utcnow()
        self.failures += 1
        if isinstance(error, ProviderRateLimited):
            delay = datetime.timedelta(seconds=error.retry_after)
        else:
            delay = backoff(
                self.failures,
                base=datetime.timedelta(seconds=settings.catalog_retry_base_seconds),
                cap=datetime.timedelta(seconds=settings.catalog_retry_cap_seconds),
            )
        self.retry_not_before = now + delay
        reason = _failure_reason(error)
        message = f"{error}; retrying at {timestamp(self.retry_not_before)}"
        conditions = {INDEXING: (False, reason, message)}
        fields: dict[str, Any] = {}
        if isinstance(error, (ProviderRequestRejected, ProviderInvalidResponse)):
            # The provider refuses the checkpointed cursor itself; resuming would fail forever.
            fields["resume"] = None
        if served:
            conditions[READY] = (
                True,
                Reason.CATALOG_SERVED,
                f"serving generation {served}; the last pass failed: {reason}",
            )
        else:
            conditions[READY] = (False, reason, message)
        await asyncio.to_thread(writer.update, now=now, fields=fields, conditions=conditions)
        kopf.event(body, type="Warning", reason=Event.INDEXING_FAILED, message=message)
        metrics = self.runtime.metrics
        metrics.catalog_sync_failures.labels(self.name, reason).inc()
        metrics.catalog_sync_failing.labels(self.name).set(1)
        log.warning(
            "indexing pass failed", extra={"source": self.name, "reason": reason, "error": str(error)}
        )


DEFAULT_SYNC_INTERVAL = "24h"


def parse_time(value: object) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def observe(body: Mapping[str, Any], *, retry_not_before: datetime.datetime | None) -> SourceObservation:
    """What the schedule needs to know, from the live object."""
    meta = body.get("metadata", {})
    annotations = meta.get("annotations") or {}
    status = body.get("status") or {}
    spec = body.get("spec") or {}
    return SourceObservation(
        opted_in=annotations.get(CATALOG_SYNC_ANNOTATION) == CATALOG_SYNC_ENABLED,
        generation=int(meta.get("generation") or 0),
        observed_generation=status.get("observedGeneration"),
        sync_interval=parse_duration(spec.get("syncInterval") or DEFAULT_SYNC_INTERVAL),
        sync_requested_at=parse_time(annotations.get(CATALOG_SYNC_REQUESTED_AT_ANNOTATION)),
        last_sync_start=parse_time(status.get("lastSyncStartTime")),
        last_success=parse_time(status.get("lastSuccessfulSyncTime")),
        has_checkpoint=bool(status.get("resume")),
        retry_not_before=retry_not_before,
    )


def checkpoint_of(body: Mapping[str, Any]) -> Checkpoint | None:
    resume = (body.get("status") or {}).get("resume") or {}
    if not resume.get("generation"):
        return None
    return Checkpoint(
        generation=str(resume["generation"]),
        cursor=resume.get("cursor") or None,
        processed_models=int(resume.get("processedModels") or 0),
    )


def checkpoint_status(checkpoint: Checkpoint) -> dict[str, Any]:
    resume: dict[str, Any] = {
        "generation": checkpoint.generation,
        "processedModels": checkpoint.processed_models,
    }
    if checkpoint.cursor:
        resume["cursor"] = checkpoint.cursor
    return resume


@dataclasses.dataclass
class _SourceStatusWriter:
    """Patches `status` of one source. Thread-safe: the indexing thread writes checkpoints."""

    api: Any
    name: str
    generation: int
    conditions: list[dict[str, Any]]
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @classmethod
    def for_body(cls, api: Any, body: Mapping[str, Any]) -> _SourceStatusWriter:
        status = body.get("status") or {}
        return cls(
            api=api,
            name=body["metadata"]["name"],
            generation=int(body["metadata"].get("generation") or 0),
            conditions=[dict(item) for item in status.get("conditions") or []],
        )

    def update(
        self,
        *,
        now: datetime.datetime,
        fields: Mapping[str, Any] | None = None,
        conditions: Mapping[CatalogConditionType, tuple[bool, str, str]] | None = None,
    ) -> None:
        """Merge `fields` into status and set `conditions` ({type: (status, reason, message)})."""
        with self._lock:
            for type_, (state, reason, message) in (conditions or {}).items():
                self.conditions = set_condition(
                    self.conditions,
                    type_=type_,
                    status=state,
                    reason=reason,
                    message=message,
                    observed_generation=self.generation,
                    now=now,
                )
            status: dict[str, Any] = {**(fields or {}), "conditions": self.conditions}
            k8s.CustomObjectsApi(self.api).patch_cluster_custom_object_status(
                API_GROUP, API_VERSION, Plural.MODEL_CATALOG_SOURCES, self.name, {"status": status}
            )

    def checkpoint(self, checkpoint: Checkpoint, *, now: datetime.datetime) -> None:
        self.update(
            now=now,
            fields={"resume": checkpoint_status(checkpoint)},
            conditions={
                CatalogConditionType.INDEXING: (
                    True,
                    Reason.INDEXING,
                    f"{checkpoint.processed_models} models indexed into generation {checkpoint.generation}",
                )
            },
        )
