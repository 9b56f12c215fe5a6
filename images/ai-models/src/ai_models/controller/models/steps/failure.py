"""Fail, RetryPublication and NoteBadRetryRequest: a failed attempt is recorded in the status
(`failedAttempts`, `lastFailureTime`, `lastFailureDependency`), where a restarted controller or a
new leader reads it back, and reported with a Warning Event."""

from __future__ import annotations

from ai_models.controller.models.jobs import job_name
from ai_models.controller.models.steps.artifacts import remove_partial
from ai_models.controller.models.steps.context import StepContext, Subject
from ai_models.controller.models.steps.status import failure_fields, release_reservation, show, write
from ai_models.domain.models import status as situations
from ai_models.domain.models.decision import (
    Fail,
    NoteBadRetryRequest,
    RetryPublication,
    bad_retry_request_note,
)
from ai_models.names import ModelEvent


def fail(action: Fail, *, ctx: StepContext, subject: Subject) -> float | None:
    remove_partial(ctx, subject, action.digest)
    release_reservation(ctx, subject)
    if action.job_ended:
        # Removed before the attempt is recorded: a recorded attempt never has its Job still there
        # to be counted again by the next reconcile or the next leader.
        end_job(ctx, subject)
        ctx.notify.published("failed")
    fields = failure_fields(attempts=action.attempts, at=ctx.clock(), dependency=action.dependency)
    situation = situations.failed(action.reason, action.message)
    if situations.shows(subject.obj.get("status"), situation):
        write(ctx, subject, fields)  # the same failure again: only the timer restarts
    else:
        show(ctx, subject, situation, extra={"progress": None, **fields})
        ctx.objects.event(
            subject.obj,
            type_="Warning",
            reason=ModelEvent.PUBLICATION_FAILED,
            message=f"{action.reason}: {action.message}",
        )
    return action.requeue


def retry_publication(action: RetryPublication, *, ctx: StepContext, subject: Subject) -> float | None:
    remove_partial(ctx, subject, action.digest)
    # Removed before the attempt is recorded, so a recorded attempt is never counted twice (a
    # controller that stops in between grants one attempt more, never one fewer).
    end_job(ctx, subject)
    event = ModelEvent.ARTIFACT_DAMAGED if action.damaged else ModelEvent.PUBLICATION_FAILED
    # The Event before the status: whoever sees the attempt counted finds its Event written too.
    ctx.objects.event(
        subject.obj,
        type_="Warning",
        reason=event,
        message=f"attempt {action.attempt} of {action.of} failed: {action.detail}; retrying",
    )
    write(
        ctx,
        subject,
        failure_fields(attempts=action.attempt, at=ctx.clock(), dependency=subject.seen.dependency),
    )
    return action.requeue


def note_bad_retry_request(
    action: NoteBadRetryRequest, *, ctx: StepContext, subject: Subject
) -> float | None:
    show(ctx, subject, situations.failed(action.reason, action.message))
    ctx.objects.event(
        subject.obj,
        type_="Warning",
        reason=ModelEvent.INVALID_RETRY_REQUEST,
        message=bad_retry_request_note(action.value),
    )
    return action.requeue


def end_job(ctx: StepContext, subject: Subject) -> None:
    """Remove the finished Job (and its token Secret): its slot is free for whoever waits."""
    ctx.jobs.delete(subject.owner)
    ctx.slots.release(job_name(subject.owner))
    if subject.seen.job.uid:
        ctx.slots.ended(subject.seen.job.uid)
    ctx.notify.slot_freed()
