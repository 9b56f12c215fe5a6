"""What disabling the module takes back from the cluster, as RFC 6902 operations (D158).

The after-delete hook (`hooks/disable_cleanup.py`) reads the objects through its bindings and
writes what these functions give; they are pure, so the hook and its tests share one rule:

- a workload labelled `DELIVERY_TEMPLATE_LABEL` loses what `template.strip` takes away (the
  record, the module's volumes, mounts and variables in the containers it recorded, its node
  selector entries, the scheduling gate), the delivery report annotations and the label; nothing
  the user wrote is touched. The hook's jqFilter keeps only the parts of the template `strip` reads
  and `json_patch` compares, so every operation names a path inside those parts; a `test` of each
  container's name guards the index-based paths against a reordered list.
- an object with the module's finalizer loses it (`test` then `remove` at its index, so a
  finalizer added meanwhile by someone else is not taken).
- a Node the node plugin reported on loses its readiness label and cache report (the plugin marks
  itself not ready when it stops, and nothing would ever take them off).
- a Pending Pod held by the delivery gate: with none of the module's volumes it loses the gate (it
  was made from a gated-only template and now starts as a new Pod would); with one it is deleted,
  since it would start without its files (SharedPVC) or with a volume of the deleted CSI driver
  (NodeCache): its owner makes a new one from the stripped template.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Any

from ai_models.domain.delivery.contract import WorkloadKind
from ai_models.domain.delivery.template import CONTAINER_LISTS, json_patch, strip
from ai_models.names import (
    DELIVERY_MESSAGE_ANNOTATION,
    DELIVERY_REASON_ANNOTATION,
    DELIVERY_SCHEDULING_GATE,
    DELIVERY_TEMPLATE_LABEL,
    NODE_CACHE_READY_LABEL,
    NODE_CACHE_REPORT_ANNOTATION,
)

REPORT_ANNOTATIONS = (DELIVERY_REASON_ANNOTATION, DELIVERY_MESSAGE_ANNOTATION)


def _key(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def workload_patch(
    kind: WorkloadKind,
    *,
    template: Mapping[str, Any],
    annotations: Sequence[str] = (),
    labelled: bool = True,
) -> list[dict[str, Any]]:
    """The operations that take the module's part off a workload: `template` is the pod template
    (its parts `strip` reads), `annotations` the workload's own annotation keys, `labelled`
    whether it carries the label. Empty when the module left nothing on it."""
    prefix = kind.template_pointer
    changes = json_patch(dict(template), strip(template), prefix=prefix)
    guards: list[dict[str, Any]] = []
    if changes:
        spec = template.get("spec") or {}
        for field in CONTAINER_LISTS:
            for index, container in enumerate(spec.get(field) or ()):
                if isinstance(container, Mapping) and "name" in container:
                    guards.append(
                        {
                            "op": "test",
                            "path": f"{prefix}/spec/{field}/{index}/name",
                            "value": container["name"],
                        }
                    )
    report = [
        {"op": "remove", "path": f"/metadata/annotations/{_key(name)}"}
        for name in REPORT_ANNOTATIONS
        if name in annotations
    ]
    label = (
        [{"op": "remove", "path": f"/metadata/labels/{_key(DELIVERY_TEMPLATE_LABEL)}"}] if labelled else []
    )
    return [*guards, *changes, *report, *label]


def finalizer_patch(finalizers: Sequence[Any], finalizer: str) -> list[dict[str, Any]]:
    """The operations that take `finalizer` off an object whose finalizers are `finalizers`;
    highest index first, so each index still points where it did."""
    operations: list[dict[str, Any]] = []
    for index in reversed(range(len(finalizers))):
        if finalizers[index] == finalizer:
            path = f"/metadata/finalizers/{index}"
            operations += [{"op": "test", "path": path, "value": finalizer}, {"op": "remove", "path": path}]
    return operations


def node_patch() -> dict[str, Any]:
    """The merge patch that takes the node plugin's label and report off a Node."""
    return {
        "metadata": {
            "labels": {NODE_CACHE_READY_LABEL: None},
            "annotations": {NODE_CACHE_REPORT_ANNOTATION: None},
        }
    }


class PodAction(enum.Enum):
    NONE = "none"
    UNGATE = "ungate"
    DELETE = "delete"


@dataclasses.dataclass(frozen=True)
class GatedPod:
    """What the hook knows of a Pending Pod: its scheduling gates' names, in order, and whether it
    has a volume of the module (the shared claim's, or one of the node cache driver)."""

    namespace: str
    name: str
    gates: tuple[str, ...]
    module_volumes: bool

    @property
    def action(self) -> PodAction:
        if DELIVERY_SCHEDULING_GATE not in self.gates:
            return PodAction.NONE
        return PodAction.DELETE if self.module_volumes else PodAction.UNGATE

    def ungate_patch(self) -> list[dict[str, Any]]:
        """Remove the delivery gate only (a Pod's gates may be removed, never added)."""
        operations: list[dict[str, Any]] = []
        for index in reversed(range(len(self.gates))):
            if self.gates[index] == DELIVERY_SCHEDULING_GATE:
                path = f"/spec/schedulingGates/{index}/name"
                operations += [
                    {"op": "test", "path": path, "value": DELIVERY_SCHEDULING_GATE},
                    {"op": "remove", "path": f"/spec/schedulingGates/{index}"},
                ]
        return operations
