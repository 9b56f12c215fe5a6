"""The pod template of a delivering workload: what the module adds to it, and how it takes it back.

SharedPVC delivery adds one volume for the workload's shared claim (`ai-models-shared`, read-only),
and to every container and init container a read-only mount per model at
`/data/modelcache/models/<name>` (the subPath `claim_layout.object_dir(digest)` of the claim) and
the variables `AI_MODELS_MODELS_DIR` and `AI_MODELS_MODELS` (JSON list of `{name, path, digest}` in
name order), placed first so that the user's own variables can refer to them. An annotation on the
pod template records what was added (the claim, the models, the containers), so `strip` removes
exactly that: a container the user adds later is not touched, nothing the user wrote is.

`rewrite` strips first and adds afresh, so rewriting a rewritten template with the same input
gives an equal dict: the controller compares and writes nothing, and a Deployment never rolls out a
ReplicaSet for nothing. The scheduling gate `ai.deckhouse.io/model-delivery` is added by `gate`
and removed by `rewrite` and `strip`.

`json_patch` turns the old template into the new one as RFC 6902 operations under the template's
place in the workload, for the admission webhook's answer.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ai_models.domain.delivery.claim_layout import object_dir
from ai_models.names import (
    DELIVERY_APPLIED_ANNOTATION,
    DELIVERY_SCHEDULING_GATE,
    MODELS_DIR,
    MODELS_DIR_VARIABLE,
    MODELS_VARIABLE,
    SHARED_PVC_VOLUME,
)

# Init containers first: the order in which a pod runs them.
CONTAINER_LISTS: Final = ("initContainers", "containers")
MODULE_VARIABLES: Final = (MODELS_DIR_VARIABLE, MODELS_VARIABLE)

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


@dataclasses.dataclass(frozen=True)
class Applied:
    """What the module added to a pod template, as its annotation records it."""

    claim: str
    models: tuple[DeliveredModel, ...]
    containers: Mapping[str, tuple[str, ...]]  # per container list, the names of the containers


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
        return Applied(
            claim=str(record["claim"]),
            models=tuple(DeliveredModel(str(m["name"]), str(m["digest"])) for m in record["models"]),
            containers={
                field: tuple(str(name) for name in record.get(field) or ()) for field in CONTAINER_LISTS
            },
        )
    except (ValueError, KeyError, TypeError):
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
    result = strip(template)
    ordered = sorted(models)
    spec = result.setdefault("spec", {})
    containers: dict[str, list[str]] = {}
    for field in CONTAINER_LISTS:
        for container in spec.get(field) or ():
            if not isinstance(container, dict):
                continue
            containers.setdefault(field, []).append(str(container.get("name")))
            container["env"] = [
                {"name": MODELS_DIR_VARIABLE, "value": MODELS_DIR},
                {"name": MODELS_VARIABLE, "value": models_variable(ordered)},
                *(container.get("env") or ()),
            ]
            container["volumeMounts"] = [
                *(container.get("volumeMounts") or ()),
                *(
                    {"name": SHARED_PVC_VOLUME, "mountPath": m.path, "subPath": m.sub_path, "readOnly": True}
                    for m in ordered
                ),
            ]
    spec["volumes"] = [
        *(spec.get("volumes") or ()),
        {"name": SHARED_PVC_VOLUME, "persistentVolumeClaim": {"claimName": claim, "readOnly": True}},
    ]
    record = {
        "claim": claim,
        "models": [{"name": m.name, "digest": m.digest} for m in ordered],
        **containers,
    }
    metadata = result.setdefault("metadata", {})
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        DELIVERY_APPLIED_ANNOTATION: json.dumps(record, separators=(",", ":"), sort_keys=True),
    }
    return result


def strip(template: Mapping[str, Any]) -> Template:
    """The template without anything the module added (its record, its volume, mounts and
    variables in the containers it recorded, and the scheduling gate)."""
    result = copy.deepcopy(dict(template))
    record = applied(result)
    spec = result.get("spec")
    if isinstance(spec, dict):
        _remove(spec, "schedulingGates", lambda item: item.get("name") == DELIVERY_SCHEDULING_GATE)
        if record is not None:
            _remove(spec, "volumes", lambda item: item.get("name") == SHARED_PVC_VOLUME)
            for field in CONTAINER_LISTS:
                names = set(record.containers.get(field, ()))
                for container in spec.get(field) or ():
                    if isinstance(container, dict) and container.get("name") in names:
                        _remove(container, "env", lambda item: item.get("name") in MODULE_VARIABLES)
                        _remove(container, "volumeMounts", lambda item: item.get("name") == SHARED_PVC_VOLUME)
    metadata = result.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("annotations"), dict):
        annotations = metadata["annotations"]
        if DELIVERY_APPLIED_ANNOTATION in annotations:
            del annotations[DELIVERY_APPLIED_ANNOTATION]
            if not annotations:
                del metadata["annotations"]
    return result


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
