"""Removing what a publication leaves behind in the object store; a failure is only logged, the
inventory pass removes what stays."""

from __future__ import annotations

import logging

from ai_models.adapters.objectstore import ObjectStoreError
from ai_models.controller.models.steps.context import StepContext, Subject
from ai_models.domain.artifacts.layout import artifact_prefix, manifest_key, owner_prefix, upload_prefix

log = logging.getLogger(__name__)


def remove_partial(ctx: StepContext, subject: Subject, digest: str) -> None:
    if not digest:
        return
    try:
        ctx.store.delete(manifest_key(subject.owner, digest))
        ctx.store.delete_prefix(artifact_prefix(subject.owner, digest))
    except (ObjectStoreError, ValueError) as error:
        log.warning(
            "cannot remove a partial artifact; the inventory pass will",
            extra={**subject.log, "error": str(error)},
        )


def remove_other_artifacts(ctx: StepContext, subject: Subject, *, keep: str) -> None:
    keep_prefix = artifact_prefix(subject.owner, keep)
    try:
        for prefix in ctx.store.list_prefixes(owner_prefix(subject.owner)):
            if prefix != keep_prefix:
                ctx.store.delete_prefix(prefix)
        ctx.store.delete_prefix(upload_prefix(subject.owner))
    except ObjectStoreError as error:
        log.warning(
            "cannot remove superseded artifacts; the inventory pass will",
            extra={**subject.log, "error": str(error)},
        )


def remove_upload(ctx: StepContext, subject: Subject) -> None:
    try:
        ctx.store.delete_prefix(upload_prefix(subject.owner))
    except ObjectStoreError as error:
        log.warning(
            "cannot remove the rejected upload; the inventory pass will",
            extra={**subject.log, "error": str(error)},
        )
