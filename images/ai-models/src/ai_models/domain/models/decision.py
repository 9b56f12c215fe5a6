"""What one reconcile of a Model or ClusterModel does next: a pure decision from what it observed.

The reconciler reads the object, its publication Job (and, when the Job ended, its outcome or
manifest), the objects a failure depends on and the publication slots, and hands the observation
to `decide`; when the answer is `PlanPublication`, it plans and hands the outcome to
`decide_after_plan`. Each answer is one small action with the time to look again. The rules:

- A deleted object is cleaned up while it carries the finalizer; an object without it gets it.
- A Ready object whose artifact the inventory found damaged (a missing manifest, a changed file)
  is published again.
- A running Job is followed; a finished one is finished (manifest -> ledger -> Ready) or counted
  as a failed attempt: a temporary failure is tried again at once while fewer than
  `MAX_ATTEMPTS` attempts failed, then the object is Failed (an upload whose payload cannot be
  published asks for a new upload instead).
- The attempt count and the last failure time live in the status (`failedAttempts`,
  `lastFailureTime`), so a restarted controller or a new leader continues them; a new
  generation starts afresh.
- A Failed object is tried again `retry_seconds` after its last failure, at once when
  `ai.deckhouse.io/retry-requested-at` is newer than that failure or when the object the failure
  depends on (its `authSecretRef` Secret, its ModelCatalogSource) changed since; a Secret is
  re-read every `secret_recheck_seconds`, as the controller may not watch Secrets. A request
  annotation that is not a timestamp is reported in the message, never ignored silently.
  `UnsupportedSource` is final: `spec.source` is immutable.
- A plan starts a publication when a slot is free (`maxConcurrentPublications`), else waits.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Mapping
from typing import Any, Final

from ai_models.domain.conditions import parse_timestamp
from ai_models.domain.models.plan import AwaitingUpload, Deferred, Outcome, Plan, Refused
from ai_models.domain.models.source import catalog_source_of
from ai_models.domain.models.status import FAILURE_REASONS, FINAL_REASONS
from ai_models.domain.publication.outcome import PublicationOutcome
from ai_models.names import (
    RETRY_REQUESTED_AT_ANNOTATION,
    ModelKind,
    ModelPhase,
    ModelReason,
)

__all__ = ["MAX_ATTEMPTS", "catalog_source_of"]

# A publication that failed for a reason the publisher calls temporary is retried this many times
# (each a new Job) before the object is marked Failed.
MAX_ATTEMPTS: Final = 3
# How often a Failed object that depends on a Secret reads that Secret again (the controller may
# `get` Secrets, not watch them).
SECRET_RECHECK_SECONDS: Final = 5.0
# A Job that is being deleted is looked at again this soon: a new one starts once it is gone.
JOB_GONE_SECONDS: Final = 1.0
# The object store did not answer while a finished Job's manifest was read.
STORE_RETRY_SECONDS: Final = 10.0
# A temporary failure's next attempt starts after this (the failed Job is being removed).
NEXT_ATTEMPT_SECONDS: Final = 1.0
RETRY_REQUEST_EXAMPLE: Final = "2026-01-02T15:04:05Z"


# ----- observation ---------------------------------------------------------------------------------


class JobPhase(enum.StrEnum):
    NONE = "None"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    GOING_AWAY = "GoingAway"  # deleted, not gone yet


class ManifestRead(enum.StrEnum):
    READABLE = "Readable"
    MISSING = "Missing"  # absent or unreadable: the Job did not leave a usable artifact
    UNAVAILABLE = "Unavailable"  # the object store did not answer


@dataclasses.dataclass(frozen=True)
class JobSeen:
    phase: JobPhase = JobPhase.NONE
    digest: str = ""
    uid: str = ""
    outcome: PublicationOutcome | None = None  # of a Failed Job; None: the Pod left no result
    manifest: ManifestRead | None = None  # of a Succeeded Job
    manifest_problem: str = ""


class DependencyKind(enum.StrEnum):
    SECRET = "Secret"
    MODEL_CATALOG_SOURCE = "ModelCatalogSource"


@dataclasses.dataclass(frozen=True)
class Dependency:
    """An object a failure may depend on, as read: `resource_version` "" when it did not exist."""

    kind: DependencyKind
    name: str
    resource_version: str

    def to_status(self) -> dict[str, str]:
        return {"kind": self.kind.value, "name": self.name, "resourceVersion": self.resource_version}

    @classmethod
    def from_status(cls, value: object) -> Dependency | None:
        if not isinstance(value, Mapping):
            return None
        try:
            kind = DependencyKind(str(value.get("kind")))
        except ValueError:
            return None
        return cls(kind, str(value.get("name") or ""), str(value.get("resourceVersion") or ""))


@dataclasses.dataclass(frozen=True)
class RetryRequest:
    """`ai.deckhouse.io/retry-requested-at`: absent, a timestamp, or a value that is not one."""

    at: datetime.datetime | None = None
    invalid: str | None = None


def retry_request_of(annotations: Mapping[str, Any] | None) -> RetryRequest:
    value = (annotations or {}).get(RETRY_REQUESTED_AT_ANNOTATION)
    if value is None or value == "":
        return RetryRequest()
    at = parse_timestamp(value)
    return RetryRequest(at=at) if at is not None else RetryRequest(invalid=str(value))


def bad_retry_request_note(value: str) -> str:
    return (
        f"the annotation {RETRY_REQUESTED_AT_ANNOTATION}={value!r} is not an RFC 3339 timestamp and "
        f"requests nothing; set it to the current time, such as {RETRY_REQUEST_EXAMPLE}, to retry now"
    )


@dataclasses.dataclass(frozen=True)
class Policy:
    retry_seconds: float
    upload_token_ttl: datetime.timedelta
    upload_poll_seconds: float
    max_attempts: int = MAX_ATTEMPTS
    secret_recheck_seconds: float = SECRET_RECHECK_SECONDS


@dataclasses.dataclass(frozen=True)
class ModelObservation:
    kind: ModelKind
    generation: int
    observed_generation: int | None = None
    phase: ModelPhase | None = None
    artifact_reason: str | None = None  # reason of the ArtifactResolved condition
    artifact_message: str = ""
    ready_since: datetime.datetime | None = None  # lastTransitionTime of the Ready condition
    has_finalizer: bool = True
    deleting: bool = False
    upload_source: bool = False
    failed_attempts: int = 0
    last_failure: datetime.datetime | None = None
    last_failure_dependency: Dependency | None = None  # as read when the last failure happened
    dependency: Dependency | None = None  # the same object as read now
    retry_request: RetryRequest = RetryRequest()
    upload_expires_at: datetime.datetime | None = None
    damage: str | None = None  # what the inventory found wrong with the published artifact
    job: JobSeen = JobSeen()
    running_publications: int = 0
    max_publications: int = 1

    @property
    def new_generation(self) -> bool:
        return self.observed_generation is not None and self.observed_generation != self.generation

    @property
    def attempts(self) -> int:
        """Failed attempts that count: none of an earlier generation's."""
        return 0 if self.new_generation else self.failed_attempts


# ----- actions -------------------------------------------------------------------------------------
# `requeue`: seconds until the object is looked at again (None: on its next event).


@dataclasses.dataclass(frozen=True)
class AddFinalizer:
    requeue: float | None = None  # the finalizer's own update event brings the object back


@dataclasses.dataclass(frozen=True)
class Delete:
    requeue: float | None = None


@dataclasses.dataclass(frozen=True)
class Wait:
    requeue: float | None = None


@dataclasses.dataclass(frozen=True)
class ShowPublishing:
    requeue: float | None = None


class Trigger(enum.StrEnum):
    FIRST = "First"
    RETRY_TIMER = "RetryTimer"
    RETRY_REQUESTED = "RetryRequested"
    DEPENDENCY_CHANGED = "DependencyChanged"
    NEW_GENERATION = "NewGeneration"


@dataclasses.dataclass(frozen=True)
class PlanPublication:
    trigger: Trigger = Trigger.FIRST
    damaged: bool = False
    requeue: float | None = None


@dataclasses.dataclass(frozen=True)
class StartPublication:
    plan: Plan
    damaged: bool = False
    reset_failures: bool = False
    requeue: float | None = None


@dataclasses.dataclass(frozen=True)
class WaitForSlot:
    running: int
    limit: int
    requeue: float | None = None  # a freed slot wakes the object

    @property
    def message(self) -> str:
        return f"waiting for a publication slot: {self.running} of {self.limit} running"


@dataclasses.dataclass(frozen=True)
class ShowPending:
    message: str
    requeue: float | None


@dataclasses.dataclass(frozen=True)
class AwaitUpload:
    """Issue a fresh upload URL (the first one, or one close to its expiry)."""

    requeue: float | None


@dataclasses.dataclass(frozen=True)
class Finish:
    digest: str
    requeue: float | None = None


@dataclasses.dataclass(frozen=True)
class RetryPublication:
    """A temporary failure: count the attempt, remove the Job; the next reconcile starts a new one."""

    attempt: int
    of: int
    detail: str
    digest: str
    damaged: bool = False
    requeue: float | None = NEXT_ATTEMPT_SECONDS


@dataclasses.dataclass(frozen=True)
class Fail:
    reason: ModelReason
    message: str
    attempts: int  # failedAttempts to record
    dependency: Dependency | None = None
    digest: str = ""  # a partial artifact of a failed Job to remove
    job_ended: bool = False  # a failed Job to remove (and count as a finished publication)
    requeue: float | None = None


@dataclasses.dataclass(frozen=True)
class RejectUpload:
    detail: str
    digest: str
    requeue: float | None = None
    reason: ModelReason = ModelReason.PUBLICATION_FAILED


@dataclasses.dataclass(frozen=True)
class RePublishDamaged:
    detail: str
    requeue: float | None = None


@dataclasses.dataclass(frozen=True)
class RetryAfter:
    """A Failed object waits for its retry timer (or a Secret re-check)."""

    requeue: float | None


@dataclasses.dataclass(frozen=True)
class NoteBadRetryRequest:
    """Show the Failed status again with a note about the malformed request annotation."""

    reason: ModelReason
    message: str
    value: str
    requeue: float | None


Action = (
    AddFinalizer
    | Delete
    | Wait
    | ShowPublishing
    | PlanPublication
    | StartPublication
    | WaitForSlot
    | ShowPending
    | AwaitUpload
    | Finish
    | RetryPublication
    | Fail
    | RejectUpload
    | RePublishDamaged
    | RetryAfter
    | NoteBadRetryRequest
)


# ----- decisions -----------------------------------------------------------------------------------


def decide(seen: ModelObservation, *, policy: Policy, now: datetime.datetime) -> Action:
    if seen.deleting:
        return Delete() if seen.has_finalizer else Wait()
    if not seen.has_finalizer:
        return AddFinalizer()
    if seen.damage is not None and seen.phase is ModelPhase.READY and seen.job.phase is JobPhase.NONE:
        return RePublishDamaged(seen.damage)
    job = seen.job
    if job.phase is JobPhase.GOING_AWAY:
        return Wait(JOB_GONE_SECONDS)
    if job.phase is JobPhase.RUNNING:
        return Wait() if seen.phase is ModelPhase.PUBLISHING else ShowPublishing()
    if job.phase is JobPhase.SUCCEEDED:
        if job.manifest is ManifestRead.READABLE:
            return Finish(job.digest)
        if job.manifest is ManifestRead.UNAVAILABLE:
            return Wait(STORE_RETRY_SECONDS)
        left = PublicationOutcome(
            ModelReason.PUBLICATION_FAILED,
            f"the publication Job succeeded but left no readable manifest ({job.manifest_problem})",
            retryable=True,
        )
        return _job_failed(seen, left, policy=policy)
    if job.phase is JobPhase.FAILED:
        return _job_failed(seen, job.outcome, policy=policy)
    if seen.phase is ModelPhase.READY:
        return Wait()
    if seen.phase is ModelPhase.FAILED:
        return _failed(seen, policy=policy, now=now)
    damaged = seen.artifact_reason == ModelReason.ARTIFACT_DAMAGED
    trigger = Trigger.NEW_GENERATION if seen.new_generation else Trigger.FIRST
    return PlanPublication(trigger=trigger, damaged=damaged)


def decide_after_plan(
    seen: ModelObservation, outcome: Outcome, *, step: PlanPublication, policy: Policy, now: datetime.datetime
) -> Action:
    if isinstance(outcome, AwaitingUpload):
        return _await_upload(seen, policy=policy, now=now)
    if isinstance(outcome, Refused):
        return Fail(
            outcome.reason,
            _noted(seen, outcome.message),
            attempts=seen.attempts,
            dependency=seen.dependency,
            requeue=_failed_requeue(seen, policy=policy, wait=policy.retry_seconds),
        )
    if isinstance(outcome, Deferred):
        return ShowPending(outcome.message, outcome.retry_seconds)
    if seen.running_publications >= seen.max_publications:
        return WaitForSlot(seen.running_publications, seen.max_publications)
    return StartPublication(
        outcome,
        damaged=step.damaged,
        reset_failures=seen.new_generation or step.trigger is Trigger.NEW_GENERATION,
    )


def _job_failed(seen: ModelObservation, outcome: PublicationOutcome | None, *, policy: Policy) -> Action:
    attempts = seen.attempts + 1
    digest = seen.job.digest
    detail = outcome.message if outcome is not None else "the publication Pod ended without a result"
    if (outcome is None or outcome.retryable) and attempts < policy.max_attempts:
        damaged = outcome is not None and outcome.reason is ModelReason.ARTIFACT_DAMAGED
        return RetryPublication(attempts, policy.max_attempts, detail, digest, damaged=damaged)
    reason = ModelReason.PUBLICATION_FAILED
    if outcome is not None and outcome.reason in FAILURE_REASONS:
        reason = outcome.reason
    if seen.upload_source:
        return RejectUpload(detail, digest, requeue=policy.upload_poll_seconds, reason=reason)
    return Fail(
        reason,
        _noted(seen, detail),
        attempts=attempts,
        dependency=seen.dependency,
        digest=digest,
        job_ended=True,
        requeue=_failed_requeue(seen, policy=policy, wait=policy.retry_seconds),
    )


def _failed(seen: ModelObservation, *, policy: Policy, now: datetime.datetime) -> Action:
    if seen.artifact_reason in FINAL_REASONS:
        return Wait()
    if seen.new_generation:
        return PlanPublication(Trigger.NEW_GENERATION)
    since = seen.last_failure or seen.ready_since
    request = seen.retry_request
    if request.at is not None and (since is None or request.at > since):
        return PlanPublication(Trigger.RETRY_REQUESTED)
    if seen.dependency is not None and seen.dependency != seen.last_failure_dependency:
        return PlanPublication(Trigger.DEPENDENCY_CHANGED)
    if since is None:
        return PlanPublication(Trigger.RETRY_TIMER)
    due = since + datetime.timedelta(seconds=policy.retry_seconds)
    if now >= due:
        return PlanPublication(Trigger.RETRY_TIMER)
    requeue = _failed_requeue(seen, policy=policy, wait=(due - now).total_seconds())
    if request.invalid is not None:
        note = bad_retry_request_note(request.invalid)
        if note not in seen.artifact_message:
            reason = _failure_reason(seen.artifact_reason)
            return NoteBadRetryRequest(reason, f"{seen.artifact_message}; {note}", request.invalid, requeue)
    return RetryAfter(requeue)


def _await_upload(seen: ModelObservation, *, policy: Policy, now: datetime.datetime) -> Action:
    """Keep the URL while it has more than a sixth of its life left, else issue a new one."""
    expires = seen.upload_expires_at
    if (
        seen.phase is ModelPhase.WAIT_FOR_UPLOAD
        and expires is not None
        and expires - now > policy.upload_token_ttl / 6
    ):
        return Wait(policy.upload_poll_seconds)
    return AwaitUpload(policy.upload_poll_seconds)


def _failed_requeue(seen: ModelObservation, *, policy: Policy, wait: float) -> float:
    if seen.dependency is not None and seen.dependency.kind is DependencyKind.SECRET:
        return min(wait, policy.secret_recheck_seconds)
    return wait


def _noted(seen: ModelObservation, message: str) -> str:
    if seen.retry_request.invalid is None:
        return message
    return f"{message}; {bad_retry_request_note(seen.retry_request.invalid)}"


def _failure_reason(reason: str | None) -> ModelReason:
    try:
        parsed = ModelReason(reason or "")
    except ValueError:
        return ModelReason.PUBLICATION_FAILED
    return parsed if parsed in FAILURE_REASONS else ModelReason.PUBLICATION_FAILED
