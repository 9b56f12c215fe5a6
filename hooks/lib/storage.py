"""Snapshots of StorageClasses and shared claims as the evaluator's facts.

The jqFilters below produce what the controller reads through the API
(`ai_models.controller.prerequisites`): a class's name, binding mode and default annotations, and a
shared claim cut down to a claim object with only the fields the controller's rule reads
(`domain.delivery.read_write_many.claim_facts`, which counts only claims `claims.made_by_module`):
namespace, name, uid, the shared-claim, module and owner-UID labels, its ownerReferences' uids,
deletionTimestamp, class and phase. The snapshot stays small and changes only when one of those does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ai_models.domain.delivery import read_write_many
from ai_models.domain.storage.prerequisites import IMMEDIATE, SharedClaimFacts, StorageClassFacts
from ai_models.names import MODULE_LABEL, OWNER_UID_LABEL, SHARED_PVC_LABEL

STORAGE_CLASS_JQ = (
    "{name: .metadata.name,"
    ' volumeBindingMode: (.volumeBindingMode // "Immediate"),'
    " isDefault: ((.metadata.annotations // {}) as $a"
    ' | ($a["storageclass.kubernetes.io/is-default-class"] == "true"'
    ' or $a["storageclass.beta.kubernetes.io/is-default-class"] == "true"))}'
)

# The labels `claims.made_by_module` reads; any other label would only grow the snapshot.
CLAIM_RULE_LABELS = (SHARED_PVC_LABEL, MODULE_LABEL, OWNER_UID_LABEL)
_KEEP_LABEL = " or ".join(f".key == {json.dumps(key)}" for key in CLAIM_RULE_LABELS)
SHARED_CLAIM_JQ = (
    "{metadata: {namespace: .metadata.namespace, name: .metadata.name, uid: .metadata.uid,"
    f" labels: ((.metadata.labels // {{}}) | with_entries(select({_KEEP_LABEL}))),"
    " ownerReferences: [.metadata.ownerReferences[]? | {uid}],"
    " deletionTimestamp: .metadata.deletionTimestamp},"
    " spec: {storageClassName: .spec.storageClassName}, status: {phase: .status.phase}}"
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


def shared_claim_facts(results: Sequence[Mapping[str, Any]]) -> tuple[SharedClaimFacts, ...]:
    """The claims the module made as facts, by the controller's rule (`read_write_many.claim_facts`);
    any other labelled claim is no fact. No Events: a hook cannot watch them cheaply, so
    `access_mode_refusal` stays None and a Pending claim never refutes ReadWriteMany here."""
    facts = (read_write_many.claim_facts(item) for item in results)
    return tuple(fact for fact in facts if fact is not None)
