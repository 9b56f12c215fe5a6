"""The pod template of a delivering workload: what the module adds to it, and how it takes it back.

Both delivery modes add to every container and init container a read-only mount per model at
`/data/modelcache/models/<name>` and the variables `AI_MODELS_MODELS_DIR` and `AI_MODELS_MODELS`
(JSON list of `{name, path, digest}` in name order), placed first so that the user's own variables
can refer to them. What differs is where the files come from:

- SharedPVC (`rewrite`): one volume for the workload's shared claim (`ai-models-shared`,
  read-only); each mount is the subPath `claim_layout.object_dir(digest)` of it.
- NodeCache (`rewrite_for_node_cache`): one inline CSI volume of the module's driver per model
  (`node_cache_volume`, named from the model's kind and name; its attributes name the model and
  the artifact digest), mounted whole; and the pods are placed by `spec.nodeSelector` on the nodes
  of `delivery.nodeCache.nodeSelector` whose cache is ready (`NODE_CACHE_READY_LABEL`). Only the
  entries the user's template did not have already are added (and recorded); an entry the user set
  to another value is a conflict the decision refuses before it rewrites (D109).

An annotation on the pod template records what was added (the mode, the claim or the volumes, the
node selector entries, the models, the containers), so `strip` removes exactly that, whatever the
mode is now: a container the user adds later is not touched, nothing the user wrote is. A record
without a mode is SharedPVC's (issue 12 wrote it so).

`rewrite*` strip first and add afresh, so rewriting a rewritten template with the same input gives
an equal dict (the controller compares and writes nothing, and a Deployment never rolls out a
ReplicaSet for nothing), and a template delivered in one mode is rewritten for the other cleanly.
The scheduling gate `ai.deckhouse.io/model-delivery` is added by `gate` and removed by `rewrite*`
and `strip`.

`json_patch` turns the old template into the new one as RFC 6902 operations under the template's
place in the workload, for the admission webhook's answer.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ai_models.domain.delivery.claim_layout import object_dir
from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    DELIVERY_APPLIED_ANNOTATION,
    DELIVERY_SCHEDULING_GATE,
    MODELS_DIR,
    MODELS_DIR_VARIABLE,
    MODELS_VARIABLE,
    NODE_CACHE_DRIVER,
    NODE_CACHE_VOLUME_PREFIX,
    SHARED_PVC_VOLUME,
    VOLUME_CLUSTER_MODEL_ATTRIBUTE,
    VOLUME_DIGEST_ATTRIBUTE,
    VOLUME_MODEL_ATTRIBUTE,
    ModelKind,
)

# Init containers first: the order in which a pod runs them.
CONTAINER_LISTS: Final = ("initContainers", "containers")
MODULE_VARIABLES: Final = (MODELS_DIR_VARIABLE, MODELS_VARIABLE)
_VOLUME_HASH_CHARACTERS: Final = 10
# What `node_cache_volume` makes: a user's volume of such a name would be taken for the module's.
NODE_CACHE_VOLUME_NAME: Final = re.compile(
    rf"^{re.escape(NODE_CACHE_VOLUME_PREFIX)}[0-9a-f]{{{_VOLUME_HASH_CHARACTERS}}}$"
)
MODEL_ATTRIBUTES: Final[Mapping[ModelKind, str]] = {
    ModelKind.MODEL: VOLUME_MODEL_ATTRIBUTE,
    ModelKind.CLUSTER_MODEL: VOLUME_CLUSTER_MODEL_ATTRIBUTE,
}

Template = dict[str, Any]


@dataclasses.dataclass(frozen=True, order=True)
class DeliveredModel:
    """A model as a container sees it: its directory and the artifact digest it holds."""

    name: str
    digest: str

    @property
    def path(self) -> str:
        return f"{MODELS_DIR}/{self.name}"

    @property
    def sub_path(self) -> str:
        return object_dir(self.digest)


@dataclasses.dataclass(frozen=True, order=True)
class CachedModel:
    """A model delivered from the node cache: which object it is (the volume attributes name it)
    and the artifact digest the pod gets."""

    key: ModelKey
    digest: str

    @property
    def delivered(self) -> DeliveredModel:
        return DeliveredModel(self.key.name, self.digest)

    @property
    def volume(self) -> str:
        return node_cache_volume(self.key)


@dataclasses.dataclass(frozen=True)
class Applied:
    """What the module added to a pod template, as its annotation records it: SharedPVC's claim
    (None in NodeCache mode), the pod volumes (in model order), the node selector entries, the
    models and, per container list, the names of the containers."""

    mode: DeliveryMode
    claim: str | None
    models: tuple[DeliveredModel, ...]
    containers: Mapping[str, tuple[str, ...]]
    volumes: tuple[str, ...] = ()
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)


def node_cache_volume(key: ModelKey) -> str:
    """The pod volume of a model in NodeCache mode: a DNS-1123 label that stays the same while the
    model does (a re-published artifact changes the volume's digest attribute, not its name)."""
    digest = hashlib.sha256(f"{key.kind}/{key.name}".encode()).hexdigest()
    return NODE_CACHE_VOLUME_PREFIX + digest[:_VOLUME_HASH_CHARACTERS]


def node_cache_volume_source(model: CachedModel) -> dict[str, Any]:
    """The inline CSI volume of one model (read-only; the attributes are hints for the plugin,
    which authorizes from what kubelet writes)."""
    return {
        "name": model.volume,
        "csi": {
            "driver": NODE_CACHE_DRIVER,
            "readOnly": True,
            "volumeAttributes": {
                MODEL_ATTRIBUTES[model.key.kind]: model.key.name,
                VOLUME_DIGEST_ATTRIBUTE: model.digest,
            },
        },
    }


def models_variable(models: Sequence[DeliveredModel]) -> str:
    return json.dumps(
        [{"name": m.name, "path": m.path, "digest": m.digest} for m in sorted(models)], separators=(",", ":")
    )


def applied(template: Mapping[str, Any]) -> Applied | None:
    """The record of what the module added, None when it added nothing (or the record is damaged:
    then nothing is recognised as the module's, and the contract reports the leftovers)."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(DELIVERY_APPLIED_ANNOTATION)
    if not isinstance(text, str):
        return None
    try:
        record = json.loads(text)
        mode = DeliveryMode(record.get("mode") or DeliveryMode.SHARED_PVC)
        models = tuple(DeliveredModel(str(m["name"]), str(m["digest"])) for m in record["models"])
        containers = {
            field: tuple(str(name) for name in record.get(field) or ()) for field in CONTAINER_LISTS
        }
        if mode is DeliveryMode.SHARED_PVC:
            return Applied(mode, str(record["claim"]), models, containers, volumes=(SHARED_PVC_VOLUME,))
        volumes = tuple(str(name) for name in record["volumes"])
        selector = record.get("nodeSelector") or {}
        if len(volumes) != len(models) or not isinstance(selector, Mapping):
            return None
        return Applied(
            mode,
            None,
            models,
            containers,
            volumes=volumes,
            node_selector={str(key): str(value) for key, value in selector.items()},
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def gated(template: Mapping[str, Any]) -> bool:
    gates = (template.get("spec") or {}).get("schedulingGates") or ()
    return any(isinstance(item, Mapping) and item.get("name") == DELIVERY_SCHEDULING_GATE for item in gates)


def gate(template: Mapping[str, Any]) -> Template:
    """The template with the delivery scheduling gate (pods wait until the gate is removed)."""
    result = copy.deepcopy(dict(template))
    if not gated(result):
        spec = result.setdefault("spec", {})
        spec["schedulingGates"] = [*(spec.get("schedulingGates") or ()), {"name": DELIVERY_SCHEDULING_GATE}]
    return result


def rewrite(template: Mapping[str, Any], *, claim: str, models: Sequence[DeliveredModel]) -> Template:
    """The template that delivers `models` from the shared claim `claim`, without the gate."""
    ordered = sorted(models)
    mounts = [
        {"name": SHARED_PVC_VOLUME, "mountPath": m.path, "subPath": m.sub_path, "readOnly": True}
        for m in ordered
    ]
    volumes = [{"name": SHARED_PVC_VOLUME, "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}]
    return _add(strip(template), models=ordered, mounts=mounts, volumes=volumes, record={"claim": claim})


def rewrite_for_node_cache(
    template: Mapping[str, Any], *, models: Sequence[CachedModel], node_selector: Mapping[str, str]
) -> Template:
    """The template that delivers `models` from the node cache of the nodes `node_selector`
    selects, without the gate. `node_selector` must not conflict with the user's own entries
    (`node_selector_conflicts`): the module never overwrites what the user wrote."""
    result = strip(template)
    ordered = sorted(models, key=lambda model: model.key.name)
    spec = result.setdefault("spec", {})
    own = spec.get("nodeSelector") if isinstance(spec.get("nodeSelector"), Mapping) else {}
    conflicts = node_selector_conflicts(result, node_selector)
    if conflicts:
        raise ValueError(f"the pod template's nodeSelector conflicts with the placement: {conflicts}")
    added = {key: value for key, value in sorted(node_selector.items()) if key not in own}
    if added:
        spec["nodeSelector"] = {**own, **added}
    mounts = [{"name": m.volume, "mountPath": m.delivered.path, "readOnly": True} for m in ordered]
    record = {
        "mode": str(DeliveryMode.NODE_CACHE),
        "volumes": [m.volume for m in ordered],
        "nodeSelector": added,
    }
    return _add(
        result,
        models=[m.delivered for m in ordered],
        mounts=mounts,
        volumes=[node_cache_volume_source(m) for m in ordered],
        record=record,
    )


def node_selector_conflicts(template: Mapping[str, Any], wanted: Mapping[str, str]) -> dict[str, str]:
    """The entries of the template's own nodeSelector (`strip` it first) that set a key of the
    placement `wanted` to another value: key -> the template's value."""
    own = (template.get("spec") or {}).get("nodeSelector")
    if not isinstance(own, Mapping):
        return {}
    return {str(key): str(own[key]) for key, value in wanted.items() if key in own and own[key] != value}


def _add(
    result: Template,
    *,
    models: Sequence[DeliveredModel],
    mounts: Sequence[Mapping[str, Any]],
    volumes: Sequence[Mapping[str, Any]],
    record: Mapping[str, Any],
) -> Template:
    """Add to a stripped template what both modes add: variables first and mounts in every
    container, the volumes, and the record."""
    spec = result.setdefault("spec", {})
    containers: dict[str, list[str]] = {}
    for field in CONTAINER_LISTS:
        for container in spec.get(field) or ():
            if not isinstance(container, dict):
                continue
            containers.setdefault(field, []).append(str(container.get("name")))
            container["env"] = [
                {"name": MODELS_DIR_VARIABLE, "value": MODELS_DIR},
                {"name": MODELS_VARIABLE, "value": models_variable(models)},
                *(container.get("env") or ()),
            ]
            container["volumeMounts"] = [*(container.get("volumeMounts") or ()), *copy.deepcopy(list(mounts))]
    spec["volumes"] = [*(spec.get("volumes") or ()), *copy.deepcopy(list(volumes))]
    full = {**record, "models": [{"name": m.name, "digest": m.digest} for m in models], **containers}
    metadata = result.setdefault("metadata", {})
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        DELIVERY_APPLIED_ANNOTATION: json.dumps(full, separators=(",", ":"), sort_keys=True),
    }
    return result


def strip(template: Mapping[str, Any]) -> Template:
    """The template without anything the module added (its record, its volumes, mounts and
    variables in the containers it recorded, the node selector entries it recorded, and the
    scheduling gate)."""
    result = copy.deepcopy(dict(template))
    record = applied(result)
    spec = result.get("spec")
    if isinstance(spec, dict):
        _remove(spec, "schedulingGates", lambda item: item.get("name") == DELIVERY_SCHEDULING_GATE)
        if record is not None:
            volumes = set(record.volumes)
            _remove(spec, "volumes", lambda item: item.get("name") in volumes)
            for field in CONTAINER_LISTS:
                names = set(record.containers.get(field, ()))
                for container in spec.get(field) or ():
                    if isinstance(container, dict) and container.get("name") in names:
                        _remove(container, "env", lambda item: item.get("name") in MODULE_VARIABLES)
                        _remove(container, "volumeMounts", lambda item: item.get("name") in volumes)
            selector = spec.get("nodeSelector")
            if isinstance(selector, dict) and record.node_selector:
                for key, value in record.node_selector.items():
                    if selector.get(key) == value:
                        del selector[key]
                if not selector:
                    del spec["nodeSelector"]
    metadata = result.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("annotations"), dict):
        annotations = metadata["annotations"]
        if DELIVERY_APPLIED_ANNOTATION in annotations:
            del annotations[DELIVERY_APPLIED_ANNOTATION]
            if not annotations:
                del metadata["annotations"]
    return result


def driver_volumes(template: Mapping[str, Any]) -> frozenset[str]:
    """The names of a pod template's inline volumes of the module's CSI driver."""
    return frozenset(name for name, _ in cache_volumes(template))


def cache_volumes(pod: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    """The inline volumes of the module's CSI driver a Pod (or a pod template) has: (volume name,
    the digest its attributes name)."""
    found = set()
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        csi = volume.get("csi") if isinstance(volume, Mapping) else None
        if isinstance(csi, Mapping) and csi.get("driver") == NODE_CACHE_DRIVER:
            attributes = csi.get("volumeAttributes")
            digest = attributes.get(VOLUME_DIGEST_ATTRIBUTE) if isinstance(attributes, Mapping) else None
            found.add((str(volume.get("name")), str(digest or "")))
    return frozenset(found)


def _remove(parent: dict[str, Any], field: str, ours: Any) -> None:
    """Drop the module's entries from the list `parent[field]`; a list left empty by that goes too.

    The API server omits empty lists and maps (annotations included) but always writes a pod
    template's `metadata`, so that is what `strip` gives back: what the server returned before."""
    items = parent.get(field)
    if not isinstance(items, list):
        return
    kept = [item for item in items if not (isinstance(item, Mapping) and ours(item))]
    if len(kept) == len(items):
        return
    if kept:
        parent[field] = kept
    else:
        del parent[field]


# ----- RFC 6902 ------------------------------------------------------------------------------------


def json_patch(old: Any, new: Any, *, prefix: str) -> list[dict[str, Any]]:
    """Operations that turn `old` (at the JSON pointer `prefix` of a document) into `new`.

    Objects are compared key by key; a list of the same length item by item, any other changed
    list is replaced whole (container and volume lists are short; index arithmetic for inserts is
    where hand-written patches go wrong). An empty list means equal; `old` None (nothing at
    `prefix`) adds `new` there.
    """
    if old is None:
        return [{"op": "add", "path": prefix, "value": copy.deepcopy(new)}]
    operations: list[dict[str, Any]] = []
    _diff(old, new, prefix, operations)
    return operations


def _pointer(prefix: str, key: str | int) -> str:
    return f"{prefix}/{str(key).replace('~', '~0').replace('/', '~1')}"


def _diff(old: Any, new: Any, path: str, operations: list[dict[str, Any]]) -> None:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in old:
            if key not in new:
                operations.append({"op": "remove", "path": _pointer(path, key)})
        for key, value in new.items():
            if key not in old:
                operations.append({"op": "add", "path": _pointer(path, key), "value": copy.deepcopy(value)})
            else:
                _diff(old[key], value, _pointer(path, key), operations)
        return
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (before, after) in enumerate(zip(old, new, strict=True)):
            _diff(before, after, _pointer(path, index), operations)
        return
    if old != new or type(old) is not type(new):
        operations.append({"op": "replace", "path": path, "value": copy.deepcopy(new)})
