"""AddFinalizer: the object gets the finalizer that lets its artifact be cleaned up on deletion."""

from __future__ import annotations

from ai_models.controller.models.steps.context import StepContext, Subject
from ai_models.domain.models.decision import AddFinalizer


def add_finalizer(action: AddFinalizer, *, ctx: StepContext, subject: Subject) -> float | None:
    ctx.objects.add_finalizer(subject.obj)
    return action.requeue
