"""One small step per action of `domain.models.decision`: each does the I/O of its action and
returns when to look at the object again. `run` picks the step for an action."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ai_models.controller.models.steps.context import StepContext, Subject
from ai_models.controller.models.steps.damage import republish_damaged
from ai_models.controller.models.steps.deletion import delete
from ai_models.controller.models.steps.failure import fail, note_bad_retry_request, retry_publication
from ai_models.controller.models.steps.finalizer import add_finalizer
from ai_models.controller.models.steps.finish import finish
from ai_models.controller.models.steps.start import start
from ai_models.controller.models.steps.upload import await_upload, reject_upload
from ai_models.controller.models.steps.waiting import show_pending, show_publishing, wait_for_slot
from ai_models.domain.models import decision as actions

Step = Callable[..., float | None]

STEPS: dict[type[Any], Step] = {
    actions.AddFinalizer: add_finalizer,
    actions.Delete: delete,
    actions.ShowPublishing: show_publishing,
    actions.StartPublication: start,
    actions.WaitForSlot: wait_for_slot,
    actions.ShowPending: show_pending,
    actions.AwaitUpload: await_upload,
    actions.Finish: finish,
    actions.RetryPublication: retry_publication,
    actions.Fail: fail,
    actions.RejectUpload: reject_upload,
    actions.RePublishDamaged: republish_damaged,
    actions.NoteBadRetryRequest: note_bad_retry_request,
}


def run(action: actions.Action, *, ctx: StepContext, subject: Subject) -> float | None:
    """Do what `action` says; Wait and RetryAfter do nothing but come back at their time."""
    if isinstance(action, (actions.Wait, actions.RetryAfter)):
        return action.requeue
    if isinstance(action, actions.PlanPublication):
        raise TypeError(f"{subject.key}: PlanPublication is decided on after planning, never run")
    return STEPS[type(action)](action, ctx=ctx, subject=subject)
