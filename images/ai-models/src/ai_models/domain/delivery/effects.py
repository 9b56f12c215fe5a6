"""What a delivery verdict asks the controller to do: one typed effect per kind of I/O.

A verdict lists its effects in the order that keeps every intermediate state safe: the claim and
its Job first, then the template that mounts the claim, then the Pods' gates, and the report (it
says what was done); the stale ReplicaSets of a delivered Deployment and the claims a steady
workload no longer uses go after it. The controller's step runner
(`controller/delivery/steps/__init__.py`) does them in that order, one handler per type.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ai_models.domain.delivery.report import DeliveryReport
from ai_models.domain.delivery.template import Applied, Template
from ai_models.domain.delivery.workload_models import ResolvedModel


@dataclasses.dataclass(frozen=True)
class WaitForSlot:
    """The workload waits for a materialization slot: wake it when one is freed."""


@dataclasses.dataclass(frozen=True)
class CreateClaim:
    manifest: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class PatchClaim:
    """A merge patch of the observed claim's metadata (the materialized digests, an adopted owner)."""

    patch: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class RemoveJob:
    """Delete the observed materialize Job: a failed one before its successor, or one whose copy
    the claim records (its Pods and Secrets go with it)."""

    finished: bool  # False: failed and about to be tried again


@dataclasses.dataclass(frozen=True)
class StartMaterialization:
    claim: str
    models: tuple[ResolvedModel, ...]


@dataclasses.dataclass(frozen=True)
class WriteTemplate:
    """Replace the pod template whole (it differs from the current one)."""

    template: Template


@dataclasses.dataclass(frozen=True)
class UngatePods:
    """Take the delivery gate off the workload's Pods; with `delivers`, only off those that get
    what the record names (a Pod of an older template would start without its models)."""

    delivers: Applied | None


@dataclasses.dataclass(frozen=True)
class WriteReport:
    """The report annotations (None removes them) and, when they change, an Event."""

    report: DeliveryReport | None


@dataclasses.dataclass(frozen=True)
class DeleteStaleReplicaSets:
    """A delivered Deployment's ReplicaSets of earlier templates, once the current one is available."""


@dataclasses.dataclass(frozen=True)
class ReleaseClaims:
    """Mark, unmark or delete the shared claims the workload owns but no longer uses (D100);
    `wanted` is the one it delivers from, None when it wants none."""

    wanted: str | None


Effect = (
    WaitForSlot
    | CreateClaim
    | PatchClaim
    | RemoveJob
    | StartMaterialization
    | WriteTemplate
    | UngatePods
    | WriteReport
    | DeleteStaleReplicaSets
    | ReleaseClaims
)
