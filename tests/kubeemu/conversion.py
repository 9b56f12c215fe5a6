"""Between the stored form of an object and the version a client asked for.

Custom resources use the `None` conversion strategy (only apiVersion changes). events.k8s.io/v1
Events share storage with core/v1 Events, as on a real cluster, with the field renames of the
upstream conversion (involvedObject ↔ regarding, message ↔ note, ...).
"""

from __future__ import annotations

from typing import Any

from kubeemu.jsonutil import jsoncopy
from kubeemu.resources import ResourceType

# core/v1 Event field → events.k8s.io/v1 Event field.
_EVENT_RENAMES = {
    "involvedObject": "regarding",
    "message": "note",
    "source": "deprecatedSource",
    "firstTimestamp": "deprecatedFirstTimestamp",
    "lastTimestamp": "deprecatedLastTimestamp",
    "count": "deprecatedCount",
    "reportingComponent": "reportingController",
}
_EVENTS_V1 = ("events.k8s.io", "events")


def to_served(rtype: ResourceType, stored: dict[str, Any]) -> dict[str, Any]:
    """A copy of the stored object as `rtype` presents it."""
    obj = jsoncopy(stored)
    if (rtype.group, rtype.plural) == _EVENTS_V1:
        obj = {_EVENT_RENAMES.get(k, k): v for k, v in obj.items()}
        if obj.get("reportingInstance") is None and isinstance(obj.get("deprecatedSource"), dict):
            obj["reportingInstance"] = obj["deprecatedSource"].get("host", "")
    obj["apiVersion"] = rtype.api_version
    obj["kind"] = rtype.kind
    return obj


def to_storage(rtype: ResourceType, obj: dict[str, Any], *, storage_api_version: str) -> dict[str, Any]:
    """The object as stored (shares structure with `obj`; callers pass a fresh dict)."""
    if (rtype.group, rtype.plural) == _EVENTS_V1:
        reverse = {v: k for k, v in _EVENT_RENAMES.items()}
        obj = {reverse.get(k, k): v for k, v in obj.items()}
    obj["apiVersion"] = storage_api_version
    return obj
