"""The delivery controller's observation, from plain dicts: cached objects -> `DeliveryObservation`,
the trimmed caches, the materialize Job as the decision sees it and the Job it builds."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest

from ai_models.controller.delivery.informers import claim_volume, models_named, trim_workload
from ai_models.controller.delivery.jobs import (
    CLAIM_MOUNT,
    MATERIALIZER_CONTAINER,
    materialization_seen,
    materialize_job,
    token_secret,
    workload_of_job,
)
from ai_models.controller.delivery.keys import WorkloadKey
from ai_models.controller.delivery.observe import observation
from ai_models.controller.delivery.runtime import claim_owners
from ai_models.controller.delivery.shared_pvc import claim_facts, fills, trim_volume
from ai_models.controller.delivery.steps.pods import owned_by
from ai_models.controller.jobs.builder import JobLimits
from ai_models.controller.jobs.slots import SlotKeeper, namespaced_job_name
from ai_models.domain.delivery.claim_facts import ClaimFacts
from ai_models.domain.delivery.claims import Artifact, ClassChoice, claim_manifest, claim_name
from ai_models.domain.delivery.contract import DeliveryRequest, Workload, WorkloadKind
from ai_models.domain.delivery.effects import CreateClaim, UngatePods
from ai_models.domain.delivery.materialization import (
    MaterializationOutcome,
    MaterializationRequest,
    RequestedArtifact,
)
from ai_models.domain.delivery.modes.shared_pvc import Policy, SharedPVC
from ai_models.domain.delivery.verdict import DeliveryObservation, Verdict, decide
from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.jobs import JobState
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    COMPONENT_LABEL,
    MATERIALIZATION_COMPONENT,
    MATERIALIZED_DIGESTS_ANNOTATION,
    MODEL_ANNOTATION,
    DeliveryReason,
    MaterializeVariable,
    ModelKind,
    ModelPhase,
)

NOW = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC)
POLICY = Policy(
    provisioning_deadline=datetime.timedelta(minutes=10), materialization_retry=datetime.timedelta(minutes=5)
)
DIGEST = "sha256:" + "a" * 64
KEY = ModelKey(ModelKind.MODEL, "team-a", "llama")
WORKLOAD = Workload(WorkloadKind.DEPLOYMENT, "team-a", "web", "uid-web")
CLAIM = claim_name(WORKLOAD, [DIGEST])
IMMEDIATE = ClassChoice("rwx", binding_mode="Immediate")


def observed(
    obj: dict[str, Any], *, models: dict[ModelKey, Any], **facts: Any
) -> DeliveryObservation[ClaimFacts]:
    """The SharedPVC observation of `obj` from the objects read for it (`claim_facts`)."""
    return observation(obj, models=models, facts=claim_facts(**facts))


def decided(seen: DeliveryObservation[ClaimFacts]) -> Verdict | None:
    return decide(seen, SharedPVC(POLICY), now=NOW)


def model_seen(key: ModelKey, obj: dict[str, Any] | None) -> ModelSeen:
    return ModelSeen.of(key, obj)


def deployment(**annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "team-a",
            "uid": "uid-web",
            "resourceVersion": "7",
            "generation": 2,
            "annotations": {MODEL_ANNOTATION: "llama", **annotations},
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {
            "replicas": 3,
            "strategy": {"type": "RollingUpdate"},
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            },
        },
        "status": {"replicas": 3, "readyReplicas": 3},
    }


def ready_model(*, phase: str = "Ready", digest: str = DIGEST, size: Any = 1000) -> dict[str, Any]:
    return {
        "kind": "Model",
        "metadata": {"name": "llama", "namespace": "team-a"},
        "status": {"phase": phase, "artifact": {"digest": digest, "sizeBytes": size}},
    }


def bound_claim(**annotations: str) -> dict[str, Any]:
    claim = claim_manifest(workload=WORKLOAD, artifacts=[Artifact(DIGEST, 1000)], storage_class="rwx")
    claim["metadata"].update(
        uid="uid-claim", creationTimestamp="2026-03-01T11:59:00Z", annotations=annotations
    )
    claim["spec"]["volumeName"] = "pv-1"
    claim["status"] = {"phase": "Bound"}
    return claim


def pending_event(*, uid: str, message: str) -> dict[str, Any]:
    return {
        "type": "Warning",
        "reason": "ProvisioningFailed",
        "message": message,
        "involvedObject": {"kind": "PersistentVolumeClaim", "name": CLAIM, "uid": uid},
        "lastTimestamp": "2026-03-01T11:59:30Z",
    }


def test_a_model_read_from_its_status_gives_phase_digest_and_size() -> None:
    assert model_seen(KEY, None).phase is None
    seen = model_seen(KEY, ready_model())
    assert (seen.phase, seen.digest, seen.size_bytes) == (ModelPhase.READY, DIGEST, 1000)
    assert model_seen(KEY, ready_model(phase="Bogus")).phase is ModelPhase.PENDING
    assert model_seen(KEY, ready_model(size="1000")).size_bytes is None
    assert model_seen(KEY, ready_model(size=True)).size_bytes is None


def test_a_workload_with_a_ready_model_and_no_claim_is_observed_for_a_claim_to_be_made() -> None:
    seen = observed(deployment(), models={KEY: ready_model()}, storage=IMMEDIATE)
    assert isinstance(seen.request, DeliveryRequest)
    assert seen.workload == WORKLOAD
    assert seen.facts.claim is None
    action = decided(seen)
    assert action is not None
    created = action.effect(CreateClaim)
    assert created is not None
    assert created.manifest["metadata"]["name"] == CLAIM
    assert action.report is not None
    assert action.report.reason is DeliveryReason.SHARED_PVC_CLAIM_PENDING


def test_a_missing_model_is_observed_as_not_existing() -> None:
    action = decided(observed(deployment(), models={KEY: None}))
    assert action is not None
    assert action.report is not None
    assert action.report.reason is DeliveryReason.MODEL_NOT_READY
    assert action.effect(CreateClaim) is None
    assert action.template is None


def test_a_provisioning_failure_is_taken_only_from_events_about_the_claims_uid() -> None:
    claim = bound_claim()
    claim["status"] = {"phase": "Pending"}
    forged = pending_event(uid="uid-other", message="forged")
    genuine = pending_event(uid="uid-claim", message="no RWX\nvolumes here")

    only_forged = observed(deployment(), models={KEY: ready_model()}, claim=claim, events=[forged])
    both = observed(deployment(), models={KEY: ready_model()}, claim=claim, events=[forged, genuine])

    assert only_forged.facts.provisioning_failure is None
    assert both.facts.provisioning_failure == "no RWX volumes here"
    action = decided(both)
    assert action is not None
    assert action.report is not None
    assert action.report.reason is DeliveryReason.SHARED_PVC_PROVISIONING_FAILED


def test_events_of_a_bound_claim_are_not_read_as_a_failure() -> None:
    seen = observed(
        deployment(),
        models={KEY: ready_model()},
        claim=bound_claim(),
        events=[pending_event(uid="uid-claim", message="an old failure")],
    )
    assert seen.facts.provisioning_failure is None


def test_a_bound_claim_whose_volume_is_gone_is_observed_lost() -> None:
    seen = observed(deployment(), models={KEY: ready_model()}, claim=bound_claim(), volume_exists=False)
    action = decided(seen)
    assert action is not None
    assert action.report is not None
    assert action.report.reason is DeliveryReason.SHARED_PVC_VOLUME_LOST


def test_a_filled_claim_delivers_and_the_slot_count_is_passed_through() -> None:
    filled = bound_claim(**{MATERIALIZED_DIGESTS_ANNOTATION: DIGEST})
    seen = observed(deployment(), models={KEY: ready_model()}, claim=filled, running=1, limit=1)
    assert (seen.facts.materializations_running, seen.facts.materializations_limit) == (1, 1)
    action = decided(seen)
    assert action is not None
    assert action.report is not None
    assert action.report.reason is DeliveryReason.DELIVERED
    assert action.template is not None
    assert action.effect(UngatePods) is not None


def test_a_workload_is_cached_with_identity_annotations_selector_and_template_only() -> None:
    obj = deployment()
    obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    trimmed = trim_workload(copy.deepcopy(obj))
    assert trimmed["metadata"] == {
        "name": "web",
        "namespace": "team-a",
        "uid": "uid-web",
        "resourceVersion": "7",
        "generation": 2,
        "annotations": {MODEL_ANNOTATION: "llama"},
    }
    assert trimmed["spec"] == {"selector": obj["spec"]["selector"], "template": obj["spec"]["template"]}
    assert "status" not in trimmed
    assert list(models_named(trimmed)) == [str(KEY)]


def test_a_cronjob_keeps_its_job_template_path() -> None:
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "team-a"},
        "spec": {
            "schedule": "@daily",
            "jobTemplate": {"spec": {"backoffLimit": 1, "template": {"spec": {"containers": []}}}},
        },
    }
    assert trim_workload(cron)["spec"] == {
        "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}
    }


def test_a_volume_is_cached_with_its_name_and_phase_only() -> None:
    volume = {
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-1", "uid": "u", "labels": {"a": "b"}},
        "spec": {"hostPath": {"path": "/x"}, "claimRef": {"name": "c"}},
        "status": {"phase": "Bound"},
    }
    assert trim_volume(volume) == {
        "apiVersion": None,
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-1"},
        "status": {"phase": "Bound"},
    }
    assert list(claim_volume(bound_claim())) == ["pv-1"]


def test_a_claims_change_maps_to_its_owning_workload() -> None:
    assert claim_owners(bound_claim()) == [WorkloadKey(WorkloadKind.DEPLOYMENT, "team-a", "web")]


def materializer_template() -> dict[str, Any]:
    return {"spec": {"containers": [{"name": MATERIALIZER_CONTAINER, "image": "module"}]}}


def request() -> MaterializationRequest:
    return MaterializationRequest(
        api_url="https://api",
        target_dir=CLAIM_MOUNT,
        artifacts=(RequestedArtifact.of("llama", KEY, DIGEST),),
    )


def test_the_materialize_job_mounts_the_claim_reads_its_token_from_a_secret_and_maps_back() -> None:
    job = materialize_job(
        materializer_template(),
        workload=WORKLOAD,
        claim=CLAIM,
        claim_uid="uid-claim",
        request=request(),
        limits=JobLimits(backoff_limit=2, deadline_seconds=600),
    )
    assert job["metadata"]["name"] == CLAIM
    assert job["metadata"]["namespace"] == "team-a"
    assert job["metadata"]["labels"][COMPONENT_LABEL] == MATERIALIZATION_COMPONENT
    assert job["metadata"]["ownerReferences"][0]["uid"] == "uid-claim"
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert {"name": "ai-models-shared", "persistentVolumeClaim": {"claimName": CLAIM}} in pod["volumes"]
    container = pod["containers"][0]
    assert {"name": "ai-models-shared", "mountPath": CLAIM_MOUNT} in container["volumeMounts"]
    env = {item["name"]: item for item in container["env"]}
    token = env[MaterializeVariable.TOKEN.value]
    assert token["valueFrom"]["secretKeyRef"]["name"] == f"{CLAIM}-token"
    assert "value" not in token
    assert env[MaterializeVariable.TARGET_DIR.value]["value"] == CLAIM_MOUNT
    assert workload_of_job(job) == WorkloadKey(WorkloadKind.DEPLOYMENT, "team-a", "web")
    created = {**job, "metadata": {**job["metadata"], "uid": "uid-job"}}
    assert env[MaterializeVariable.CA_BUNDLE.value]["valueFrom"]["secretKeyRef"] == {
        "name": f"{CLAIM}-token",
        "key": "ca.crt",
    }
    secret = token_secret(created, workload=WORKLOAD, token="aimd1.x", ca_certificate="PEM")
    assert secret["metadata"]["name"] == f"{CLAIM}-token"
    # The module CA's certificate beside the token, never its key.
    assert secret["stringData"] == {"token": "aimd1.x", "ca.crt": "PEM"}
    assert secret["metadata"]["ownerReferences"][0] == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": CLAIM,
        "uid": "uid-job",
        "controller": True,
        "blockOwnerDeletion": False,
    }


def test_a_job_without_the_component_label_is_not_a_materialization() -> None:
    job = {"metadata": {"namespace": "team-a", "labels": {"ai.deckhouse.io/owner-kind": "Deployment"}}}
    assert workload_of_job(job) is None


def condition(kind: str, when: str = "2026-03-01T11:58:00Z") -> dict[str, Any]:
    return {"status": {"conditions": [{"type": kind, "status": "True", "lastTransitionTime": when}]}}


@pytest.mark.parametrize(
    ("job", "removed_here", "state"),
    [
        (None, False, JobState.NONE),
        ({"metadata": {}}, False, JobState.RUNNING),
        ({"metadata": {}, **condition("Complete")}, False, JobState.SUCCEEDED),
        ({"metadata": {}, **condition("Failed")}, False, JobState.FAILED),
        ({"metadata": {"deletionTimestamp": "2026-03-01T11:59:00Z"}}, False, JobState.GOING_AWAY),
        ({"metadata": {}, **condition("Failed")}, True, JobState.GOING_AWAY),
    ],
)
def test_a_materialize_job_is_seen_in_its_state(
    job: dict[str, Any] | None, removed_here: bool, state: JobState
) -> None:
    assert materialization_seen(job, removed_here=removed_here).state is state


def test_a_failed_job_reports_only_the_materializers_own_message() -> None:
    failed = {"metadata": {}, **condition("Failed")}
    outcome = MaterializationOutcome(succeeded=False, message="sha256 of w.bin differs").to_json()
    seen = materialization_seen(failed, termination_message=outcome)
    assert seen.message == "sha256 of w.bin differs"
    assert seen.finished == datetime.datetime(2026, 3, 1, 11, 58, tzinfo=datetime.UTC)
    assert materialization_seen(failed, termination_message="Traceback: a log tail").message == ""


@pytest.mark.parametrize(
    ("kind", "owner_kind", "owner_name", "mine"),
    [
        (WorkloadKind.DEPLOYMENT, "ReplicaSet", "web-5d8f7", True),
        (WorkloadKind.DEPLOYMENT, "ReplicaSet", "webby-5d8f7", False),
        (WorkloadKind.DEPLOYMENT, "StatefulSet", "web", False),
        (WorkloadKind.STATEFUL_SET, "StatefulSet", "web", True),
        (WorkloadKind.DAEMON_SET, "DaemonSet", "web-x", False),
        (WorkloadKind.CRON_JOB, "Job", "web-29001", True),
    ],
)
def test_only_the_workloads_own_pods_are_ungated(
    kind: WorkloadKind, owner_kind: str, owner_name: str, mine: bool
) -> None:
    pod = {"metadata": {"ownerReferences": [{"kind": owner_kind, "name": owner_name}]}}
    assert owned_by(pod, Workload(kind, "team-a", "web", "uid")) is mine


def test_same_named_materialize_jobs_of_two_namespaces_take_two_slots() -> None:
    cache = [
        {"metadata": {"namespace": namespace, "name": CLAIM, "uid": namespace}, "status": {}}
        for namespace in ("team-a", "team-b")
    ]
    slots = SlotKeeper(limit=2, job_cache=lambda: cache, job_key=namespaced_job_name)
    assert slots.running() == 2
    assert slots.acquire(f"team-c/{CLAIM}") == (False, 2)


def test_a_model_whose_name_has_dots_gets_a_materialize_job_its_materializer_accepts() -> None:
    # Model names are DNS-1123 subdomains: "llama-3.1-8b" is a name users pick.
    dotted = ModelKey(ModelKind.MODEL, "team-a", "llama-3.1-8b")
    wanted = MaterializationRequest(
        api_url="https://api",
        target_dir=CLAIM_MOUNT,
        artifacts=(RequestedArtifact.of(dotted.name, dotted, DIGEST),),
    )
    job = materialize_job(
        materializer_template(),
        workload=WORKLOAD,
        claim=CLAIM,
        claim_uid="uid-claim",
        request=wanted,
        limits=JobLimits(backoff_limit=2, deadline_seconds=600),
    )
    # What the kubelet resolves from the token Secret: the token and the module CA's certificate.
    from_secret = {
        MaterializeVariable.TOKEN.value: "aimd1.token",
        MaterializeVariable.CA_BUNDLE.value: "-----BEGIN CERTIFICATE-----\n",
    }
    env = {
        item["name"]: item.get("value", from_secret.get(item["name"], ""))
        for item in job["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    parsed = MaterializationRequest.from_env(env)
    assert [(item.name, item.ref.key) for item in parsed.artifacts] == [("llama-3.1-8b", dotted)]


def test_a_job_counts_only_for_the_claim_that_owns_it() -> None:
    claim = {"metadata": {"name": CLAIM, "uid": "uid-claim"}}
    owner = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": CLAIM, "controller": True}
    job = {"metadata": {"name": CLAIM, "ownerReferences": [{**owner, "uid": "uid-claim"}]}}
    assert fills(job, claim)
    # A Job of an earlier claim of the same name (not collected yet), or one orphaned.
    assert not fills({"metadata": {"name": CLAIM, "ownerReferences": [{**owner, "uid": "uid-gone"}]}}, claim)
    assert not fills({"metadata": {"name": CLAIM}}, claim)
    assert not fills(job, {"metadata": {"name": CLAIM}})
