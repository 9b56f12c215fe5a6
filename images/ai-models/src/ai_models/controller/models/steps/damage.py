"""RePublishDamaged: the inventory found a Ready object's artifact damaged (a file changed, the
manifest missing): remove what is left of it and show Publishing; the next reconcile plans and
publishes it again from its source."""

from __future__ import annotations

from ai_models.controller.models.steps.artifacts import remove_partial
from ai_models.controller.models.steps.context import StepContext, Subject
from ai_models.controller.models.steps.status import show
from ai_models.domain.models import status as situations
from ai_models.domain.models.decision import RePublishDamaged
from ai_models.names import ModelEvent


def republish_damaged(action: RePublishDamaged, *, ctx: StepContext, subject: Subject) -> float | None:
    digest = ((subject.obj.get("status") or {}).get("artifact") or {}).get("digest")
    if digest:
        remove_partial(ctx, subject, str(digest))
    message = f"the published artifact is damaged ({action.detail}); re-publishing it"
    show(ctx, subject, situations.publishing(message, damaged=True), extra={"progress": None})
    ctx.objects.event(subject.obj, type_="Warning", reason=ModelEvent.ARTIFACT_DAMAGED, message=message)
    return action.requeue
