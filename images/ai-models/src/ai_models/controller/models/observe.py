"""Read what a decision needs about one object: its status fields, its publication Job (and, once
the Job ended, its outcome or its manifest), what a failure depends on, and the slots."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ai_models.adapters.objectstore import ObjectNotFound, ObjectStore, ObjectStoreError
from ai_models.controller.jobs.slots import SlotKeeper
from ai_models.controller.models.dependencies import DependencyReader
from ai_models.controller.models.jobs import DIGEST_ANNOTATION, JobApi, job_name
from ai_models.controller.models.steps.context import Subject
from ai_models.domain.artifacts.layout import manifest_key
from ai_models.domain.artifacts.manifest import ArtifactManifest, ManifestFormatError, manifest_from_json
from ai_models.domain.conditions import find_condition, parse_timestamp
from ai_models.domain.jobs import JobState, job_state
from ai_models.domain.models.decision import (
    Dependency,
    JobPhase,
    JobSeen,
    ManifestRead,
    ModelObservation,
    retry_request_of,
)
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.models.source import UploadSource, parse_source
from ai_models.domain.publication.outcome import outcome_from_json
from ai_models.domain.storage.ledger import Owner
from ai_models.names import MODEL_FINALIZER, ModelConditionType, ModelKind, ModelPhase, ModelStatus

_JOB_PHASES = {
    JobState.RUNNING: JobPhase.RUNNING,
    JobState.SUCCEEDED: JobPhase.SUCCEEDED,
    JobState.FAILED: JobPhase.FAILED,
}


def owner_of(obj: Mapping[str, Any]) -> Owner:
    meta = obj["metadata"]
    return Owner(kind=obj["kind"], namespace=meta.get("namespace") or "", name=meta["name"], uid=meta["uid"])


class Observer:
    def __init__(
        self,
        *,
        job_cache: Callable[[], Iterable[Mapping[str, Any]]],
        jobs: JobApi,
        store: ObjectStore,
        dependencies: DependencyReader,
        slots: SlotKeeper,
    ) -> None:
        self._job_cache = job_cache
        self._jobs = jobs
        self._store = store
        self._dependencies = dependencies
        self._slots = slots

    def observe(self, key: ModelKey, obj: dict[str, Any], *, damage: str | None = None) -> Subject:
        obj.setdefault("kind", key.kind.value)
        owner = owner_of(obj)
        meta = obj["metadata"]
        status = obj.get("status") or {}
        conditions = status.get("conditions")
        artifact = find_condition(conditions, ModelConditionType.ARTIFACT_RESOLVED) or {}
        ready = find_condition(conditions, ModelConditionType.READY) or {}
        source = parse_source(owner.kind, owner.namespace, (obj.get("spec") or {}).get("source"))
        job, manifest, manifest_bytes = self._job(owner)
        phase = _phase(status.get("phase"))
        dependency: Dependency | None = None
        if (
            phase is not ModelPhase.READY
            and job.phase in (JobPhase.NONE, JobPhase.FAILED)
            and not meta.get("deletionTimestamp")
        ):
            dependency = self._dependencies.read(source)
        observed_generation = status.get("observedGeneration")
        seen = ModelObservation(
            kind=ModelKind(owner.kind),
            generation=int(meta.get("generation") or 0),
            observed_generation=int(observed_generation) if isinstance(observed_generation, int) else None,
            phase=phase,
            artifact_reason=artifact.get("reason"),
            artifact_message=str(artifact.get("message") or ""),
            ready_since=parse_timestamp(ready.get("lastTransitionTime")),
            has_finalizer=MODEL_FINALIZER in (meta.get("finalizers") or []),
            deleting=bool(meta.get("deletionTimestamp")),
            upload_source=isinstance(source, UploadSource),
            failed_attempts=_count(status.get(ModelStatus.FAILED_ATTEMPTS)),
            last_failure=parse_timestamp(status.get(ModelStatus.LAST_FAILURE_TIME)),
            last_failure_dependency=Dependency.from_status(status.get(ModelStatus.LAST_FAILURE_DEPENDENCY)),
            dependency=dependency,
            retry_request=retry_request_of(meta.get("annotations")),
            upload_expires_at=parse_timestamp((status.get("upload") or {}).get("expiresAt")),
            damage=damage,
            job=job,
            running_publications=self._slots.running(),
            max_publications=self._slots.limit,
        )
        return Subject(
            key=key, obj=obj, owner=owner, seen=seen, manifest=manifest, manifest_bytes=manifest_bytes
        )

    def _job(self, owner: Owner) -> tuple[JobSeen, ArtifactManifest | None, int]:
        name = job_name(owner)
        job = next((item for item in self._job_cache() if item["metadata"]["name"] == name), None)
        if job is None:
            return JobSeen(), None, 0
        uid = str(job["metadata"].get("uid", ""))
        if job["metadata"].get("deletionTimestamp") or self._slots.is_ended(uid):
            return JobSeen(JobPhase.GOING_AWAY, uid=uid), None, 0
        phase = _JOB_PHASES[job_state(job)]
        digest = str((job["metadata"].get("annotations") or {}).get(DIGEST_ANNOTATION, ""))
        if phase is JobPhase.FAILED:
            outcome = outcome_from_json(self._jobs.termination_message(job))
            return JobSeen(phase, digest, uid, outcome=outcome), None, 0
        if phase is JobPhase.SUCCEEDED:
            try:
                stored = self._store.get_bytes(manifest_key(owner, digest))
                manifest = manifest_from_json(stored)
            except (ObjectNotFound, ManifestFormatError, ValueError) as error:
                return (
                    JobSeen(phase, digest, uid, manifest=ManifestRead.MISSING, manifest_problem=str(error)),
                    None,
                    0,
                )
            except ObjectStoreError as error:
                return (
                    JobSeen(
                        phase, digest, uid, manifest=ManifestRead.UNAVAILABLE, manifest_problem=str(error)
                    ),
                    None,
                    0,
                )
            return JobSeen(phase, digest, uid, manifest=ManifestRead.READABLE), manifest, len(stored)
        return JobSeen(phase, digest, uid), None, 0


def _phase(value: object) -> ModelPhase | None:
    try:
        return ModelPhase(str(value)) if value else None
    except ValueError:
        return None


def _count(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0
