"""Create the shared claim, or patch its metadata (the materialized digests, an adopted owner)."""

from __future__ import annotations

from typing import Any

from ai_models.controller.delivery.observe import Subject
from ai_models.controller.delivery.steps.context import StepContext


def create_claim(claim: dict[str, Any], *, ctx: StepContext, subject: Subject) -> None:
    ctx.objects.create_claim(claim)


def patch_claim(patch: dict[str, Any], *, ctx: StepContext, subject: Subject) -> None:
    claim = subject.seen.claim
    if claim is None:
        raise ValueError(f"{subject.key}: a claim patch without an observed claim")
    ctx.objects.patch_claim(subject.seen.workload.namespace, claim.name, patch)
