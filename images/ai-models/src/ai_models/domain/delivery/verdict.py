"""One verdict per look at a workload, in any delivery mode, for the controller and the webhook.

`decide` holds the rules every mode shares, in order; a mode (`modes/`) adds its own through
`ModeRules`, chosen once at wiring:

- The module's own namespace is ignored. Without the annotations, everything the module added to
  the template and the report go (`template.strip`), and the claims the workload owns are taken
  back after a grace period (`ReleaseClaims`, D100).
- A broken request is `InvalidSpec`; then the mode may decide before any model is read
  (`ModeRules.before_models`: a template that contradicts the mode); a model that is missing or
  not Ready is `ModelNotReady`; otherwise the mode delivers (`ModeRules.deliver`).

A verdict is the report, the effects in their safe order (`effects`), when to look again, the
complete pod template once the models are known (`complete`) and what the admission webhook tells
the user (`warning`). The controller runs its effects; the webhook turns the same verdict into the
template it admits (`admitted`) and its warning, so both answer the same question the same way.

A stopped or blocked delivery never takes anything away: the template keeps what it mounts (pods
that run keep running), no claim is deleted here (only `ReleaseClaims` in a steady state), and
fixing the cause returns to `Delivered` with no change to the workload.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping
from typing import Any, Final, Generic, Protocol, TypeVar

from ai_models.domain.delivery.contract import DeliveryRequest, InvalidSpec, Workload, ignored
from ai_models.domain.delivery.effects import (
    DeleteStaleReplicaSets,
    Effect,
    ReleaseClaims,
    UngatePods,
    WriteReport,
    WriteTemplate,
)
from ai_models.domain.delivery.report import REPORT_ANNOTATIONS, DeliveryReport
from ai_models.domain.delivery.template import Template, applied, gate, gated, strip
from ai_models.domain.delivery.workload_models import ModelSeen, ResolvedModel, not_ready, resolved_models
from ai_models.domain.models.reference import ModelKey
from ai_models.names import DELIVERY_REASON_ANNOTATION, DELIVERY_SCHEDULING_GATE, DeliveryReason

# The rule of a workload whose annotations are gone.
ANNOTATIONS_REMOVED: Final = "annotations_removed"

Facts = TypeVar("Facts")
Effect_ = TypeVar("Effect_", bound=Effect)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeliveryObservation(Generic[Facts]):
    """One workload as read: what every mode reads, and `facts`, what its mode reads besides
    (`modes.shared_pvc.ClaimFacts`, `placement.NodeCacheSeen`). `owns_claims`: some shared claim
    names the workload's uid as its owner."""

    workload: Workload
    annotations: Mapping[str, Any]  # of the workload object: the report it carries
    template: Mapping[str, Any]  # the pod template as it is
    request: DeliveryRequest | InvalidSpec | None
    models: Mapping[ModelKey, ModelSeen] = dataclasses.field(default_factory=dict)
    facts: Facts
    owns_claims: bool = False


@dataclasses.dataclass(frozen=True)
class Verdict:
    """`rule` names the rule that decided (logged); `report` None removes the report; `requeue`
    is seconds until the workload is looked at again (None: on its next event); `complete` the pod
    template that delivers the models once they are, when it is known; `warning` what admission
    says while the pods wait."""

    rule: str
    report: DeliveryReport | None
    effects: tuple[Effect, ...]
    requeue: float | None = None
    complete: Template | None = None
    warning: str = ""

    def effect(self, kind: type[Effect_]) -> Effect_ | None:
        """The verdict's effect of this type, None when it has none."""
        return next((item for item in self.effects if isinstance(item, kind)), None)

    @property
    def template(self) -> Template | None:
        """The template the verdict writes, None when it leaves it as it is."""
        written = self.effect(WriteTemplate)
        return written.template if written is not None else None

    @property
    def delivered(self) -> bool:
        return self.report is not None and self.report.reason is DeliveryReason.DELIVERED


class ModeRules(Protocol[Facts]):
    """What one delivery mode decides, pure: `before_models` what it refuses before any model is
    read (None: nothing), `deliver` the rest once every model is Ready; `admission_facts` leaves out
    of its facts what admission does not judge."""

    def admission_facts(self, facts: Facts) -> Facts: ...

    def before_models(self, seen: DeliveryObservation[Facts], request: DeliveryRequest) -> Verdict | None: ...

    def deliver(
        self,
        seen: DeliveryObservation[Facts],
        request: DeliveryRequest,
        resolved: tuple[ResolvedModel, ...],
        *,
        now: datetime.datetime,
    ) -> Verdict: ...


def decide(
    seen: DeliveryObservation[Facts], rules: ModeRules[Facts], *, now: datetime.datetime
) -> Verdict | None:
    """The verdict on one workload; None when there is nothing to do for it at all.

    For the controller the workload is as stored (with its uid, which a claim's owner needs); the
    admission webhook decides on the object before it has one, and takes `admitted` of it."""
    if ignored(seen.workload.namespace):
        return None
    request = seen.request
    if request is None:
        return _annotations_removed(seen)
    if isinstance(request, InvalidSpec):
        return conclude(
            seen,
            "invalid_spec",
            DeliveryReport(DeliveryReason.INVALID_SPEC, request.message),
            warning=problem_warning(request.message),
        )
    before = rules.before_models(seen, request)
    if before is not None:
        return before
    resolved = resolved_models(request, seen.models)
    if resolved is None:
        return conclude(
            seen,
            "model_not_ready",
            DeliveryReport(DeliveryReason.MODEL_NOT_READY, not_ready(request, seen.models)),
            warning=waiting_warning("a model it names is not Ready"),
        )
    return rules.deliver(seen, request, resolved, now=now)


def needs_models(seen: DeliveryObservation[Facts], rules: ModeRules[Facts]) -> bool:
    """Whether the verdict on `seen` depends on the named models: not for a workload that names
    none, a broken request, or one the mode refuses before any model is read."""
    request = seen.request
    return (
        not ignored(seen.workload.namespace)
        and isinstance(request, DeliveryRequest)
        and rules.before_models(seen, request) is None
    )


def _annotations_removed(seen: DeliveryObservation[Any]) -> Verdict | None:
    """Take back what the module added: the template's part and the report at once, the claims
    after their grace (not in the pass that rewrites the template: its Pods are not made yet)."""
    current = dict(seen.template)
    stripped = strip(current)
    leftovers = stripped != current
    reported = any(name in seen.annotations for name in REPORT_ANNOTATIONS)
    if not leftovers and not reported and not seen.owns_claims:
        return None
    return conclude(
        seen,
        ANNOTATIONS_REMOVED,
        None,
        template=stripped if leftovers else None,
        ungate=leftovers or reported,
        release=True,
    )


def conclude(
    seen: DeliveryObservation[Any],
    rule: str,
    report: DeliveryReport | None,
    *,
    before: Iterable[Effect] = (),
    template: Template | None = None,
    ungate: bool = False,
    release: bool = False,
    wanted_claim: str | None = None,
    requeue: float | None = None,
    complete: Template | None = None,
    warning: str = "",
) -> Verdict:
    """A verdict with its effects in the safe order: the mode's own (`before`: claims, Jobs), the
    template (when it differs), the Pods' gates, the report; and in a steady state that did not
    write the template, a delivered Deployment's stale ReplicaSets and (`release`) the claims the
    workload no longer uses, all but `wanted_claim`."""
    written = template if template is not None and template != dict(seen.template) else None
    effects: list[Effect] = list(before)
    if written is not None:
        effects.append(WriteTemplate(written))
    if ungate:
        mounted = applied(written if written is not None else seen.template)
        effects.append(UngatePods(mounted if seen.request is not None else None))
    effects.append(WriteReport(report))
    delivered = report is not None and report.reason is DeliveryReason.DELIVERED
    if written is None and delivered:
        effects.append(DeleteStaleReplicaSets())
    if written is None and release:
        effects.append(ReleaseClaims(wanted_claim))
    return Verdict(rule, report, tuple(effects), requeue=requeue, complete=complete, warning=warning)


def unless_kept(current: Mapping[str, Any], wanted: Template) -> Template | None:
    """`wanted`, unless the current template is it already, or it with the gate: a complete
    template that keeps the gate is left as it is (its Pods are ungated instead, so a Deployment
    admitted complete keeps one ReplicaSet)."""
    return None if dict(current) in (wanted, gate(wanted)) else wanted


# ----- admission -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Admitted:
    """The webhook's answer: the pod template to admit (None: as it is) and the warnings."""

    template: Template | None
    warnings: tuple[str, ...] = ()


def admit(seen: DeliveryObservation[Facts], rules: ModeRules[Facts], *, now: datetime.datetime) -> Admitted:
    """The admission of a workload (CREATE or UPDATE): the verdict on it as admission sees it."""
    verdict = decide(dataclasses.replace(seen, facts=rules.admission_facts(seen.facts)), rules, now=now)
    template = admitted(verdict, seen.template)
    return Admitted(template, admission_warnings(verdict, template))


def admitted(verdict: Verdict | None, current: Mapping[str, Any]) -> Template | None:
    """The pod template a workload is admitted with (CREATE or UPDATE); None leaves it as it is.

    Without the annotations the module's part is stripped. A delivered verdict gets the complete
    template (one that keeps the gate stays as it is: no rollout for a label change). Otherwise the
    pods wait: a template that mounts what the module added is kept (a blocked delivery keeps what
    its pods use), any other is gated, complete when the verdict knows it already (so such a
    Deployment keeps one ReplicaSet once the controller ungates its pods)."""
    if verdict is None:
        return None
    template = dict(current)
    if verdict.report is None:
        return verdict.template
    if verdict.delivered and verdict.complete is not None:
        wanted = template if template == gate(verdict.complete) else verdict.complete
    elif applied(template) is not None:
        wanted = template
    else:
        wanted = gate(verdict.complete if verdict.complete is not None else template)
    return None if wanted == template else wanted


def held(current: Mapping[str, Any]) -> Template | None:
    """What admission writes when it could not read what the workload names: its pods wait (a
    template that mounts the module's part is kept); None leaves the template as it is."""
    template = dict(current)
    wanted = template if applied(template) is not None else gate(template)
    return None if wanted == template else wanted


def admission_warnings(
    verdict: Verdict | None, admitted_template: Mapping[str, Any] | None
) -> tuple[str, ...]:
    """What `kubectl` prints: the verdict's warning when the pods are admitted gated."""
    if verdict is None or not verdict.warning or admitted_template is None or not gated(admitted_template):
        return ()
    return (verdict.warning,)


def problem_warning(message: str) -> str:
    return f"ai-models: {message}"


def waiting_warning(why: str) -> str:
    return (
        f"ai-models: the pods wait (scheduling gate {DELIVERY_SCHEDULING_GATE}) because {why}; they start "
        f"once the models are delivered. The annotation {DELIVERY_REASON_ANNOTATION} on the workload says "
        "how delivery is going"
    )
