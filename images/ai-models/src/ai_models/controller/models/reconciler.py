"""One reconcile of one Model or ClusterModel: level-triggered, idempotent, safe to repeat.

Each call looks at the object, its publication Job (if any) and the object store, and moves the
object one step: finalizer, waiting for an upload, planning and reserving, starting the Job,
finishing it (manifest -> ledger commit -> Ready) or failing it, re-publishing a damaged artifact,
and cleaning up on deletion. The return value says when to look again (None: on the next event).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import logging
import secrets
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from ai_models.adapters.kube.ledger_store import LedgerStoreError
from ai_models.adapters.objectstore import ObjectNotFound, ObjectStore, ObjectStoreError
from ai_models.controller.models.jobs import (
    DIGEST_ANNOTATION,
    JobApi,
    JobLimits,
    JobState,
    ObjectRefused,
    PodTemplateError,
    is_running,
    job_name,
    job_state,
    publication_env,
    publication_job,
    token_env,
    token_secret,
)
from ai_models.controller.models.kube import ModelKey, ModelObjects
from ai_models.controller.models.planning import AwaitingUpload, Deferred, Plan, Planner, Refused
from ai_models.controller.storage.accounting import Accounting
from ai_models.domain.artifacts.layout import (
    artifact_prefix,
    manifest_key,
    owner_prefix,
    scope_of,
    upload_prefix,
)
from ai_models.domain.artifacts.manifest import ArtifactManifest, ManifestFormatError, manifest_from_json
from ai_models.domain.artifacts.profile import is_complete
from ai_models.domain.conditions import find_condition, timestamp
from ai_models.domain.models import status as situations
from ai_models.domain.models.source import parse_source
from ai_models.domain.publication.outcome import PublicationOutcome, outcome_from_json
from ai_models.domain.publication.upload_token import issue
from ai_models.domain.storage.ledger import Owner, Refusal
from ai_models.names import (
    MODEL_FINALIZER,
    UPLOAD_SIGNING_KEY,
    UPLOAD_SIGNING_SECRET,
    UPLOADS_PATH,
    ModelConditionType,
    ModelEvent,
    ModelPhase,
    ModelReason,
    SourceType,
)

log = logging.getLogger(__name__)
# A publication that failed for a reason the publisher calls temporary is retried this many times
# (each a new Job) before the object is marked Failed.
MAX_ATTEMPTS = 3


@dataclasses.dataclass(frozen=True)
class ReconcilerSettings:
    namespace: str
    store_url: str
    max_concurrent_publications: int
    limits: JobLimits
    retry_failed_seconds: float
    upload_token_ttl: datetime.timedelta
    upload_poll_seconds: float
    upload_in_cluster_url: str
    upload_public_url: str | None


def owner_of(obj: Mapping[str, Any]) -> Owner:
    meta = obj["metadata"]
    return Owner(kind=obj["kind"], namespace=meta.get("namespace") or "", name=meta["name"], uid=meta["uid"])


class Reconciler:
    def __init__(
        self,
        *,
        objects: ModelObjects,
        jobs: JobApi,
        job_cache: Callable[[], list[dict[str, Any]]],
        planner: Planner,
        store: ObjectStore,
        accounting: Accounting,
        api_client: Any,
        pod_template: Callable[[], Mapping[str, Any]],
        settings: ReconcilerSettings,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self.objects = objects
        self.jobs = jobs
        self.job_cache = job_cache
        self.planner = planner
        self.store = store
        self.accounting = accounting
        self.api_client = api_client
        self.pod_template = pod_template
        self.settings = settings
        self.clock = clock
        self._attempts: dict[str, int] = {}
        self._failed_at: dict[str, datetime.datetime] = {}  # by uid: when the last attempt failed
        self._waiting_for_slot: set[ModelKey] = set()
        self._lock = threading.Lock()
        self._signing_key: bytes | None = None
        self.on_slot_freed: Callable[[set[ModelKey]], None] = lambda keys: None
        self.on_published: Callable[[str], None] = lambda result: None

    # ----- entry point --------------------------------------------------------------------------

    def reconcile(self, key: ModelKey) -> float | None:
        with self.accounting.lock.shared():
            obj = self.objects.get(key)
            if obj is None:
                with self._lock:
                    self._waiting_for_slot.discard(key)
                return None
            obj.setdefault("kind", key.kind.value)
            owner = owner_of(obj)
            if obj["metadata"].get("deletionTimestamp"):
                return self._delete(key, obj, owner)
            if MODEL_FINALIZER not in (obj["metadata"].get("finalizers") or []):
                self.objects.add_finalizer(obj)
                return None  # the finalizer's own update event brings the object back
            job = self._job_of(owner)
            if job is not None:
                return self._follow(key, obj, owner, job)
            return self._without_job(key, obj, owner)

    # ----- steps ------------------------------------------------------------------------------

    def _without_job(self, key: ModelKey, obj: dict[str, Any], owner: Owner) -> float | None:
        status = obj.get("status") or {}
        phase = status.get("phase")
        artifact_reason = (
            find_condition(status.get("conditions"), ModelConditionType.ARTIFACT_RESOLVED) or {}
        ).get("reason")
        damaged = artifact_reason == ModelReason.ARTIFACT_DAMAGED and phase != ModelPhase.READY
        if phase == ModelPhase.READY:
            return None
        if phase == ModelPhase.FAILED:
            if artifact_reason in situations.FINAL_REASONS:
                return None
            wait = self._retry_wait(owner, status)
            if wait > 0:
                return wait
        source = parse_source(owner.kind, owner.namespace, (obj.get("spec") or {}).get("source"))
        outcome = self.planner.plan(owner, source)
        if isinstance(outcome, AwaitingUpload):
            return self._await_upload(key, obj, owner)
        if isinstance(outcome, Refused):
            self._fail(key, obj, owner, outcome.reason, outcome.message, digest=None)
            return self._retry_wait(owner, obj.get("status") or {}) or self.settings.retry_failed_seconds
        if isinstance(outcome, Deferred):
            self._show(key, obj, situations.pending(outcome.message))
            return outcome.retry_seconds
        return self._start(key, obj, owner, outcome, damaged=damaged)

    def _start(
        self, key: ModelKey, obj: dict[str, Any], owner: Owner, plan: Plan, *, damaged: bool
    ) -> float | None:
        running = sum(1 for job in self.job_cache() if is_running(job))
        if running >= self.settings.max_concurrent_publications:
            with self._lock:
                self._waiting_for_slot.add(key)
            limit = self.settings.max_concurrent_publications
            self._show(
                key, obj, situations.pending(f"waiting for a publication slot: {running} of {limit} running")
            )
            return None
        with self._lock:
            self._waiting_for_slot.discard(key)
        env = publication_env(owner, digest=plan.digest, source=plan.env)
        if plan.token is not None:
            env.append(token_env(owner))
        try:
            # Built before reserving: a Job that cannot be built must not leave a reservation.
            template = self.pod_template()
        except (PodTemplateError, RuntimeError) as error:
            log.error("cannot build the publication Job", extra={"object": str(key), "error": str(error)})
            message = (
                "the controller cannot read its publisher pod template (ConfigMap "
                "ai-models-publisher-template in the module namespace); an administrator finds the cause "
                "in the controller's log"
            )
            self._fail(key, obj, owner, ModelReason.PUBLICATION_FAILED, message, digest=None)
            return self.settings.retry_failed_seconds
        job = publication_job(
            template,
            owner=owner,
            namespace=self.settings.namespace,
            digest=plan.digest,
            env=env,
            limits=self.settings.limits,
        )
        secret = (
            token_secret(owner, namespace=self.settings.namespace, token=plan.token) if plan.token else None
        )
        try:
            refusal = self.accounting.reserve(owner, scope_of(owner.kind), plan.size_bytes)
        except LedgerStoreError as error:
            self._show(key, obj, situations.pending(f"cannot reserve storage yet: {error}"))
            return 10.0
        if refusal is not None:
            self._fail(
                key, obj, owner, ModelReason(refusal.value), self._refusal_message(refusal, plan), digest=None
            )
            return self.settings.retry_failed_seconds
        try:
            self.jobs.create(job, secret)
        except ObjectRefused as error:
            return self._not_started(key, obj, owner, error)
        what = f"{plan.resolved_type} source" + (f" at {plan.revision}" if plan.revision else "")
        message = f"publishing {plan.size_bytes} bytes from the {what} as {plan.digest}"
        if damaged:
            message = "re-publishing the damaged artifact: " + message
        self._show(
            key,
            obj,
            situations.publishing(message, damaged=damaged),
            extra={
                "progress": "0%",
                "source": {"resolvedType": plan.resolved_type.value}
                | ({"resolvedRevision": plan.revision} if plan.revision else {}),
                "upload": None,
            },
        )
        self.objects.event(obj, type_="Normal", reason=ModelEvent.PUBLICATION_STARTED, message=message)
        return None

    def _not_started(self, key: ModelKey, obj: dict[str, Any], owner: Owner, error: ObjectRefused) -> float:
        """The Job or its Secret could not be written: nothing runs, so nothing stays reserved."""
        try:
            self.jobs.delete(owner)  # a Secret created before the Job was refused
        except ApiException as cleanup_error:
            log.warning(
                "cannot remove the publication objects; the next attempt replaces them",
                extra={"object": str(key), "error": str(cleanup_error)},
            )
        log.warning("publication not started", extra={"object": str(key), "error": str(error)})
        if error.temporary:
            try:
                self.accounting.release_reservation(owner)
            except LedgerStoreError as ledger_error:
                log.warning(
                    "cannot release the reservation now; the inventory pass will",
                    extra={"error": str(ledger_error)},
                )
            self._show(key, obj, situations.pending(f"{error}; retrying"))
            return 10.0
        if error.status == 403:
            fix = (
                "the controller's ServiceAccount may not do it or an admission policy denies it; check "
                f"the module's RBAC and the cluster's policies for namespace {error.namespace}"
            )
        else:
            fix = (
                "the API server or an admission webhook refuses the object; check the cluster's "
                "admission policies, or report it with the controller's log"
            )
        self._fail(key, obj, owner, ModelReason.PUBLICATION_FAILED, f"{error}: {fix}", digest=None)
        return self._retry_wait(owner, obj.get("status") or {}) or self.settings.retry_failed_seconds

    def _follow(
        self, key: ModelKey, obj: dict[str, Any], owner: Owner, job: Mapping[str, Any]
    ) -> float | None:
        state = job_state(job)
        if job["metadata"].get("deletionTimestamp"):
            return 1.0  # the previous Job is going away; start anew once it is gone
        if state is JobState.RUNNING:
            status = obj.get("status") or {}
            if status.get("phase") != ModelPhase.PUBLISHING:
                self._show(key, obj, situations.publishing("publishing"))
            return None
        digest = str(job["metadata"].get("annotations", {}).get(DIGEST_ANNOTATION, ""))
        if state is JobState.SUCCEEDED:
            return self._finish(key, obj, owner, digest)
        outcome = outcome_from_json(self.jobs.termination_message(job))
        return self._job_failed(key, obj, owner, digest, outcome)

    def _finish(self, key: ModelKey, obj: dict[str, Any], owner: Owner, digest: str) -> float | None:
        try:
            stored_manifest = self.store.get_bytes(manifest_key(owner, digest))
            manifest = manifest_from_json(stored_manifest)
        except (ObjectNotFound, ManifestFormatError, ValueError) as error:
            outcome = PublicationOutcome(
                ModelReason.PUBLICATION_FAILED,
                f"the publication Job succeeded but left no readable manifest ({error})",
                retryable=True,
            )
            return self._job_failed(key, obj, owner, digest, outcome)
        except ObjectStoreError as error:
            log.warning("cannot read the manifest yet", extra={"object": str(key), "error": str(error)})
            return 10.0
        try:
            # The ledger counts every stored byte of the artifact, its manifest included, so an
            # inventory pass (which sums what the store lists) arrives at the same figure.
            self.accounting.commit(owner, scope_of(owner.kind), manifest.size_bytes + len(stored_manifest))
        except LedgerStoreError as error:
            log.warning(
                "cannot commit the artifact to the ledger yet",
                extra={"object": str(key), "error": str(error)},
            )
            return 5.0
        self._remove_other_artifacts(owner, keep=digest)
        self._ready(key, obj, owner, manifest)
        self._finish_job(owner)
        self.on_published("succeeded")
        return None

    def _ready(self, key: ModelKey, obj: dict[str, Any], owner: Owner, manifest: ArtifactManifest) -> None:
        resolved = dict(manifest.resolved)
        complete = is_complete(resolved)
        message = (
            f"artifact {manifest.digest} published: {len(manifest.files)} files, {manifest.size_bytes} bytes"
        )
        metadata_message = (
            "the profile has every fact inference runtimes size themselves by"
            if complete
            else "some facts of the profile could not be derived from the model files"
        )
        source: dict[str, Any] = {"resolvedType": self._resolved_type(obj, manifest)}
        if manifest.source.revision:
            source["resolvedRevision"] = manifest.source.revision
        self._show(
            key,
            obj,
            situations.ready(message, metadata_complete=complete, metadata_message=metadata_message),
            extra={
                "progress": None,
                "upload": None,
                "source": source,
                "artifact": {
                    "uri": f"{self.settings.store_url.rstrip('/')}/{artifact_prefix(owner, manifest.digest)}",
                    "digest": manifest.digest,
                    "sizeBytes": manifest.size_bytes,
                },
                "resolved": resolved,
            },
        )
        self.objects.event(obj, type_="Normal", reason=ModelEvent.PUBLICATION_SUCCEEDED, message=message)
        with self._lock:
            self._attempts.pop(owner.uid, None)
            self._failed_at.pop(owner.uid, None)

    @staticmethod
    def _resolved_type(obj: Mapping[str, Any], manifest: ArtifactManifest) -> str:
        if ((obj.get("spec") or {}).get("source") or {}).get("catalog") is not None:
            return SourceType.CATALOG.value
        return manifest.source.type.value

    def _job_failed(
        self,
        key: ModelKey,
        obj: dict[str, Any],
        owner: Owner,
        digest: str,
        outcome: PublicationOutcome | None,
    ) -> float | None:
        self._remove_partial(owner, digest)
        with self._lock:
            attempts = self._attempts[owner.uid] = self._attempts.get(owner.uid, 0) + 1
        retryable = outcome is None or outcome.retryable
        detail = outcome.message if outcome is not None else "the publication Pod ended without a result"
        if retryable and attempts < MAX_ATTEMPTS:
            damaged = outcome is not None and outcome.reason is ModelReason.ARTIFACT_DAMAGED
            event = ModelEvent.ARTIFACT_DAMAGED if damaged else ModelEvent.PUBLICATION_FAILED
            self.objects.event(
                obj,
                type_="Warning",
                reason=event,
                message=f"attempt {attempts} of {MAX_ATTEMPTS} failed: {detail}; retrying",
            )
            self._finish_job(owner)
            return 1.0
        reason = ModelReason.PUBLICATION_FAILED
        if outcome is not None and outcome.reason in situations.FAILURE_REASONS:
            reason = outcome.reason
        if ((obj.get("spec") or {}).get("source") or {}).get("upload") is not None:
            self._finish_job(owner)
            with self._lock:
                self._attempts.pop(owner.uid, None)
            self.on_published("failed")
            return self._reject_upload(key, obj, owner, f"{reason}: {detail}")
        self._fail(key, obj, owner, reason, detail, digest=digest)
        self._finish_job(owner)
        with self._lock:
            self._attempts.pop(owner.uid, None)
        self.on_published("failed")
        return self.settings.retry_failed_seconds

    def _fail(
        self,
        key: ModelKey,
        obj: dict[str, Any],
        owner: Owner,
        reason: ModelReason,
        message: str,
        *,
        digest: str | None,
    ) -> None:
        try:
            self.accounting.release_reservation(owner)
        except LedgerStoreError as error:
            log.warning(
                "cannot release the reservation now; the inventory pass will", extra={"error": str(error)}
            )
        with self._lock:
            self._failed_at[owner.uid] = self.clock()
        situation = situations.failed(reason, message)
        if situations.shows(obj.get("status"), situation):
            return
        self._show(key, obj, situation, extra={"progress": None})
        self.objects.event(
            obj, type_="Warning", reason=ModelEvent.PUBLICATION_FAILED, message=f"{reason}: {message}"
        )

    def _finish_job(self, owner: Owner) -> None:
        self.jobs.delete(owner)
        with self._lock:
            waiting = set(self._waiting_for_slot)
        if waiting:
            self.on_slot_freed(waiting)

    # ----- upload -----------------------------------------------------------------------------

    def _reject_upload(self, key: ModelKey, obj: dict[str, Any], owner: Owner, detail: str) -> float | None:
        """The uploaded payload cannot be published: drop it and ask for a new upload.

        Publishing the same payload again would fail the same way, and the object cannot be
        given another one while it shows Failed; a fresh URL lets the user try another file."""
        try:
            self.store.delete_prefix(upload_prefix(owner))
        except ObjectStoreError as error:
            log.warning(
                "cannot remove the rejected upload; the inventory pass will", extra={"error": str(error)}
            )
        try:
            self.accounting.release_reservation(owner)
        except LedgerStoreError as error:
            log.warning(
                "cannot release the reservation now; the inventory pass will", extra={"error": str(error)}
            )
        message = f"the uploaded file could not be published ({detail}); upload a model file again"
        self.objects.event(obj, type_="Warning", reason=ModelEvent.PUBLICATION_FAILED, message=message)
        (obj.setdefault("status", {}))["upload"] = None
        return self._await_upload(key, obj, owner, note=message)

    def _await_upload(
        self, key: ModelKey, obj: dict[str, Any], owner: Owner, *, note: str | None = None
    ) -> float | None:
        status = obj.get("status") or {}
        upload = status.get("upload") or {}
        now = self.clock()
        expires = _parse_time(upload.get("expiresAt"))
        renew_before = self.settings.upload_token_ttl / 6
        if (
            status.get("phase") == ModelPhase.WAIT_FOR_UPLOAD
            and expires is not None
            and expires - now > renew_before
        ):
            return self.settings.upload_poll_seconds
        expires_at = now + self.settings.upload_token_ttl
        token = issue(owner, expires_at=expires_at, key=self._upload_key())
        urls: dict[str, Any] = {
            "expiresAt": timestamp(expires_at),
            "inCluster": f"{self.settings.upload_in_cluster_url.rstrip('/')}{UPLOADS_PATH}{token}",
        }
        if self.settings.upload_public_url:
            urls["external"] = f"{self.settings.upload_public_url.rstrip('/')}{UPLOADS_PATH}{token}"
        message = (
            f"waiting for the model file: PUT it to the URL in status.upload before {urls['expiresAt']}, "
            "with the bearer token of a subject allowed to update this object (a newer URL replaces it)"
        )
        if note is not None:
            message = f"{note}; {message}"
        first = status.get("phase") != ModelPhase.WAIT_FOR_UPLOAD
        self._show(
            key,
            obj,
            situations.waiting_for_upload(message),
            extra={"upload": urls, "source": {"resolvedType": SourceType.UPLOAD.value}},
        )
        if first:
            self.objects.event(obj, type_="Normal", reason=ModelEvent.UPLOAD_WAITING, message=message)
        return self.settings.upload_poll_seconds

    def _upload_key(self) -> bytes:
        """The upload signing key, created on first use (the api reads the same Secret)."""
        if self._signing_key is not None:
            return self._signing_key
        core = k8s.CoreV1Api(self.api_client)
        namespace = self.settings.namespace
        try:
            secret = core.read_namespaced_secret(UPLOAD_SIGNING_SECRET, namespace)
            key = base64.b64decode((secret.data or {}).get(UPLOAD_SIGNING_KEY, ""))
        except ApiException as error:
            if error.status != 404:
                raise
            key = b""
        if not key:
            key = secrets.token_bytes(32)
            body = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": UPLOAD_SIGNING_SECRET,
                    "namespace": namespace,
                    "labels": {"module": "ai-models", "heritage": "deckhouse"},
                },
                "type": "Opaque",
                "data": {UPLOAD_SIGNING_KEY: base64.b64encode(key).decode()},
            }
            try:
                core.create_namespaced_secret(namespace, body)
            except ApiException as error:
                if error.status != 409:
                    raise
                secret = core.read_namespaced_secret(UPLOAD_SIGNING_SECRET, namespace)
                key = base64.b64decode((secret.data or {}).get(UPLOAD_SIGNING_KEY, ""))
        self._signing_key = key
        return key

    # ----- damage -------------------------------------------------------------------------------

    def mark_damaged(self, key: ModelKey, detail: str) -> None:
        """Called by the inventory pass: the Ready object's artifact is damaged; publish it again."""
        obj = self.objects.get(key)
        if obj is None or (obj.get("status") or {}).get("phase") != ModelPhase.READY:
            return
        obj.setdefault("kind", key.kind.value)
        owner = owner_of(obj)
        digest = ((obj.get("status") or {}).get("artifact") or {}).get("digest")
        if digest:
            self._remove_partial(owner, str(digest))
        message = f"the published artifact is damaged ({detail}); re-publishing it"
        self._show(key, obj, situations.publishing(message, damaged=True), extra={"progress": None})
        self.objects.event(obj, type_="Warning", reason=ModelEvent.ARTIFACT_DAMAGED, message=message)

    # ----- deletion -----------------------------------------------------------------------------

    def _delete(self, key: ModelKey, obj: dict[str, Any], owner: Owner) -> float | None:
        if MODEL_FINALIZER not in (obj["metadata"].get("finalizers") or []):
            return None
        if (obj.get("status") or {}).get("phase") != ModelPhase.DELETING:
            self._show(key, obj, situations.deleting("removing the artifact and its storage accounting"))
        self.jobs.delete(owner)
        try:
            self.store.delete_prefix(owner_prefix(owner))
            self.store.delete_prefix(upload_prefix(owner))
        except ObjectStoreError as error:
            message = f"cannot remove the artifact yet: {error}; retrying until the object store answers"
            self.objects.event(obj, type_="Warning", reason=ModelEvent.CLEANUP_FAILED, message=message)
            log.warning("artifact cleanup failed; retrying", extra={"object": str(key), "error": str(error)})
            return 10.0
        try:
            self.accounting.release(owner)
        except LedgerStoreError as error:
            log.warning(
                "cannot release the ledger entries yet", extra={"object": str(key), "error": str(error)}
            )
            return 5.0
        self.objects.remove_finalizer(obj)
        with self._lock:
            # Nothing of a deleted object stays behind, however many objects come and go.
            self._attempts.pop(owner.uid, None)
            self._failed_at.pop(owner.uid, None)
            self._waiting_for_slot.discard(key)
        return None

    # ----- helpers ----------------------------------------------------------------------------

    def _job_of(self, owner: Owner) -> dict[str, Any] | None:
        name = job_name(owner)
        return next((job for job in self.job_cache() if job["metadata"]["name"] == name), None)

    def _show(
        self,
        key: ModelKey,
        obj: dict[str, Any],
        situation: situations.Situation,
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        status = obj.get("status") or {}
        patch = situations.status_patch(
            situation,
            conditions=status.get("conditions"),
            generation=int(obj["metadata"].get("generation") or 0),
            now=self.clock(),
        )
        patch.update(extra or {})
        self.objects.patch_status(key, patch)
        obj["status"] = {**status, **{k: v for k, v in patch.items() if v is not None}}

    def _retry_wait(self, owner: Owner, status: Mapping[str, Any]) -> float:
        """Seconds until a failed object is tried again: `retry_failed_seconds` after the last failed
        attempt (after a restart, after the Ready condition last changed)."""
        with self._lock:
            since = self._failed_at.get(owner.uid)
        if since is None:
            ready = find_condition(status.get("conditions"), ModelConditionType.READY) or {}
            since = _parse_time(ready.get("lastTransitionTime"))
        if since is None:
            return 0.0
        due = since + datetime.timedelta(seconds=self.settings.retry_failed_seconds)
        return max((due - self.clock()).total_seconds(), 0.0)

    def _refusal_message(self, refusal: Refusal, plan: Plan) -> str:
        if refusal is Refusal.STORAGE_USAGE_UNKNOWN:
            return (
                f"cannot reserve {plan.size_bytes} bytes: storage usage is unknown until the inventory pass "
                "confirms the ledger (Secret ai-models-storage-accounting); publication resumes after it"
            )
        return (
            f"the artifact needs {plan.size_bytes} bytes, more than the free part of the storage budget "
            "(setting artifacts.capacityLimit of ModuleConfig ai-models); delete unused models or raise "
            "the limit"
        )

    def _remove_partial(self, owner: Owner, digest: str) -> None:
        if not digest:
            return
        try:
            self.store.delete(manifest_key(owner, digest))
            self.store.delete_prefix(artifact_prefix(owner, digest))
        except (ObjectStoreError, ValueError) as error:
            log.warning(
                "cannot remove a partial artifact; the inventory pass will", extra={"error": str(error)}
            )

    def _remove_other_artifacts(self, owner: Owner, *, keep: str) -> None:
        keep_prefix = artifact_prefix(owner, keep)
        try:
            for prefix in self.store.list_prefixes(owner_prefix(owner)):
                if prefix != keep_prefix:
                    self.store.delete_prefix(prefix)
            self.store.delete_prefix(upload_prefix(owner))
        except ObjectStoreError as error:
            log.warning(
                "cannot remove superseded artifacts; the inventory pass will", extra={"error": str(error)}
            )


def _parse_time(value: object) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)
