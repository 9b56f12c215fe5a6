"""AwaitUpload and RejectUpload: an upload source waits for its payload behind a signed,
time-bounded URL; a payload that cannot be published is dropped and a new upload asked for."""

from __future__ import annotations

from typing import Any

from ai_models.controller.models.steps.artifacts import remove_partial, remove_upload
from ai_models.controller.models.steps.context import StepContext, Subject
from ai_models.controller.models.steps.failure import end_job
from ai_models.controller.models.steps.status import no_failures, release_reservation, show
from ai_models.domain.conditions import timestamp
from ai_models.domain.models import status as situations
from ai_models.domain.models.decision import AwaitUpload, RejectUpload
from ai_models.domain.publication.upload_token import issue
from ai_models.names import UPLOADS_PATH, ModelEvent, ModelPhase, SourceType


def await_upload(
    action: AwaitUpload,
    *,
    ctx: StepContext,
    subject: Subject,
    note: str | None = None,
    fresh_start: bool = False,
) -> float | None:
    """Issue a new upload URL (the first one, one close to its expiry, or after a rejection)."""
    settings = ctx.settings
    expires_at = ctx.clock() + settings.upload_token_ttl
    token = issue(subject.owner, expires_at=expires_at, key=ctx.upload_keys.key())
    urls: dict[str, Any] = {
        "expiresAt": timestamp(expires_at),
        "inCluster": f"{settings.upload_in_cluster_url.rstrip('/')}{UPLOADS_PATH}{token}",
    }
    if settings.upload_public_url:
        urls["external"] = f"{settings.upload_public_url.rstrip('/')}{UPLOADS_PATH}{token}"
    message = (
        f"waiting for the model file: PUT it to the URL in status.upload before {urls['expiresAt']}, "
        "with the bearer token of a subject allowed to update this object (a newer URL replaces it)"
    )
    if note is not None:
        message = f"{note}; {message}"
    first = (subject.obj.get("status") or {}).get("phase") != ModelPhase.WAIT_FOR_UPLOAD
    extra: dict[str, Any] = {"upload": urls, "source": {"resolvedType": SourceType.UPLOAD.value}}
    if fresh_start:
        extra |= no_failures()
    show(ctx, subject, situations.waiting_for_upload(message), extra=extra)
    if first:
        ctx.objects.event(subject.obj, type_="Normal", reason=ModelEvent.UPLOAD_WAITING, message=message)
    return action.requeue


def reject_upload(action: RejectUpload, *, ctx: StepContext, subject: Subject) -> float | None:
    """Publishing the same payload again would fail the same way, and the object cannot be given
    another one while it shows Failed; a fresh URL lets the user try another file."""
    remove_partial(ctx, subject, action.digest)
    end_job(ctx, subject)
    ctx.notify.published("failed")
    remove_upload(ctx, subject)
    release_reservation(ctx, subject)
    # One level: the reason, then the cause as the publisher gave it, then what to do. The cause
    # was once wrapped in parentheses inside parentheses, which read as a stack trace.
    message = (
        f"the uploaded file could not be published ({action.reason}): {action.detail}; "
        "upload a model file again"
    )
    ctx.objects.event(subject.obj, type_="Warning", reason=ModelEvent.PUBLICATION_FAILED, message=message)
    # A new payload is a new start: the attempts of the rejected one do not count against it.
    return await_upload(AwaitUpload(action.requeue), ctx=ctx, subject=subject, note=message, fresh_start=True)
