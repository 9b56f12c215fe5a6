"""StartPublication: take a slot, build the Job, reserve the storage, create the Job (and the
Secret with the source token), and show Publishing. Whatever fails gives back what was taken."""

from __future__ import annotations

import logging
from typing import Any

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.ledger_store import LedgerStoreError
from ai_models.controller.jobs.templates import PodTemplateError
from ai_models.controller.models.jobs import (
    job_name,
    publication_env,
    publication_job,
    token_env,
    token_secret,
)
from ai_models.controller.models.steps.context import StepContext, Subject
from ai_models.controller.models.steps.failure import fail
from ai_models.controller.models.steps.status import no_failures, release_reservation, show
from ai_models.controller.models.steps.waiting import wait_for_slot
from ai_models.domain.artifacts.layout import scope_of
from ai_models.domain.models import status as situations
from ai_models.domain.models.decision import Fail, StartPublication, WaitForSlot
from ai_models.domain.models.plan import Plan
from ai_models.domain.storage.ledger import Refusal
from ai_models.names import (
    MODULE,
    PUBLISHER_TEMPLATE_CONFIGMAP,
    STORAGE_ACCOUNTING_SECRET,
    ModelEvent,
    ModelReason,
)

log = logging.getLogger(__name__)
TEMPORARY_RETRY_SECONDS = 10.0


def start(action: StartPublication, *, ctx: StepContext, subject: Subject) -> float | None:
    name = job_name(subject.owner)
    taken, running = ctx.slots.acquire(name)
    if not taken:  # another worker took the last slot since the observation
        return wait_for_slot(WaitForSlot(running, ctx.slots.limit), ctx=ctx, subject=subject)
    created: list[bool] = []
    try:
        return _start(action, action.plan, ctx=ctx, subject=subject, created=created)
    finally:
        if not created:  # the slot stays taken once the Job exists, whatever fails after
            ctx.slots.release(name)


def _start(
    action: StartPublication, plan: Plan, *, ctx: StepContext, subject: Subject, created: list[bool]
) -> float | None:
    owner = subject.owner
    # The one place the controller-to-Job contract is written (see jobs.publication_env).
    env = publication_env(owner, digest=plan.digest, source=plan.source)
    if plan.token is not None:
        env.append(token_env(owner))
    try:
        # Built before reserving: a Job that cannot be built must not leave a reservation.
        template = ctx.pod_template()
    except (PodTemplateError, RuntimeError) as error:
        log.error("cannot build the publication Job", extra={**subject.log, "error": str(error)})
        message = (
            f"the controller cannot read its publisher pod template (ConfigMap "
            f"{PUBLISHER_TEMPLATE_CONFIGMAP} in the module namespace); an administrator finds the cause "
            "in the controller's log"
        )
        return _fail(ctx, subject, ModelReason.PUBLICATION_FAILED, message)
    job = publication_job(
        template,
        owner=owner,
        namespace=ctx.settings.namespace,
        digest=plan.digest,
        env=env,
        limits=ctx.settings.limits,
    )
    secret = token_secret(owner, namespace=ctx.settings.namespace, token=plan.token) if plan.token else None
    try:
        refusal = ctx.accounting.reserve(owner, scope_of(owner.kind), plan.size_bytes)
    except LedgerStoreError as error:
        show(ctx, subject, situations.pending(f"cannot reserve storage yet: {error}"))
        return TEMPORARY_RETRY_SECONDS
    if refusal is not None:
        return _fail(ctx, subject, ModelReason(refusal.value), _refusal_message(refusal, plan))
    try:
        ctx.jobs.create(job, secret)
    except KubeError as error:
        return _not_started(ctx, subject, error)
    created.append(True)
    ctx.notify.got_slot(subject.key)
    what = f"{plan.resolved_type} source" + (f" at {plan.revision}" if plan.revision else "")
    message = f"publishing {plan.size_bytes} bytes from the {what} as {plan.digest}"
    if action.damaged:
        message = "re-publishing the damaged artifact: " + message
    extra: dict[str, Any] = {
        "progress": "0%",
        "source": {"resolvedType": plan.resolved_type.value}
        | ({"resolvedRevision": plan.revision} if plan.revision else {}),
        "upload": None,
    }
    if action.reset_failures:
        extra |= no_failures()
    show(ctx, subject, situations.publishing(message, damaged=action.damaged), extra=extra)
    ctx.objects.event(subject.obj, type_="Normal", reason=ModelEvent.PUBLICATION_STARTED, message=message)
    return action.requeue


def _fail(ctx: StepContext, subject: Subject, reason: ModelReason, message: str) -> float | None:
    seen = subject.seen
    return fail(
        Fail(
            reason,
            message,
            attempts=seen.attempts,
            dependency=seen.dependency,
            requeue=ctx.settings.retry_failed_seconds,
        ),
        ctx=ctx,
        subject=subject,
    )


def _not_started(ctx: StepContext, subject: Subject, error: KubeError) -> float | None:
    """The Job or its Secret could not be written: nothing runs, so nothing stays reserved."""
    try:
        ctx.jobs.delete(subject.owner)  # a Secret created before the Job was refused
    except KubeError as cleanup_error:
        log.warning(
            "cannot remove the publication objects; the next attempt replaces them",
            extra={**subject.log, "error": str(cleanup_error)},
        )
    log.warning("publication not started", extra={**subject.log, "error": str(error)})
    if error.temporary:
        release_reservation(ctx, subject)
        show(ctx, subject, situations.pending(f"{error}; retrying"))
        return TEMPORARY_RETRY_SECONDS
    if error.status == 403:
        fix = (
            "the controller's ServiceAccount may not do it or an admission policy denies it; check "
            f"the module's RBAC and the cluster's policies for namespace {error.namespace}"
        )
    else:
        fix = (
            "the API server or an admission webhook refuses the object; check the cluster's "
            "admission policies, or report it with the controller's log"
        )
    return _fail(ctx, subject, ModelReason.PUBLICATION_FAILED, f"{error}: {fix}")


def _refusal_message(refusal: Refusal, plan: Plan) -> str:
    if refusal is Refusal.STORAGE_USAGE_UNKNOWN:
        return (
            f"cannot reserve {plan.size_bytes} bytes: storage usage is unknown until the inventory pass "
            f"confirms the ledger (Secret {STORAGE_ACCOUNTING_SECRET}); publication resumes after it"
        )
    return (
        f"the artifact needs {plan.size_bytes} bytes, more than the free part of the storage budget "
        f"(setting artifacts.capacityLimit of ModuleConfig {MODULE}); delete unused models or raise "
        "the limit"
    )
