"""Materialize Jobs: what one materialization adds to the materializer's pod template, built by
the shared `controller.jobs.builder` as the publication Jobs are, and their state read back.

A Job fills one shared claim and is named like it, in the workload's namespace, so the claim of an
observation names its Job and a claim name (unique per workload and model set) is never shared by
two Jobs. The Job is owned by the claim (removing the claim removes its Job), its token Secret
`<claim>-token` by the Job; both carry the materialization component label and the workload's
kind, name and uid, so a Job's change maps back to its workload.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Mapping
from typing import Any, Final

from ai_models.controller.delivery.keys import WorkloadKey
from ai_models.controller.jobs.builder import JobLimits, WorkerJob, worker_job
from ai_models.controller.jobs.labels import label_value
from ai_models.domain.conditions import parse_timestamp
from ai_models.domain.delivery.claim_facts import JobRef, MaterializationSeen
from ai_models.domain.delivery.contract import Workload, WorkloadKind
from ai_models.domain.delivery.materialization import (
    CA_SECRET_KEY,
    TOKEN_SECRET_KEY,
    MaterializationOutcome,
    MaterializationRequest,
)
from ai_models.domain.jobs import JobState, job_state
from ai_models.names import (
    COMPONENT_LABEL,
    MATERIALIZATION_COMPONENT,
    MODULE_OBJECT_LABELS,
    OWNER_KIND_LABEL,
    OWNER_NAME_ANNOTATION,
    OWNER_NAME_LABEL,
    OWNER_UID_LABEL,
    SHARED_PVC_VOLUME,
)

MATERIALIZER_CONTAINER: Final = "materialize"
# Where a materialize Job mounts the claim it fills (its TARGET_DIR).
CLAIM_MOUNT: Final = "/data/shared-claim"
TOKEN_SECRET_SUFFIX: Final = "-token"
REGISTRY_SECRET_SUFFIX: Final = "-registry"
DOCKER_CONFIG_KEY: Final = ".dockerconfigjson"
SELECTOR: Final = f"{COMPONENT_LABEL}={MATERIALIZATION_COMPONENT}"


def job_name(claim: str) -> str:
    return claim


def token_secret_name(claim: str) -> str:
    return f"{claim}{TOKEN_SECRET_SUFFIX}"


def registry_secret_name(claim: str) -> str:
    return f"{claim}{REGISTRY_SECRET_SUFFIX}"


def job_labels(workload: Workload) -> dict[str, str]:
    return {
        COMPONENT_LABEL: MATERIALIZATION_COMPONENT,
        **MODULE_OBJECT_LABELS,
        OWNER_KIND_LABEL: str(workload.kind),
        OWNER_NAME_LABEL: label_value(workload.name),
        OWNER_UID_LABEL: workload.uid,
    }


def workload_of_job(obj: Mapping[str, Any]) -> WorkloadKey | None:
    """The workload a materialize Job (or its token Secret) is for; None if it is not one."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    kind = labels.get(OWNER_KIND_LABEL, "")
    name = (meta.get("annotations") or {}).get(OWNER_NAME_ANNOTATION)
    if (
        kind not in tuple(WorkloadKind)
        or not name
        or labels.get(COMPONENT_LABEL) != MATERIALIZATION_COMPONENT
    ):
        return None
    return WorkloadKey(WorkloadKind(kind), str(meta.get("namespace") or ""), str(name))


def _owner(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": False,
    }


def materialize_job(
    template: Mapping[str, Any],
    *,
    workload: Workload,
    claim: str,
    claim_uid: str,
    request: MaterializationRequest,
    limits: JobLimits,
    pull_secret: bool = False,
) -> dict[str, Any]:
    """The Job that runs `request` with the claim `claim` mounted at `request.target_dir`; with
    `pull_secret`, its Pods pull the module image with the copy `registry_secret` makes."""
    return worker_job(
        template,
        WorkerJob(
            name=job_name(claim),
            namespace=workload.namespace,
            container=MATERIALIZER_CONTAINER,
            labels=job_labels(workload),
            annotations={OWNER_NAME_ANNOTATION: workload.name},
            env=request.to_env(token_secret=token_secret_name(claim)),
            termination_message_path=request.termination_message_path,
            limits=limits,
            owner_references=[_owner("v1", "PersistentVolumeClaim", claim, claim_uid)],
            volumes=[{"name": SHARED_PVC_VOLUME, "persistentVolumeClaim": {"claimName": claim}}],
            volume_mounts=[{"name": SHARED_PVC_VOLUME, "mountPath": request.target_dir}],
            image_pull_secrets=[registry_secret_name(claim)] if pull_secret else [],
        ),
    )


def _secret_beside(job: Mapping[str, Any], *, workload: Workload, name: str, type_: str) -> dict[str, Any]:
    """A Secret in the Job's namespace, owned by the (created) Job, so it goes with it."""
    meta = job["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": workload.namespace,
            "labels": job_labels(workload),
            "annotations": {OWNER_NAME_ANNOTATION: workload.name},
            "ownerReferences": [_owner("batch/v1", "Job", str(meta["name"]), str(meta["uid"]))],
        },
        "type": type_,
    }


def token_secret(
    job: Mapping[str, Any], *, workload: Workload, token: str, ca_certificate: str
) -> dict[str, Any]:
    """The Secret the Job reads its delivery token and the module CA's certificate from (the
    certificate only, never the CA's key: it verifies the api's internal TLS listener, D159)."""
    name = token_secret_name(str(job["metadata"]["name"]))
    return {
        **_secret_beside(job, workload=workload, name=name, type_="Opaque"),
        "stringData": {TOKEN_SECRET_KEY: token, CA_SECRET_KEY: ca_certificate},
    }


def registry_secret(job: Mapping[str, Any], *, workload: Workload, docker_config: bytes) -> dict[str, Any]:
    """The module's image pull credentials beside a materialize Job: a user's namespace has none,
    and the Job runs the module image. It lives only as long as the Job (D99)."""
    name = registry_secret_name(str(job["metadata"]["name"]))
    return {
        **_secret_beside(job, workload=workload, name=name, type_="kubernetes.io/dockerconfigjson"),
        "data": {DOCKER_CONFIG_KEY: base64.b64encode(docker_config).decode()},
    }


def materialization_seen(
    job: Mapping[str, Any] | None, *, termination_message: str | None = None, removed_here: bool = False
) -> MaterializationSeen:
    """The Job as the decision sees it; `termination_message` of a failed Job's materializer (only
    the outcome's own message is kept: a log tail is not reported)."""
    if job is None:
        return MaterializationSeen()
    meta = job.get("metadata") or {}
    ref = JobRef(str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(meta.get("uid") or ""))
    if removed_here or meta.get("deletionTimestamp"):
        return MaterializationSeen(JobState.GOING_AWAY, job=ref)
    state = job_state(job)
    if state is JobState.RUNNING:
        return MaterializationSeen(JobState.RUNNING, job=ref)
    finished = _finished(job)
    if state is JobState.SUCCEEDED:
        return MaterializationSeen(JobState.SUCCEEDED, finished=finished, job=ref)
    outcome = MaterializationOutcome.from_json(termination_message)
    return MaterializationSeen(
        JobState.FAILED, message=outcome.message if outcome is not None else "", finished=finished, job=ref
    )


def _finished(job: Mapping[str, Any]) -> datetime.datetime | None:
    status = job.get("status") or {}
    for condition in status.get("conditions") or ():
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            when = parse_timestamp(condition.get("lastTransitionTime"))
            if when is not None:
                return when
    return parse_timestamp(status.get("completionTime"))
