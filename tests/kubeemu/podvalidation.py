"""The apiserver's Pod rules for scheduling gates (pkg/apis/core/validation), with its wording.

A Pod's `spec.schedulingGates` can be set at creation and afterwards only shrink: an update may
delete gates, never add one. `spec.nodeName` cannot be set while any gate remains.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeemu.crdvalidation import FieldError


def _gates(pod: Mapping[str, Any] | None) -> list[str]:
    spec = (pod or {}).get("spec") or {}
    return [str(g.get("name")) for g in spec.get("schedulingGates") or [] if isinstance(g, Mapping)]


def validate_pod(pod: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    found: list[FieldError] = []
    gates = _gates(pod)
    if gates and ((pod.get("spec") or {}).get("nodeName")):
        found.append(
            FieldError(
                "spec.nodeName", "Forbidden", "cannot be set until all schedulingGates have been cleared"
            )
        )
    if old is not None:
        before = set(_gates(old))
        for index, gate in enumerate(gates):
            if gate not in before:
                found.append(
                    FieldError(
                        f"spec.schedulingGates[{index}].name",
                        "Forbidden",
                        f"only deletion is allowed, but found new scheduling gate '{gate}'",
                    )
                )
    return found
