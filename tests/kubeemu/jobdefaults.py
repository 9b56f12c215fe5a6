"""What the apiserver's Job strategy fills in at create: unless `spec.manualSelector` is true, the
selector `batch.kubernetes.io/controller-uid=<uid>` and the labels the Pods carry
(`batch.kubernetes.io/controller-uid`, `batch.kubernetes.io/job-name` and their legacy twins) on the
template. Clients that find a Job's Pods by its selector (`kubectl logs job/<name>`, `kubectl
describe job`) need it: a Job without a selector selects nothing."""

from __future__ import annotations

from typing import Any

JOB_STORAGE = "batch/jobs"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID = "controller-uid"
LEGACY_JOB_NAME = "job-name"


def default_job_selector(job: dict[str, Any]) -> None:
    """Fill the generated selector and template labels in `job` (its uid and name already set)."""
    spec = job.setdefault("spec", {})
    if spec.get("manualSelector"):
        return
    meta = job["metadata"]
    uid, name = meta["uid"], meta["name"]
    spec["selector"] = {"matchLabels": {CONTROLLER_UID: uid}}
    template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
    labels = template_meta.get("labels") or {}
    template_meta["labels"] = {
        **labels,
        CONTROLLER_UID: uid,
        JOB_NAME: name,
        LEGACY_CONTROLLER_UID: uid,
        LEGACY_JOB_NAME: name,
    }
