"""The models a workload names, as a delivery reads them: each named Model or ClusterModel as
observed, and the artifacts of those that are Ready."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ai_models.domain.delivery.contract import DeliveryRequest
from ai_models.domain.delivery.template import CachedModel, DeliveredModel
from ai_models.domain.models.reference import ModelKey
from ai_models.names import ModelPhase


@dataclasses.dataclass(frozen=True)
class ModelSeen:
    """A named Model or ClusterModel as read: `phase` None when it does not exist."""

    key: ModelKey
    phase: ModelPhase | None
    digest: str = ""
    size_bytes: int | None = None

    @classmethod
    def of(cls, key: ModelKey, obj: Mapping[str, Any] | None) -> ModelSeen:
        """The object as the API server returned it (None: it does not exist); a phase this version
        does not know counts as Pending, a malformed status as an empty one. The delivery controller,
        the admission webhook and the node plugin's authorization all read a Model this way."""
        if obj is None:
            return cls(key, None)
        status = obj.get("status")
        status = status if isinstance(status, Mapping) else {}
        phase_text = str(status.get("phase") or ModelPhase.PENDING.value)
        phase = ModelPhase(phase_text) if phase_text in tuple(ModelPhase) else ModelPhase.PENDING
        artifact = status.get("artifact")
        artifact = artifact if isinstance(artifact, Mapping) else {}
        digest, size = artifact.get("digest"), artifact.get("sizeBytes")
        return cls(
            key,
            phase,
            digest=digest if isinstance(digest, str) else "",
            size_bytes=size if isinstance(size, int) and not isinstance(size, bool) else None,
        )


@dataclasses.dataclass(frozen=True)
class ResolvedModel:
    """A requested model that is Ready, with the artifact it delivers."""

    key: ModelKey
    digest: str
    size_bytes: int

    @property
    def delivered(self) -> DeliveredModel:
        return DeliveredModel(self.key.name, self.digest)

    @property
    def cached(self) -> CachedModel:
        return CachedModel(self.key, self.digest)


def resolved_models(
    request: DeliveryRequest, models: Mapping[ModelKey, ModelSeen]
) -> tuple[ResolvedModel, ...] | None:
    """Every requested model with its artifact, or None while one of them is not deliverable."""
    found = []
    for key in request.keys:
        seen = models.get(key)
        if seen is None or seen.phase is not ModelPhase.READY or not seen.digest or seen.size_bytes is None:
            return None
        found.append(ResolvedModel(key, seen.digest, seen.size_bytes))
    return tuple(found)


def not_ready(request: DeliveryRequest, models: Mapping[ModelKey, ModelSeen]) -> str:
    """Why the request's models cannot be delivered yet, one part per model that is not."""
    parts = []
    for model in request.models:
        seen = models.get(model.key)
        what = model.key.describe()
        if seen is None or seen.phase is None:
            parts.append(f"{what} does not exist: create it, or correct the annotation {model.annotation}")
        elif seen.phase is not ModelPhase.READY:
            parts.append(f"{what} is {seen.phase}, not Ready: delivery continues once it is Ready")
        elif not seen.digest or seen.size_bytes is None:
            parts.append(
                f"{what} is Ready but its status.artifact has no digest or sizeBytes: delivery continues "
                "once the controller records them"
            )
    return "; ".join(parts)


def described(resolved: Sequence[ResolvedModel]) -> str:
    return ", ".join(item.key.describe() for item in resolved)
