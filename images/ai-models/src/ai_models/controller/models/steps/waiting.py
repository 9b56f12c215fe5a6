"""WaitForSlot, ShowPending and ShowPublishing: the object waits, and its status says for what."""

from __future__ import annotations

from ai_models.controller.models.steps.context import StepContext, Subject
from ai_models.controller.models.steps.status import show
from ai_models.domain.models import status as situations
from ai_models.domain.models.decision import ShowPending, ShowPublishing, WaitForSlot


def wait_for_slot(action: WaitForSlot, *, ctx: StepContext, subject: Subject) -> float | None:
    ctx.notify.waiting_for_slot(subject.key)  # a freed slot wakes it
    situation = situations.pending(action.message)
    if not situations.shows(subject.obj.get("status"), situation):
        show(ctx, subject, situation)
    return action.requeue


def show_pending(action: ShowPending, *, ctx: StepContext, subject: Subject) -> float | None:
    situation = situations.pending(action.message)
    if not situations.shows(subject.obj.get("status"), situation):
        show(ctx, subject, situation)
    return action.requeue


def show_publishing(action: ShowPublishing, *, ctx: StepContext, subject: Subject) -> float | None:
    show(ctx, subject, situations.publishing("publishing"))
    return action.requeue
