"""A delivery mode in the controller process, chosen once at wiring (`wiring.delivery_mode`).

On the leader (`DeliveryStrategy`): what it follows beyond the workloads and the shared claims,
what it reads of a workload besides its models (its `facts`, from caches), its pure rules
(`domain.delivery.verdict.ModeRules`) and the handlers of the effects only it asks for. In the
webhook (`AdmissionStrategy`): the same rules, and its facts by direct reads. `shared_pvc` and
`node_cache` implement both; another mode is one more module and one more branch in the wiring.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.informer import Informer
from ai_models.controller.delivery.keys import WorkloadKey
from ai_models.controller.runtime import Manager
from ai_models.domain.delivery.contract import DeliveryRequest
from ai_models.domain.delivery.verdict import DeliveryObservation, ModeRules
from ai_models.domain.models.reference import ModelKey

if TYPE_CHECKING:
    from ai_models.controller.delivery.steps.context import StepContext


class Unreadable(Exception):
    """A read the webhook needed did not answer; the template is gated instead."""

    @classmethod
    def of(cls, what: str, error: KubeError) -> Unreadable:
        """The read of `what` failed with `error`: its status, or what kept the answer away."""
        why = f"the API server answered {error.status}" if error.status else error.message or "no answer"
        return cls(f"{what}: {why}")


@dataclasses.dataclass(frozen=True)
class Subject:
    """One workload as a pass saw it."""

    key: WorkloadKey
    obj: dict[str, Any]
    seen: DeliveryObservation[Any]
    # The shared claims whose ownerReferences name the workload's uid (the claims informer's index).
    owned_claims: tuple[Mapping[str, Any], ...] = ()

    @property
    def log(self) -> dict[str, str]:
        return {"workload": str(self.key)}


@dataclasses.dataclass(frozen=True)
class Step:
    """What a step's handler says: `again`, seconds until the workload is looked at again (None:
    no sooner than the verdict says); `stop`, the pass ends here (a refused object: the report
    says why already)."""

    again: float | None = None
    stop: bool = False


DONE = Step()

# A handler of one effect type: the effect, the steps' collaborators and the workload in, what next out.
Handler = Callable[[Any, "StepContext", Subject], Step]


class Triggers(Protocol):
    """What a mode's informers wake: workloads by key, by the reason of their report, by a claim."""

    def enqueue(self, key: WorkloadKey) -> None: ...

    def enqueue_reporting(self, reason: str) -> None: ...

    def enqueue_owners_of_claims_on(self, volume: str) -> None: ...

    def watch(
        self, informer: Informer, keys_of: Callable[[Mapping[str, Any]], list[WorkloadKey]]
    ) -> None: ...


class DeliveryStrategy(Protocol):
    @property
    def rules(self) -> ModeRules[Any]:
        """The mode's pure rules."""

    def attach(self, manager: Manager, triggers: Triggers) -> None:
        """Add the mode's own informers to the leader's manager, with what their changes wake."""

    def informers(self) -> list[Informer]:
        """The mode's own informers."""

    def facts(self, key: WorkloadKey, request: DeliveryRequest | None, models: Mapping[ModelKey, Any]) -> Any:
        """The leader's facts of a workload, from its caches; `models` as `ModelSeen` by key."""

    def handlers(self) -> Mapping[type[Any], Handler]:
        """The handlers of the effects only this mode asks for."""

    def forget(self, key: WorkloadKey) -> None:
        """The workload's pass begins, or it is gone: drop what the mode remembers of it."""


class AdmissionStrategy(Protocol):
    """A delivery mode in the admission webhook, on every replica: its rules and what it reads of
    a workload besides its models, directly (a standby replica runs no informers)."""

    @property
    def rules(self) -> ModeRules[Any]:
        """The mode's pure rules."""

    def facts(self, namespace: str, request: DeliveryRequest | None, models: Mapping[ModelKey, Any]) -> Any:
        """The webhook's facts (`request` None: the workload names no model); `Unreadable` when a
        read does not answer."""
