"""SharedPVC delivery in the controller process (`strategy.DeliveryStrategy`).

It follows the PersistentVolumes (name and phase: whether a bound claim's volume still exists) and
the materialize Jobs (their component label), indexed by workload: a volume's change wakes the
owners of the claims bound to it, a Job's change its workload, and a Job that stops running the
workloads that wait for a slot. Its facts of a workload (`ClaimFacts`) are the claim named for the
current model set, its volume, its Job, the class a new claim would get (asked only when there is
no claim yet), the cluster's running materializations from the slot keeper, and the
ProvisioningFailed Events of a Pending claim with one server-side filtered list (one page, the
claim's name and kind), which `claim_facts.provisioning_failure` then believes only for the claim's
uid. The webhook reads the wanted claim with one GET. Its effects: the claim, its patch, and the
materialize Job with its delivery token.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.events import listed_events
from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.jobs import Jobs
from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import JOBS, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES
from ai_models.controller.delivery.informers import DeliveryInformers
from ai_models.controller.delivery.jobs import (
    CLAIM_MOUNT,
    MATERIALIZER_CONTAINER,
    SELECTOR,
    job_name,
    materialization_seen,
    materialize_job,
    registry_secret,
    token_secret,
    workload_of_job,
)
from ai_models.controller.delivery.keys import WorkloadKey
from ai_models.controller.delivery.steps.context import StepContext
from ai_models.controller.delivery.steps.report import write_report
from ai_models.controller.delivery.strategy import DONE, Handler, Step, Subject, Triggers, Unreadable
from ai_models.controller.jobs.builder import JobLimits
from ai_models.controller.jobs.signing_keys import SigningKeys
from ai_models.controller.jobs.slots import SlotKeeper, SlotWaiters, namespaced_job_name
from ai_models.controller.runtime import Manager
from ai_models.controller.settings import ControllerSettings
from ai_models.domain.delivery import token
from ai_models.domain.delivery.claim_facts import (
    CLAIM_KIND,
    ClaimFacts,
    ClaimSeen,
    MaterializationSeen,
    provisioning_failure,
    wanted_claim,
)
from ai_models.domain.delivery.claims import ClassChoice
from ai_models.domain.delivery.contract import DeliveryRequest
from ai_models.domain.delivery.effects import (
    CreateClaim,
    PatchClaim,
    RemoveJob,
    StartMaterialization,
    WaitForSlot,
)
from ai_models.domain.delivery.materialization import (
    PEM_CERTIFICATE,
    MaterializationRequest,
    RequestedArtifact,
)
from ai_models.domain.delivery.modes.shared_pvc import SLOT_RECHECK_SECONDS, Policy, SharedPVC
from ai_models.domain.delivery.report import DeliveryReport
from ai_models.domain.delivery.token import DEFAULT_LIFETIME
from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.jobs import JobState, is_running
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage.prerequisites import ClaimPhase
from ai_models.names import (
    DELIVERY_SIGNING_KEY,
    DELIVERY_SIGNING_SECRET,
    MODULE_CA_CONFIGMAP,
    MODULE_NAMESPACE,
    DeliveryReason,
)

# One page of a claim's Events: a provisioner retrying for hours aggregates into one Event per
# message, so the latest failure is in the first page.
EVENTS_LIMIT: Final = 50
BY_WORKLOAD: Final = "workload"
DEFAULT_LIMITS: Final = JobLimits(backoff_limit=3, deadline_seconds=6 * 3600)
# (connect, read) of each read of the webhook: the API server gives the whole webhook call 5 s.
ADMISSION_TIMEOUT: Final = (1.0, 1.5)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SharedPVCSettings:
    """`api_url`: the serving API as materializers reach it (https, the api's internal TLS port);
    `ca_file`: the module CA's certificate in the controller's pod, read for every Job and copied
    into its token Secret (D159)."""

    api_url: str
    ca_file: Path | None = None
    max_concurrent_materializations: int = 2
    provisioning_deadline: datetime.timedelta = datetime.timedelta(minutes=10)
    materialization_retry: datetime.timedelta = datetime.timedelta(minutes=5)
    limits: JobLimits = DEFAULT_LIMITS
    token_lifetime: datetime.timedelta = DEFAULT_LIFETIME
    claim_mount: str = CLAIM_MOUNT

    @property
    def policy(self) -> Policy:
        return Policy(
            provisioning_deadline=self.provisioning_deadline, materialization_retry=self.materialization_retry
        )


def module_ca_certificate(path: Path | None) -> tuple[str | None, str]:
    """The module CA's certificate (PEM) a materializer verifies the api with, or why there is none
    (a materializer never falls back to plain http, D159)."""
    if path is None:
        return None, (
            f"the controller has no module CA certificate to give the materializer "
            f"({ControllerSettings.variable('delivery_api_ca_file')} is not set); the module's Helm "
            "chart sets it once the internal TLS hook has made the CA"
        )
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as error:
        return None, (
            f"the module CA certificate {path} cannot be read ({type(error).__name__}); the ConfigMap "
            f"{MODULE_CA_CONFIGMAP} is rendered once the internal TLS hook has made the CA"
        )
    if PEM_CERTIFICATE not in text:
        return None, (
            f"the module CA certificate {path} holds no PEM certificate; check the ConfigMap "
            f"{MODULE_CA_CONFIGMAP}"
        )
    return text, ""


def trim_volume(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {"name": meta.get("name")},
        "status": {"phase": (obj.get("status") or {}).get("phase")},
    }


def job_workload(obj: Mapping[str, Any]) -> Iterable[str]:
    key = workload_of_job(obj)
    return [key.index_value] if key is not None else []


def fills(job: Mapping[str, Any], claim: Mapping[str, Any]) -> bool:
    """Whether the materialize Job was made for this claim (its owner is the claim's uid), not for
    an earlier claim of the same name."""
    uid = (claim.get("metadata") or {}).get("uid")
    owners = (job.get("metadata") or {}).get("ownerReferences") or ()
    return bool(uid) and any(
        isinstance(ref, Mapping) and ref.get("kind") == CLAIM_KIND and ref.get("uid") == uid for ref in owners
    )


def claim_facts(
    *,
    claim: Mapping[str, Any] | None = None,
    volume_exists: bool = True,
    events: Sequence[Mapping[str, Any]] = (),
    materialization: MaterializationSeen | None = None,
    storage: ClassChoice | None = None,
    running: int = 0,
    limit: int = 2,
) -> ClaimFacts:
    """The facts from the objects read for a workload; `claim` must be the claim named for the
    current model set (`claim_name`), `events` those listed for that claim."""
    seen = ClaimSeen.of(claim, volume_exists=volume_exists) if claim is not None else None
    failure = (
        provisioning_failure(events, claim_uid=seen.uid)
        if seen is not None and seen.phase is ClaimPhase.PENDING
        else None
    )
    return ClaimFacts(
        storage=storage or ClassChoice(None),
        claim=seen,
        provisioning_failure=failure,
        materialization=materialization or MaterializationSeen(),
        materializations_running=running,
        materializations_limit=limit,
    )


class SharedPVCDelivery(SlotWaiters[WorkloadKey]):
    def __init__(
        self,
        api_client: Any,
        *,
        informers: DeliveryInformers,
        settings: SharedPVCSettings,
        storage_class: Callable[[], ClassChoice],
        materializer_template: Callable[[], Mapping[str, Any]],
        registry_credentials: Callable[[], bytes | None] = lambda: None,
        module_namespace: str = MODULE_NAMESPACE,
    ) -> None:
        super().__init__()
        self.rules = SharedPVC(settings.policy)
        self.settings = settings
        self._api_client = api_client
        self._volume_reads = Objects(api_client, PERSISTENT_VOLUMES)
        self._claims = informers.claims
        self._storage_class = storage_class
        self._materializer_template = materializer_template
        self._registry_credentials = registry_credentials
        self.volumes = Informer(
            api_client, PERSISTENT_VOLUMES, name="delivery-volumes", transform=trim_volume
        )
        self.jobs = Informer(
            api_client,
            JOBS,
            name="materialize-jobs",
            label_selector=SELECTOR,
            indexers={BY_WORKLOAD: job_workload},
        )
        # Only the leader creates Jobs, so one keeper in this process sees every Job it creates.
        self.slots = SlotKeeper(
            limit=settings.max_concurrent_materializations,
            job_cache=self.jobs.objects,
            job_key=namespaced_job_name,
        )
        self._signing_keys = SigningKeys(
            api_client,
            namespace=module_namespace,
            secret=DELIVERY_SIGNING_SECRET,
            data_key=DELIVERY_SIGNING_KEY,
        )

    # ----- what it follows ----------------------------------------------------------------------

    def informers(self) -> list[Informer]:
        return [self.volumes, self.jobs]

    def attach(self, manager: Manager, triggers: Triggers) -> None:
        manager.informer(self.volumes)
        self.volumes.add_handler(lambda old, new: _volume_changed(old, new, triggers))
        manager.informer(self.jobs)
        triggers.watch(self.jobs, _workload_of_job)
        self.jobs.add_handler(self._job_changed)
        self.on_slot_freed = lambda keys: _wake(keys, triggers)

    def _job_changed(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        if old is not None and is_running(old) and (new is None or not is_running(new)):
            self.slot_freed()

    def forget(self, key: WorkloadKey) -> None:
        self.got_slot(key)

    # ----- what it reads ------------------------------------------------------------------------

    def facts(
        self, key: WorkloadKey, request: DeliveryRequest | None, models: Mapping[ModelKey, ModelSeen]
    ) -> ClaimFacts:
        name = wanted_claim(request, models) if request is not None else None
        if name is None:
            return ClaimFacts(
                materializations_running=self.slots.running(), materializations_limit=self.slots.limit
            )
        claim = self._claims.get(key.namespace, name)
        job = self.jobs.get(key.namespace, job_name(name))
        uid = str(((job or {}).get("metadata") or {}).get("uid") or "")
        return claim_facts(
            claim=claim,
            volume_exists=self.volume_exists(claim) if claim is not None else True,
            events=self._events(claim) if claim is not None else (),
            materialization=self._materialization(
                job, claim=claim, removed_here=bool(uid) and self.slots.is_ended(uid)
            ),
            storage=self._storage_class() if claim is None else None,
            running=self.slots.running(),
            limit=self.slots.limit,
        )

    def _materialization(
        self, job: Mapping[str, Any] | None, *, claim: Mapping[str, Any] | None, removed_here: bool
    ) -> MaterializationSeen:
        if job is not None and claim is not None and not fills(job, claim):
            # A Job of an earlier claim of this name, which the garbage collector has not removed
            # yet (or which was orphaned): what it copied is not on this claim, so it counts as
            # going, never as this claim's copy; its successor starts once it is gone.
            return MaterializationSeen(JobState.GOING_AWAY)
        seen = materialization_seen(job, removed_here=removed_here)
        if job is not None and seen.state is JobState.FAILED:
            seen = materialization_seen(job, termination_message=self._termination_message(job))
        return seen

    def _termination_message(self, job: Mapping[str, Any]) -> str | None:
        namespace = str(job["metadata"]["namespace"])
        return Jobs(self._api_client, namespace=namespace).termination_message(
            job, container=MATERIALIZER_CONTAINER
        )

    def volume_exists(self, claim: Mapping[str, Any]) -> bool:
        """Whether a bound claim's PersistentVolume exists: the cache, confirmed by a read when the
        cache lacks it (the volume informer may not have seen a volume the claim's binder made)."""
        phase = (claim.get("status") or {}).get("phase")
        volume = str((claim.get("spec") or {}).get("volumeName") or "")
        if phase != ClaimPhase.BOUND.value or not volume:
            return True
        return self.volumes.get("", volume) is not None or self._volume_reads.get(volume) is not None

    def _events(self, claim: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The Events about the claim's name (one page), only while it is Pending."""
        if (claim.get("status") or {}).get("phase") not in (None, ClaimPhase.PENDING.value):
            return []
        meta = claim["metadata"]
        return listed_events(
            self._api_client,
            meta["namespace"],
            field_selector=f"involvedObject.name={meta['name']},involvedObject.kind={CLAIM_KIND}",
            limit=EVENTS_LIMIT,
        )

    # ----- what it does -------------------------------------------------------------------------

    def handlers(self) -> Mapping[type[Any], Handler]:
        return {
            WaitForSlot: self._wait_for_slot,
            CreateClaim: self._create_claim,
            PatchClaim: self._patch_claim,
            RemoveJob: self._remove_job,
            StartMaterialization: self._start_materialization,
        }

    def _wait_for_slot(self, effect: WaitForSlot, ctx: StepContext, subject: Subject) -> Step:
        self.waiting_for_slot(subject.key)
        return DONE

    def _create_claim(self, effect: CreateClaim, ctx: StepContext, subject: Subject) -> Step:
        try:
            ctx.objects.create_claim(effect.manifest)
        except KubeError as error:
            if error.temporary:
                raise
            return self._refused(
                error,
                DeliveryReason.SHARED_PVC_CLAIM_PENDING,
                "a ResourceQuota or an admission policy of the namespace, or the controller's RBAC, "
                "does not let it be created",
                ctx=ctx,
                subject=subject,
            )
        return DONE

    def _patch_claim(self, effect: PatchClaim, ctx: StepContext, subject: Subject) -> Step:
        claim = subject.seen.facts.claim
        if claim is None:
            raise ValueError(f"{subject.key}: a claim patch without an observed claim")
        ctx.objects.patch_claim(subject.seen.workload.namespace, claim.name, effect.patch)
        return DONE

    def _remove_job(self, effect: RemoveJob, ctx: StepContext, subject: Subject) -> Step:
        """Delete the observed Job; its Pods and Secrets go with it."""
        job = subject.seen.facts.materialization.job
        if job is not None:
            self.slots.ended(job.uid)
            ctx.objects.delete_job(job.namespace, job.name)
        return DONE

    def _start_materialization(
        self, effect: StartMaterialization, ctx: StepContext, subject: Subject
    ) -> Step:
        ca_certificate, problem = module_ca_certificate(self.settings.ca_file)
        if ca_certificate is None:
            retry = self.settings.materialization_retry
            message = f"{problem}; the module tries again in {int(retry.total_seconds())}s"
            write_report(
                DeliveryReport(DeliveryReason.SHARED_PVC_MATERIALIZATION_FAILED, message),
                ctx=ctx,
                subject=subject,
            )
            return Step(again=retry.total_seconds(), stop=True)
        try:
            started = self._start(effect, ctx=ctx, subject=subject, ca_certificate=ca_certificate)
        except KubeError as error:
            if error.temporary:
                raise
            return self._refused(
                error,
                DeliveryReason.SHARED_PVC_MATERIALIZATION_FAILED,
                "the materializer pod template the module's Helm chart renders, or an admission "
                "policy or quota of the namespace, does not let it be created",
                ctx=ctx,
                subject=subject,
            )
        # The last slot went to another workload meanwhile: the report says so on the next pass.
        return DONE if started else Step(again=SLOT_RECHECK_SECONDS, stop=True)

    def _start(
        self, start: StartMaterialization, *, ctx: StepContext, subject: Subject, ca_certificate: str
    ) -> bool:
        """Create the Job and its token Secret (with `ca_certificate`, the module CA's); False when
        the last slot went to another workload between the observation and now (nothing is created
        then)."""
        workload = subject.seen.workload
        claim = subject.seen.facts.claim
        if claim is None or claim.name != start.claim:
            raise ValueError(f"{subject.key}: materialization of {start.claim} without that claim observed")
        name = job_name(start.claim)
        slot = namespaced_job_name({"metadata": {"namespace": workload.namespace, "name": name}})
        taken, _ = self.slots.acquire(slot)
        if not taken:
            self.waiting_for_slot(subject.key)
            return False
        try:
            settings = self.settings
            request = MaterializationRequest(
                api_url=settings.api_url,
                target_dir=settings.claim_mount,
                artifacts=tuple(
                    RequestedArtifact.of(item.key.name, item.key, item.digest) for item in start.models
                ),
            )
            credentials = self._registry_credentials()
            job = materialize_job(
                self._materializer_template(),
                workload=workload,
                claim=start.claim,
                claim_uid=claim.uid,
                request=request,
                limits=settings.limits,
                pull_secret=credentials is not None,
            )
            grant = token.DeliveryGrant(
                workload=workload,
                artifacts=tuple(
                    token.GrantedArtifact(ref=item.key, digest=item.digest) for item in start.models
                ),
                expires_at=ctx.clock() + settings.token_lifetime,
            )
            issued = token.issue(grant, key=self._signing_keys.key())
            created = ctx.objects.create_job(job)
            try:
                # Both owned by the Job, so they go with it once the claim records the copy. Created
                # after it (they need its uid): the kubelet retries a pull and a variable's Secret.
                ctx.objects.put_secret(
                    token_secret(created, workload=workload, token=issued, ca_certificate=ca_certificate)
                )
                if credentials is not None:
                    ctx.objects.put_secret(
                        registry_secret(created, workload=workload, docker_config=credentials)
                    )
            except Exception:
                ctx.objects.delete_job(workload.namespace, name)  # it would wait for its token forever
                raise
        except Exception:
            self.slots.release(slot)
            raise
        return True

    def _refused(
        self, error: KubeError, reason: DeliveryReason, cause: str, *, ctx: StepContext, subject: Subject
    ) -> Step:
        """The API server refused an object of the delivery for good: say which and why, and try
        again after the retry period (a temporary refusal backs off instead)."""
        retry = self.settings.materialization_retry
        message = f"{error}; {cause}; the module tries again in {int(retry.total_seconds())}s"
        write_report(DeliveryReport(reason, message), ctx=ctx, subject=subject)
        return Step(again=retry.total_seconds(), stop=True)


def _wake(keys: set[WorkloadKey], triggers: Triggers) -> None:
    for key in sorted(keys):
        triggers.enqueue(key)


def _workload_of_job(job: Mapping[str, Any]) -> list[WorkloadKey]:
    key = workload_of_job(job)
    return [key] if key is not None else []


def _volume_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, triggers: Triggers) -> None:
    obj = new if new is not None else old
    name = str(((obj or {}).get("metadata") or {}).get("name") or "")
    if name:
        triggers.enqueue_owners_of_claims_on(name)


class ClaimReads:
    """The webhook's read of a claim: one GET with a short timeout; any failure but 404 is
    `Unreadable`."""

    def __init__(self, api_client: Any) -> None:
        self._claims = Objects(api_client, PERSISTENT_VOLUME_CLAIMS, timeout=ADMISSION_TIMEOUT)

    def __call__(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            return self._claims.get(name, namespace)
        except KubeError as error:
            raise Unreadable.of(f"PersistentVolumeClaim {namespace}/{name}", error) from error


class SharedPVCAdmission:
    """SharedPVC in the webhook: the wanted claim, read once (`ClaimReads`)."""

    def __init__(self, *, read_claim: Callable[[str, str], Mapping[str, Any] | None], policy: Policy) -> None:
        self.rules = SharedPVC(policy)
        self._read_claim = read_claim

    def facts(
        self, namespace: str, request: DeliveryRequest | None, models: Mapping[ModelKey, ModelSeen]
    ) -> ClaimFacts:
        name = wanted_claim(request, models) if request is not None else None
        if name is None:
            return ClaimFacts()
        return claim_facts(claim=self._read_claim(namespace, name))
