"""The label that marks a workload whose pod template carries what the module added (D158).

The module's after-delete hook must find those workloads without watching every workload of the
cluster: its bindings select `DELIVERY_TEMPLATE_LABEL`. One rule says when a workload carries it:
its template differs from the template `template.strip` gives (the record, the volumes, mounts and
variables it names, or the scheduling gate). The controller applies the rule on every pass and the
admission webhook on every workload it admits, so a workload delivered before the label existed
gets it on the controller's first pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ai_models.domain.delivery.template import strip
from ai_models.names import DELIVERY_TEMPLATE_LABEL, DELIVERY_TEMPLATE_LABEL_VALUE


def carries_module_part(template: Mapping[str, Any]) -> bool:
    """Whether the pod template holds anything the module added."""
    return strip(template) != dict(template)


def marked(labels: Mapping[str, Any] | None) -> bool:
    return (labels or {}).get(DELIVERY_TEMPLATE_LABEL) == DELIVERY_TEMPLATE_LABEL_VALUE


def label_change(labels: Mapping[str, Any] | None, template: Mapping[str, Any]) -> bool | None:
    """True: the workload must get the label; False: it must lose it; None: it is right."""
    wanted = carries_module_part(template)
    if wanted == marked(labels):
        return None
    return wanted


def label_patch(labels: Mapping[str, Any] | None, template: Mapping[str, Any]) -> list[dict[str, Any]]:
    """RFC 6902 operations on a workload (its `/metadata/labels`) that put the label right."""
    change = label_change(labels, template)
    if change is None:
        return []
    key = DELIVERY_TEMPLATE_LABEL.replace("~", "~0").replace("/", "~1")
    if change is False:
        return [{"op": "remove", "path": f"/metadata/labels/{key}"}]
    if not labels:
        return [
            {
                "op": "add",
                "path": "/metadata/labels",
                "value": {DELIVERY_TEMPLATE_LABEL: DELIVERY_TEMPLATE_LABEL_VALUE},
            }
        ]
    return [{"op": "add", "path": f"/metadata/labels/{key}", "value": DELIVERY_TEMPLATE_LABEL_VALUE}]
