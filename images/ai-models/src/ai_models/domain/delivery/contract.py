"""What a workload asks for: the consumer contract on the top-level object (docs/internal/ARCHITECTURE.md §4).

`ai.deckhouse.io/model: a[,b]` names Models of the workload's namespace,
`ai.deckhouse.io/clustermodel: c[,d]` ClusterModels; each appears read-only at
`/data/modelcache/models/<name>`. A Deployment, StatefulSet or DaemonSet keeps its pod template at
`spec.template`, a CronJob at `spec.jobTemplate.spec.template`.

A request is refused as a whole (`InvalidSpec`) when one reference is bad: an empty name, a name
that is not a DNS-1123 subdomain, a name given twice (also once as a Model and once as a
ClusterModel: both would appear at the same path), or a pod template that already uses what the
module would add (a volume or volumeMount at the models directory or under it, a volume named like
one of the module's in either mode, the variables `AI_MODELS_MODELS_DIR` / `AI_MODELS_MODELS`).
What the module itself added to the template earlier is not the user's and does not count.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from ai_models.domain.delivery.template import CONTAINER_LISTS, NODE_CACHE_VOLUME_NAME, strip
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    CLUSTER_MODEL_ANNOTATION,
    MODEL_ANNOTATION,
    MODELS_DIR,
    MODELS_DIR_VARIABLE,
    MODELS_VARIABLE,
    MODULE_NAMESPACE,
    NODE_CACHE_VOLUME_PREFIX,
    SHARED_PVC_VOLUME,
    ModelKind,
)

# What Kubernetes accepts as an object name (a DNS-1123 subdomain), and so as a Model's.
# Used with fullmatch: `$` would accept a trailing "\n".
_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SUBDOMAIN_MAX: Final = 253
EXAMPLE: Final = "qwen3-8b,llama-3-1-8b"


def is_object_name(value: str) -> bool:
    """Whether `value` can name a Model or ClusterModel (a DNS-1123 subdomain)."""
    return len(value) <= _SUBDOMAIN_MAX and _SUBDOMAIN.fullmatch(value) is not None


class WorkloadKind(enum.StrEnum):
    DEPLOYMENT = "Deployment"
    STATEFUL_SET = "StatefulSet"
    DAEMON_SET = "DaemonSet"
    CRON_JOB = "CronJob"

    @property
    def api_version(self) -> str:
        return "batch/v1" if self is WorkloadKind.CRON_JOB else "apps/v1"

    @property
    def template_path(self) -> tuple[str, ...]:
        """Where the pod template sits in the object."""
        if self is WorkloadKind.CRON_JOB:
            return ("spec", "jobTemplate", "spec", "template")
        return ("spec", "template")

    @property
    def template_pointer(self) -> str:
        """The same path as an RFC 6901 JSON pointer (the webhook's patch paths start with it)."""
        return "".join(f"/{part}" for part in self.template_path)


# The annotation that names each kind of model.
ANNOTATIONS: Final[Mapping[ModelKind, str]] = {
    ModelKind.MODEL: MODEL_ANNOTATION,
    ModelKind.CLUSTER_MODEL: CLUSTER_MODEL_ANNOTATION,
}


@dataclasses.dataclass(frozen=True, order=True)
class Workload:
    """One incarnation of a top-level workload; `uid` is "" before the API server assigns one (a
    mutating webhook sees a new object without it)."""

    kind: WorkloadKind
    namespace: str
    name: str
    uid: str = ""

    def describe(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def workload_of(obj: Mapping[str, Any]) -> Workload:
    meta = obj.get("metadata") or {}
    return Workload(
        WorkloadKind(str(obj.get("kind"))),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
    )


def pod_template(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod template of a workload ({} when the object has none yet)."""
    node: Any = obj
    for part in WorkloadKind(str(obj.get("kind"))).template_path:
        node = node.get(part) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


@dataclasses.dataclass(frozen=True, order=True)
class RequestedModel:
    key: ModelKey

    @property
    def name(self) -> str:
        """The directory under the models directory: the model's own name."""
        return self.key.name

    @property
    def annotation(self) -> str:
        return ANNOTATIONS[self.key.kind]


@dataclasses.dataclass(frozen=True)
class DeliveryRequest:
    """The models a workload uses, in name order."""

    workload: Workload
    models: tuple[RequestedModel, ...]

    @property
    def keys(self) -> tuple[ModelKey, ...]:
        return tuple(model.key for model in self.models)


@dataclasses.dataclass(frozen=True)
class InvalidSpec:
    """Why a workload's request cannot be served, one problem per entry (each names the annotation
    or the pod template field and says what to do)."""

    workload: Workload
    problems: tuple[str, ...]

    @property
    def message(self) -> str:
        return "; ".join(self.problems)


# The cluster's own namespaces; Deckhouse's are all `d8-*` (the webhook also skips namespaces
# labelled heritage=deckhouse, templates/controller/webhook.yaml).
SYSTEM_NAMESPACES: Final = frozenset({"kube-system", "kube-public", "kube-node-lease"})
PLATFORM_NAMESPACE_PREFIX: Final = "d8-"


def ignored(namespace: str) -> bool:
    """Workloads of the module's own namespace, the cluster's and Deckhouse's never get models
    delivered: a gate the module cannot lift there could hold the platform itself."""
    return (
        namespace == MODULE_NAMESPACE
        or namespace in SYSTEM_NAMESPACES
        or namespace.startswith(PLATFORM_NAMESPACE_PREFIX)
    )


def requests_models(obj: Mapping[str, Any]) -> bool:
    """Whether the object carries either annotation (even an empty or a bad one)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return any(name in annotations for name in ANNOTATIONS.values())


def parse(obj: Mapping[str, Any]) -> DeliveryRequest | InvalidSpec | None:
    """The request of a workload object; None when it names no model or is the module's own."""
    workload = workload_of(obj)
    if ignored(workload.namespace) or not requests_models(obj):
        return None
    annotations: Mapping[str, Any] = (obj.get("metadata") or {}).get("annotations") or {}
    problems: list[str] = []
    found: dict[str, RequestedModel] = {}
    for kind, annotation in ANNOTATIONS.items():
        if annotation not in annotations:
            continue
        value = str(annotations.get(annotation) or "")
        names = [part.strip() for part in value.split(",")]
        if any(not name for name in names):
            problems.append(
                f"the annotation {annotation}={value!r} has an empty model name; list the names "
                f"separated by commas, such as {annotation}={EXAMPLE}"
            )
        for name in names:
            if not name:
                continue
            if not is_object_name(name):
                problems.append(
                    f"the annotation {annotation} names {name!r}, which is not a {kind} name (a "
                    "DNS-1123 subdomain: lowercase letters, digits, '-' and '.'); use the name of the "
                    f"{kind} as `kubectl get {kind.plural}` shows it"
                )
                continue
            if name in found:
                earlier = found[name].annotation
                where = "twice in it" if earlier == annotation else f"and also in {earlier}"
                problems.append(
                    f"the annotation {annotation} names {name!r} {where}: both would appear at "
                    f"{MODELS_DIR}/{name}; name each model once"
                )
                continue
            found[name] = RequestedModel(
                ModelKey(kind, workload.namespace if kind is ModelKind.MODEL else "", name)
            )
    problems.extend(template_conflicts(pod_template(obj)))
    if problems:
        return InvalidSpec(workload, tuple(problems))
    return DeliveryRequest(workload, tuple(sorted(found.values(), key=lambda model: model.name)))


def template_conflicts(template: Mapping[str, Any]) -> Iterator[str]:
    """What the user's own pod template already uses of what delivery adds."""
    users = strip(template)
    spec: Mapping[str, Any] = users.get("spec") or {}
    for volume in spec.get("volumes") or ():
        if isinstance(volume, Mapping) and volume.get("name") == SHARED_PVC_VOLUME:
            yield (
                f"the pod template has its own volume named {SHARED_PVC_VOLUME}, the name of the volume "
                "the module adds; rename that volume"
            )
        elif isinstance(volume, Mapping) and NODE_CACHE_VOLUME_NAME.match(str(volume.get("name") or "")):
            yield (
                f"the pod template has its own volume named {volume.get('name')}, a name of the volumes "
                f"the module adds in NodeCache mode ({NODE_CACHE_VOLUME_PREFIX}<10 hex>); rename that volume"
            )
    for container in _containers(spec):
        name = container.get("name")
        for mount in container.get("volumeMounts") or ():
            path = str(mount.get("mountPath") or "") if isinstance(mount, Mapping) else ""
            if _under_models_dir(path):
                yield (
                    f"container {name} mounts the volume {mount.get('name')} at {path}, where the "
                    f"module mounts the models ({MODELS_DIR}/<name>); mount it elsewhere or remove it"
                )
        for env in container.get("env") or ():
            variable = env.get("name") if isinstance(env, Mapping) else None
            if variable in (MODELS_DIR_VARIABLE, MODELS_VARIABLE):
                yield (
                    f"container {name} sets the variable {variable}, which the module sets to tell "
                    "where the models are; remove it from the container"
                )


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for field in CONTAINER_LISTS:
        items: Sequence[Any] = spec.get(field) or ()
        yield from (item for item in items if isinstance(item, Mapping))


def _under_models_dir(path: str) -> bool:
    normalized = "/" + "/".join(part for part in path.split("/") if part and part != ".")
    return normalized == MODELS_DIR or normalized.startswith(MODELS_DIR + "/")
