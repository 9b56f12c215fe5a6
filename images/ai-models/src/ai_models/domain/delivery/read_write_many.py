"""A shared claim as the storage-prerequisites verdict counts it (docs/internal/ARCHITECTURE.md §7):
the first claim that binds confirms ReadWriteMany for its class, one its provisioner refuses for the
access mode turns the verdict false with the provisioner's words.

Only claims the module made count (`claims.made_by_module`): anyone may label a claim
`ai.deckhouse.io/shared-pvc=true`, and a claim of someone else's, bound or refused, says nothing
about what the module's claims get. A Pending claim's refusal is the latest Warning
ProvisioningFailed Event about its uid (`claim_facts.provisioning_failure`, the rule of the delivery
report), and counts only when it names the access mode (`prerequisites.names_access_mode`, with the
class, claim and namespace names masked): a quota or a provisioner that is down is not a verdict on
ReadWriteMany.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ai_models.domain.delivery.claim_facts import provisioning_failure
from ai_models.domain.delivery.claims import SharedClaim, made_by_module
from ai_models.domain.storage.prerequisites import ClaimPhase, SharedClaimFacts, names_access_mode


def claim_phase(claim: Mapping[str, Any]) -> ClaimPhase:
    text = str((claim.get("status") or {}).get("phase") or "")
    return ClaimPhase(text) if text in tuple(ClaimPhase) else ClaimPhase.PENDING


def needs_events(claim: Mapping[str, Any]) -> bool:
    """Whether the verdict reads the claim's Events: a Pending claim the module made."""
    return made_by_module(SharedClaim.of(claim)) and claim_phase(claim) is ClaimPhase.PENDING


def access_mode_refusal(claim: Mapping[str, Any], events: Iterable[Mapping[str, Any]]) -> str | None:
    """The provisioner's latest refusal of the claim, when it is about the access mode."""
    meta = claim.get("metadata") or {}
    message = provisioning_failure(events, claim_uid=str(meta.get("uid") or ""))
    if not message:
        return None
    masked = (
        str((claim.get("spec") or {}).get("storageClassName") or ""),
        str(meta.get("name") or ""),
        str(meta.get("namespace") or ""),
    )
    return message if names_access_mode(message, masked=masked) else None


def claim_facts(
    claim: Mapping[str, Any], events: Iterable[Mapping[str, Any]] = ()
) -> SharedClaimFacts | None:
    """The claim as a fact of the verdict, None for a claim the module did not make. `events`: those
    listed for the claim (only a Pending claim's are read)."""
    shared = SharedClaim.of(claim)
    if not made_by_module(shared):
        return None
    phase = claim_phase(claim)
    return SharedClaimFacts(
        namespace=shared.namespace,
        name=shared.name,
        storage_class=(claim.get("spec") or {}).get("storageClassName") or None,
        phase=phase,
        access_mode_refusal=access_mode_refusal(claim, events) if phase is ClaimPhase.PENDING else None,
    )
