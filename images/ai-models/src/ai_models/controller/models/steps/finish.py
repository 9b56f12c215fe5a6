"""Finish: a Job succeeded and left its manifest: commit the artifact to the ledger, remove what it
supersedes, show Ready (the failure record goes), and remove the Job."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ai_models.adapters.kube.ledger_store import LedgerStoreError
from ai_models.controller.models.steps.artifacts import remove_other_artifacts
from ai_models.controller.models.steps.context import StepContext, Subject
from ai_models.controller.models.steps.failure import end_job
from ai_models.controller.models.steps.status import no_failures, show
from ai_models.domain.artifacts.layout import artifact_prefix, scope_of
from ai_models.domain.artifacts.manifest import ArtifactManifest
from ai_models.domain.artifacts.profile import missing_facts
from ai_models.domain.models import status as situations
from ai_models.domain.models.decision import Finish
from ai_models.domain.sizes import size_text
from ai_models.domain.text import counted
from ai_models.names import ModelEvent, SourceType

log = logging.getLogger(__name__)
LEDGER_RETRY_SECONDS = 5.0


def finish(action: Finish, *, ctx: StepContext, subject: Subject) -> float | None:
    manifest = subject.manifest
    if manifest is None:  # the observation read it; without it there is nothing to finish
        raise RuntimeError(f"{subject.key}: Finish without the manifest of {action.digest}")
    owner = subject.owner
    try:
        # The ledger counts every stored byte of the artifact, its manifest included, so an
        # inventory pass (which sums what the store lists) arrives at the same figure.
        ctx.accounting.commit(owner, scope_of(owner.kind), manifest.size_bytes + subject.manifest_bytes)
    except LedgerStoreError as error:
        log.warning(
            "cannot commit the artifact to the ledger yet", extra={**subject.log, "error": str(error)}
        )
        return LEDGER_RETRY_SECONDS
    remove_other_artifacts(ctx, subject, keep=action.digest)
    _ready(ctx, subject, manifest)
    end_job(ctx, subject)
    ctx.notify.published("succeeded")
    return action.requeue


def _ready(ctx: StepContext, subject: Subject, manifest: ArtifactManifest) -> None:
    resolved = dict(manifest.resolved)
    missing = missing_facts(resolved)
    complete = not missing
    message = (
        f"artifact {manifest.digest} published: {counted(len(manifest.files), 'file')}, "
        f"{counted(manifest.size_bytes, 'byte')}"
    )
    metadata_message = (
        "the profile has every fact inference runtimes size themselves by"
        if complete
        else f"the model files do not tell {', '.join(missing)} (absent from status.resolved); "
        "give the inference runtime these settings yourself"
    )
    source: dict[str, Any] = {"resolvedType": _resolved_type(subject.obj, manifest)}
    uri = f"{ctx.settings.store_url.rstrip('/')}/{artifact_prefix(subject.owner, manifest.digest)}"
    if manifest.source.revision:
        source["resolvedRevision"] = manifest.source.revision
    show(
        ctx,
        subject,
        situations.ready(message, metadata_complete=complete, metadata_message=metadata_message),
        extra={
            "progress": None,
            "upload": None,
            "source": source,
            "artifact": {
                "uri": uri,
                "digest": manifest.digest,
                "sizeBytes": manifest.size_bytes,
                "size": size_text(manifest.size_bytes),
            },
            "resolved": resolved,
            **no_failures(),
        },
    )
    ctx.objects.event(subject.obj, type_="Normal", reason=ModelEvent.PUBLICATION_SUCCEEDED, message=message)


def _resolved_type(obj: Mapping[str, Any], manifest: ArtifactManifest) -> str:
    if ((obj.get("spec") or {}).get("source") or {}).get("catalog") is not None:
        return SourceType.CATALOG.value
    return manifest.source.type.value
