"""The state of a worker Job (publication or materialization), read from its conditions."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any


class JobState(enum.StrEnum):
    NONE = "None"  # no Job
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    GOING_AWAY = "GoingAway"  # deleted, not gone yet


def job_state(job: Mapping[str, Any]) -> JobState:
    """Running, Succeeded or Failed, from the Job's Complete and Failed conditions."""
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return JobState.SUCCEEDED
        if condition.get("type") == "Failed":
            return JobState.FAILED
    return JobState.RUNNING


def is_running(job: Mapping[str, Any]) -> bool:
    return job_state(job) is JobState.RUNNING and not job.get("metadata", {}).get("deletionTimestamp")
