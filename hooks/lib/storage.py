"""Snapshots of StorageClasses and shared claims as the evaluator's facts.

The jqFilters below produce what the controller reads through the API
(`ai_models.controller.prerequisites`): a class's name, binding mode and default annotations, and a
shared claim's namespace, name, class and phase.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ai_models.domain.storage.prerequisites import (
    IMMEDIATE,
    ClaimPhase,
    SharedClaimFacts,
    StorageClassFacts,
)

STORAGE_CLASS_JQ = (
    "{name: .metadata.name,"
    ' volumeBindingMode: (.volumeBindingMode // "Immediate"),'
    " isDefault: ((.metadata.annotations // {}) as $a"
    ' | ($a["storageclass.kubernetes.io/is-default-class"] == "true"'
    ' or $a["storageclass.beta.kubernetes.io/is-default-class"] == "true"))}'
)

SHARED_CLAIM_JQ = (
    "{namespace: .metadata.namespace, name: .metadata.name,"
    " storageClassName: .spec.storageClassName, phase: .status.phase}"
)


def storage_class_facts(results: Sequence[Mapping[str, Any]]) -> tuple[StorageClassFacts, ...]:
    return tuple(
        StorageClassFacts(
            name=str(item["name"]),
            volume_binding_mode=str(item.get("volumeBindingMode") or IMMEDIATE),
            is_default=item.get("isDefault") is True,
        )
        for item in results
        if item.get("name")
    )


def _phase(text: Any) -> ClaimPhase:
    known = {phase.value: phase for phase in ClaimPhase}
    return known.get(str(text), ClaimPhase.PENDING) if text else ClaimPhase.PENDING


def shared_claim_facts(results: Sequence[Mapping[str, Any]]) -> tuple[SharedClaimFacts, ...]:
    """Claims as facts; `access_mode_refusal` stays None: a hook cannot watch Events cheaply."""
    return tuple(
        SharedClaimFacts(
            namespace=str(item["namespace"]),
            name=str(item["name"]),
            storage_class=item.get("storageClassName") or None,
            phase=_phase(item.get("phase")),
        )
        for item in results
        if item.get("namespace") and item.get("name")
    )
