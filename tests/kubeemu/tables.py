"""Server-side printing: `meta.k8s.io/v1` Table answers for `kubectl get`, from a CRD's
additionalPrinterColumns (simple JSONPath) or a few built-in column sets, plus
PartialObjectMetadata(List) for metadata-only clients."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeemu.clock import age, human_duration, now, parse_rfc3339
from kubeemu.jsonpath import JSONPathError, find
from kubeemu.resources import PrinterColumn, ResourceType

_NAME_COLUMN = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "priority": 0,
    "description": "Name must be unique within a namespace. Is required when creating resources, "
    "although some "
    "resources may allow a client to request the generation of an appropriate name automatically. "
    "Name is primarily intended for creation idempotence and configuration definition. Cannot be "
    "updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
}
_AGE = PrinterColumn(
    "Age",
    "date",
    ".metadata.creationTimestamp",
    description="CreationTimestamp is a timestamp representing the server time when this object was created.",
)

# A few built-ins get kubectl's familiar columns; the rest show Name and Age.
_BUILTIN_COLUMNS: dict[str, tuple[PrinterColumn, ...]] = {
    "/namespaces": (PrinterColumn("Status", "string", ".status.phase"), _AGE),
    "/configmaps": (PrinterColumn("Data", "integer", ".data"), _AGE),
    "/secrets": (PrinterColumn("Type", "string", ".type"), PrinterColumn("Data", "integer", ".data"), _AGE),
    # kubectl's own columns; the cells are computed like its printers do (see _COMPUTED).
    "/pods": (
        PrinterColumn("Ready", "string", "", description="The number of containers that are ready."),
        PrinterColumn("Status", "string", "", description="The aggregate readiness state of this pod."),
        PrinterColumn("Restarts", "string", "", description="The number of container restarts."),
        _AGE,
    ),
    "batch/jobs": (
        PrinterColumn("Status", "string", "", description="Status of the job."),
        PrinterColumn("Completions", "string", "", description="The completion status of the job."),
        PrinterColumn("Duration", "string", "", description="Time required to complete the job."),
        _AGE,
    ),
    "/persistentvolumeclaims": (
        PrinterColumn("Status", "string", ".status.phase"),
        PrinterColumn("StorageClass", "string", ".spec.storageClassName"),
        _AGE,
    ),
    "apps/deployments": (
        PrinterColumn("Replicas", "integer", ".spec.replicas"),
        PrinterColumn("Available", "integer", ".status.availableReplicas"),
        _AGE,
    ),
    "coordination.k8s.io/leases": (PrinterColumn("Holder", "string", ".spec.holderIdentity"), _AGE),
    "/events": (
        PrinterColumn("Type", "string", ".type"),
        PrinterColumn("Reason", "string", ".reason"),
        PrinterColumn("Object", "string", ".involvedObject.name"),
        PrinterColumn("Message", "string", ".message"),
        _AGE,
    ),
}


def _pod_ready(pod: Mapping[str, Any]) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready") and "running" in (s.get("state") or {}))
    return f"{ready}/{len((pod.get('spec') or {}).get('containers') or [])}"


def _pod_status(pod: Mapping[str, Any]) -> str:
    """kubectl's STATUS of a Pod (printPod, without init containers): a waiting or terminated
    container's reason wins over the phase; a deleted Pod that is not finished is Terminating."""
    status = pod.get("status") or {}
    reason = str(status.get("reason") or status.get("phase") or "")
    for container in reversed(status.get("containerStatuses") or []):
        state = container.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated")
        if waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated is not None:
            reason = terminated.get("reason") or (
                f"Signal:{terminated['signal']}"
                if terminated.get("signal")
                else f"ExitCode:{terminated.get('exitCode', 0)}"
            )
    if (pod.get("metadata") or {}).get("deletionTimestamp") and status.get("phase") not in (
        "Succeeded",
        "Failed",
    ):
        reason = "Terminating"
    return reason


def _pod_restarts(pod: Mapping[str, Any]) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return str(sum(int(s.get("restartCount") or 0) for s in statuses))


def _job_status(job: Mapping[str, Any]) -> str:
    """kubectl's STATUS of a Job (printJob, 1.31+)."""
    true = {
        c.get("type") for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"
    }
    if "Complete" in true:
        return "Complete"
    if "Failed" in true:
        return "Failed"
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    for kind in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if kind in true:
            return kind
    return "Running"


def _job_completions(job: Mapping[str, Any]) -> str:
    spec, succeeded = job.get("spec") or {}, int((job.get("status") or {}).get("succeeded") or 0)
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    if (spec.get("parallelism") or 1) > 1:
        return f"{succeeded}/1 of {spec['parallelism']}"
    return f"{succeeded}/1"


def _job_duration(job: Mapping[str, Any]) -> str:
    status = job.get("status") or {}
    started = parse_rfc3339(str(status.get("startTime") or ""))
    if started is None:
        return ""
    completed = parse_rfc3339(str(status.get("completionTime") or ""))
    return human_duration(((completed or now()) - started).total_seconds())


_COMPUTED: dict[tuple[str, str], Callable[[Mapping[str, Any]], str]] = {
    ("/pods", "Ready"): _pod_ready,
    ("/pods", "Status"): _pod_status,
    ("/pods", "Restarts"): _pod_restarts,
    ("batch/jobs", "Status"): _job_status,
    ("batch/jobs", "Completions"): _job_completions,
    ("batch/jobs", "Duration"): _job_duration,
}


@dataclass(frozen=True)
class Negotiated:
    """What representation the client's Accept header asked for."""

    kind: str = ""  # "" (plain JSON) | Table | PartialObjectMetadata | PartialObjectMetadataList
    version: str = "v1"


def negotiate(accept: str | None) -> Negotiated:
    for clause in (accept or "").split(","):
        params = {}
        for piece in clause.split(";")[1:]:
            key, _, value = piece.strip().partition("=")
            params[key] = value
        if params.get("g") == "meta.k8s.io" and params.get("as") in (
            "Table",
            "PartialObjectMetadata",
            "PartialObjectMetadataList",
        ):
            return Negotiated(params["as"], params.get("v") or "v1")
        if clause.strip().split(";")[0] in ("application/json", "*/*", "application/*"):
            return Negotiated()
    return Negotiated()


def columns_for(rtype: ResourceType) -> tuple[PrinterColumn, ...]:
    if rtype.is_custom:
        return rtype.printer_columns
    return _BUILTIN_COLUMNS.get(rtype.storage_key, (_AGE,))


def _cell(column: PrinterColumn, obj: Mapping[str, Any]) -> Any:
    try:
        found = find(obj, column.json_path)
    except JSONPathError:
        return None
    if not found:
        return None
    value = found[0]
    if column.type == "date":
        return age(value) if isinstance(value, str) else None
    if column.type == "integer" and isinstance(value, dict):
        return len(value)
    if column.type == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        return json.dumps(value, separators=(",", ":")) if isinstance(value, (dict, list)) else str(value)
    return value


def partial_metadata(obj: Mapping[str, Any], version: str = "v1") -> dict[str, Any]:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": dict(obj.get("metadata") or {}),
    }


def table(
    rtype: ResourceType,
    objects: list[Mapping[str, Any]],
    *,
    list_meta: Mapping[str, Any] | None,
    include_object: str = "Metadata",
    version: str = "v1",
    with_headers: bool = True,
) -> dict[str, Any]:
    columns = columns_for(rtype)
    rows = []
    for obj in objects:
        cells = [
            computed(obj) if (computed := _COMPUTED.get((rtype.storage_key, c.name))) else _cell(c, obj)
            for c in columns
        ]
        row: dict[str, Any] = {"cells": [obj["metadata"]["name"], *cells]}
        if include_object == "Object":
            row["object"] = dict(obj)
        elif include_object != "None":
            row["object"] = partial_metadata(obj, version)
        rows.append(row)
    out: dict[str, Any] = {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": dict(list_meta or {}),
        "rows": rows,
    }
    if with_headers:
        out["columnDefinitions"] = [_NAME_COLUMN] + [
            {
                "name": c.name,
                "type": c.type,
                "format": c.format,
                "description": c.description,
                "priority": c.priority,
            }
            for c in columns
        ]
    else:
        out["columnDefinitions"] = []
    return out
