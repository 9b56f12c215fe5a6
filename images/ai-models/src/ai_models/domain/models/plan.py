"""What planning a publication can come to (pure data): a plan, a refusal, a deferral, or an upload
still awaited. The controller's planner produces them; the decision reads them."""

from __future__ import annotations

import dataclasses

from ai_models.domain.publication.request import PublicationSource
from ai_models.names import ModelReason, SourceType


@dataclasses.dataclass(frozen=True)
class Plan:
    resolved_type: SourceType
    revision: str | None
    digest: str
    size_bytes: int
    source: PublicationSource  # what the publish Job fetches (its request's source part)
    token: str | None = dataclasses.field(default=None, repr=False)


@dataclasses.dataclass(frozen=True)
class Refused:
    """The source cannot be published; `reason` is a Model failure reason."""

    reason: ModelReason
    message: str


@dataclasses.dataclass(frozen=True)
class Deferred:
    """Not now (the provider is unavailable or rate-limits us); look again later."""

    message: str
    retry_seconds: float


@dataclasses.dataclass(frozen=True)
class AwaitingUpload:
    pass


Outcome = Plan | Refused | Deferred | AwaitingUpload
