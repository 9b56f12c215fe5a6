"""Delete: stop the publication, remove the artifact and the upload, free the ledger entries, then
let the object go (remove the finalizer). Retried until the object store and the ledger answer."""

from __future__ import annotations

import logging

from ai_models.adapters.kube.ledger_store import LedgerStoreError
from ai_models.adapters.objectstore import ObjectStoreError
from ai_models.controller.models.jobs import job_name
from ai_models.controller.models.steps.context import StepContext, Subject
from ai_models.controller.models.steps.status import show
from ai_models.domain.artifacts.layout import owner_prefix, upload_prefix
from ai_models.domain.models import status as situations
from ai_models.domain.models.decision import Delete
from ai_models.names import ModelEvent, ModelPhase

log = logging.getLogger(__name__)
STORE_RETRY_SECONDS = 10.0
LEDGER_RETRY_SECONDS = 5.0


def delete(action: Delete, *, ctx: StepContext, subject: Subject) -> float | None:
    if subject.seen.phase is not ModelPhase.DELETING:
        show(ctx, subject, situations.deleting("removing the artifact and its storage accounting"))
    ctx.jobs.delete(subject.owner)
    ctx.slots.release(job_name(subject.owner))
    try:
        ctx.store.delete_prefix(owner_prefix(subject.owner))
        ctx.store.delete_prefix(upload_prefix(subject.owner))
    except ObjectStoreError as error:
        message = f"cannot remove the artifact yet: {error}; retrying until the object store answers"
        ctx.objects.event(subject.obj, type_="Warning", reason=ModelEvent.CLEANUP_FAILED, message=message)
        log.warning("artifact cleanup failed; retrying", extra={**subject.log, "error": str(error)})
        return STORE_RETRY_SECONDS
    try:
        ctx.accounting.release(subject.owner)
    except LedgerStoreError as error:
        log.warning("cannot release the ledger entries yet", extra={**subject.log, "error": str(error)})
        return LEDGER_RETRY_SECONDS
    ctx.objects.remove_finalizer(subject.obj)
    ctx.notify.got_slot(subject.key)  # nothing of a deleted object waits for a slot any more
    return action.requeue
