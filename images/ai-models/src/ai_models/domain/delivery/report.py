"""The delivery report on a workload: annotations `ai.deckhouse.io/model-delivery-reason` and
`ai.deckhouse.io/model-delivery-message`, and an Event with the same reason when it changes.

Reasons are the delivery vocabulary of docs/internal/ARCHITECTURE.md §4 (`names.DeliveryReason`); Model
conditions have their own (`names.ModelReason`). Every message says what happened to which object
and what to do. The one text taken from elsewhere is a provisioner's ProvisioningFailed message,
which the contract asks for verbatim: it is cut to `PROVISIONER_TEXT_MAX` characters and loses its
control characters, nothing else of a remote answer is ever reported.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Final

from ai_models.names import DELIVERY_MESSAGE_ANNOTATION, DELIVERY_REASON_ANNOTATION, DeliveryReason

# The message annotation is read by people (`kubectl describe`), not parsed: keep it short.
MESSAGE_MAX: Final = 1024
PROVISIONER_TEXT_MAX: Final = 512
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]+")

# Reasons of a delivery that works or is on its way; the others are Warnings.
NORMAL_REASONS: Final = frozenset(
    {
        DeliveryReason.DELIVERED,
        DeliveryReason.SHARED_PVC_CLAIM_PENDING,
        DeliveryReason.SHARED_PVC_MATERIALIZING,
    }
)


@dataclasses.dataclass(frozen=True)
class DeliveryReport:
    reason: DeliveryReason
    message: str

    @property
    def event_type(self) -> str:
        return "Normal" if self.reason in NORMAL_REASONS else "Warning"

    def annotations(self) -> dict[str, str]:
        return {
            DELIVERY_REASON_ANNOTATION: self.reason.value,
            DELIVERY_MESSAGE_ANNOTATION: clip(self.message),
        }


REPORT_ANNOTATIONS: Final = (DELIVERY_REASON_ANNOTATION, DELIVERY_MESSAGE_ANNOTATION)


def report_of(annotations: Mapping[str, Any] | None) -> DeliveryReport | None:
    """The report a workload carries now (None: none, or a reason not of the vocabulary)."""
    values = annotations or {}
    try:
        reason = DeliveryReason(str(values.get(DELIVERY_REASON_ANNOTATION)))
    except ValueError:
        return None
    return DeliveryReport(reason, str(values.get(DELIVERY_MESSAGE_ANNOTATION) or ""))


def changed(current: Mapping[str, Any] | None, wanted: DeliveryReport | None) -> bool:
    """Whether the workload's report annotations differ from `wanted` (None: no report at all)."""
    values = current or {}
    if wanted is None:
        return any(name in values for name in REPORT_ANNOTATIONS)
    return any(values.get(name) != value for name, value in wanted.annotations().items())


def clip(text: str, limit: int = MESSAGE_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def provisioner_text(text: str) -> str:
    """A provisioner's message as the report shows it: verbatim, one line, bounded."""
    return clip(_CONTROL.sub(" ", text).strip(), PROVISIONER_TEXT_MAX)
