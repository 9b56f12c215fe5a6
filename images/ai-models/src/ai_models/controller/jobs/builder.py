"""The one builder of worker Jobs: a Helm-rendered pod template plus what one Job needs.

Every worker (`ai-models publish`, `ai-models materialize`) exits 1 when it failed with an outcome
and 2 on bad settings: a new Pod would fail the same way, so those codes fail the Job at once
instead of spending its retries; a killed or evicted Pod is retried up to `backoff_limit`. The
worker writes its outcome as JSON to `termination_message_path`, which the room reads back.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

FINAL_EXIT_CODES: Final = (1, 2)


@dataclasses.dataclass(frozen=True)
class JobLimits:
    backoff_limit: int
    deadline_seconds: int


@dataclasses.dataclass(frozen=True)
class WorkerJob:
    """What one Job adds to its pod template. The Job carries its Pods' labels: the template's and
    `labels`."""

    name: str
    namespace: str
    container: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    env: Sequence[Mapping[str, Any]]
    termination_message_path: str
    limits: JobLimits
    owner_references: Sequence[Mapping[str, Any]] = ()
    volumes: Sequence[Mapping[str, Any]] = ()
    volume_mounts: Sequence[Mapping[str, Any]] = ()
    image_pull_secrets: Sequence[str] = ()


def worker_job(template: Mapping[str, Any], job: WorkerJob) -> dict[str, Any]:
    """The Job running `job.container` of `template` once, with `job`'s variables and volumes."""
    pod = copy.deepcopy(dict(template))
    metadata = pod.setdefault("metadata", {})
    labels = {**(metadata.get("labels") or {}), **job.labels}
    metadata["labels"] = labels
    spec = pod["spec"]
    spec["restartPolicy"] = "Never"
    if job.image_pull_secrets:
        spec["imagePullSecrets"] = [
            *(spec.get("imagePullSecrets") or []),
            *({"name": name} for name in job.image_pull_secrets),
        ]
    if job.volumes:
        spec["volumes"] = [*(spec.get("volumes") or []), *job.volumes]
    for container in spec["containers"]:
        if container["name"] == job.container:
            container["env"] = [*(container.get("env") or []), *job.env]
            if job.volume_mounts:
                container["volumeMounts"] = [*(container.get("volumeMounts") or []), *job.volume_mounts]
            container["terminationMessagePath"] = job.termination_message_path
            container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    job_metadata: dict[str, Any] = {
        "name": job.name,
        "namespace": job.namespace,
        "labels": dict(labels),
        "annotations": dict(job.annotations),
    }
    if job.owner_references:
        job_metadata["ownerReferences"] = [dict(reference) for reference in job.owner_references]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": job_metadata,
        "spec": {
            "backoffLimit": job.limits.backoff_limit,
            "activeDeadlineSeconds": job.limits.deadline_seconds,
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "FailJob",
                        "onExitCodes": {
                            "containerName": job.container,
                            "operator": "In",
                            "values": list(FINAL_EXIT_CODES),
                        },
                    }
                ]
            },
            "template": pod,
        },
    }
