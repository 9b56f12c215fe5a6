"""What a reconcile of a delivering workload does: one row per rule, and every report reason reached."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

from ai_models.domain.delivery import verdict
from ai_models.domain.delivery.claim_facts import (
    ClaimFacts,
    ClaimSeen,
    MaterializationSeen,
    provisioning_failure,
    wanted_claim,
)
from ai_models.domain.delivery.claims import ClassChoice, claim_labels, claim_name, owner_reference
from ai_models.domain.delivery.contract import DeliveryRequest, InvalidSpec, Workload, WorkloadKind, parse
from ai_models.domain.delivery.effects import (
    CreateClaim,
    DeleteStaleReplicaSets,
    PatchClaim,
    ReleaseClaims,
    RemoveJob,
    StartMaterialization,
    UngatePods,
    WaitForSlot,
    WriteReport,
    WriteTemplate,
)
from ai_models.domain.delivery.modes.shared_pvc import (
    EVENTS_RECHECK_SECONDS,
    SLOT_RECHECK_SECONDS,
    Policy,
    SharedPVC,
)
from ai_models.domain.delivery.report import DeliveryReport, changed, provisioner_text, report_of
from ai_models.domain.delivery.template import gate, gated, rewrite
from ai_models.domain.delivery.verdict import DeliveryObservation, Verdict
from ai_models.domain.delivery.workload_models import ModelSeen, ResolvedModel
from ai_models.domain.jobs import JobState
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage.prerequisites import ClaimPhase
from ai_models.names import (
    CLUSTER_MODEL_ANNOTATION,
    DELIVERY_MESSAGE_ANNOTATION,
    DELIVERY_REASON_ANNOTATION,
    MATERIALIZED_DIGESTS_ANNOTATION,
    MODEL_ANNOTATION,
    MODULE,
    MODULE_LABEL,
    MODULE_NAMESPACE,
    NODE_CACHE_DRIVER,
    OWNER_UID_LABEL,
    SHARED_PVC_LABEL,
    SHARED_PVC_LABEL_VALUE,
    DeliveryReason,
    ModelKind,
    ModelPhase,
)

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
MINUTE = datetime.timedelta(minutes=1)
POLICY = Policy(provisioning_deadline=10 * MINUTE, materialization_retry=MINUTE)
QWEN = ModelKey(ModelKind.MODEL, "team-a", "qwen")
BGE = ModelKey(ModelKind.CLUSTER_MODEL, "", "bge")
D_QWEN = "sha256:" + "a1" * 32
D_BGE = "sha256:" + "b2" * 32
GIB = 1024**3


def workload_object(**annotations: str) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "team-a",
            "uid": "uid-web",
            "annotations": {MODEL_ANNOTATION: "qwen", CLUSTER_MODEL_ANNOTATION: "bge", **annotations},
        },
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "server", "image": "vllm"}]},
            }
        },
    }


def request_of(obj: dict[str, Any]) -> DeliveryRequest:
    request = parse(obj)
    assert isinstance(request, DeliveryRequest)
    return request


OBJ = workload_object()
REQUEST = request_of(OBJ)
WEB = REQUEST.workload
CLAIM = claim_name(WEB, [D_QWEN, D_BGE])
USERS_TEMPLATE = OBJ["spec"]["template"]
GATED = gate(USERS_TEMPLATE)
RESOLVED = (ResolvedModel(BGE, D_BGE, GIB), ResolvedModel(QWEN, D_QWEN, 4 * GIB))
DELIVERED_TEMPLATE = rewrite(USERS_TEMPLATE, claim=CLAIM, models=[item.delivered for item in RESOLVED])
MODELS = {
    QWEN: ModelSeen(QWEN, ModelPhase.READY, D_QWEN, 4 * GIB),
    BGE: ModelSeen(BGE, ModelPhase.READY, D_BGE, GIB),
}
OURS = {SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE, MODULE_LABEL: MODULE, OWNER_UID_LABEL: "uid-web"}
BOUND = ClaimSeen(
    name=CLAIM,
    uid="uid-claim",
    phase=ClaimPhase.BOUND,
    created=NOW - 5 * MINUTE,
    labels=OURS,
    owner_uids=frozenset({"uid-web"}),
    storage_class="nfs",
    volume_name="pv-1",
)
PENDING = dataclasses.replace(BOUND, phase=ClaimPhase.PENDING, volume_name="", created=NOW - MINUTE)
MATERIALIZED = dataclasses.replace(BOUND, materialized=frozenset({D_QWEN, D_BGE}))
IMMEDIATE = ClassChoice("nfs", binding_mode="Immediate")

# A gated workload whose models are Ready and whose claim is Bound but still empty.
BASE = DeliveryObservation(
    workload=WEB,
    annotations=OBJ["metadata"]["annotations"],
    template=GATED,
    request=REQUEST,
    models=MODELS,
    facts=ClaimFacts(storage=IMMEDIATE, claim=BOUND),
)
FACTS = {field.name for field in dataclasses.fields(ClaimFacts)}
Seen = DeliveryObservation[ClaimFacts]


def with_(**changes: Any) -> Seen:
    """BASE with `changes`, of the observation or of its SharedPVC facts."""
    facts = {key: value for key, value in changes.items() if key in FACTS}
    common = {key: value for key, value in changes.items() if key not in FACTS}
    return dataclasses.replace(BASE, facts=dataclasses.replace(BASE.facts, **facts), **common)


def decide(seen: Seen, *, policy: Policy = POLICY, now: datetime.datetime = NOW) -> Verdict | None:
    return verdict.decide(seen, SharedPVC(policy), now=now)


def admit(seen: Seen) -> dict[str, Any] | None:
    return verdict.admit(seen, SharedPVC(POLICY), now=NOW).template


def model(
    key: ModelKey, phase: ModelPhase | None, digest: str = "", size: int | None = None
) -> dict[ModelKey, ModelSeen]:
    return {**MODELS, key: ModelSeen(key, phase, digest, size)}


@dataclasses.dataclass(frozen=True)
class Expect:
    reason: DeliveryReason | None
    words: tuple[str, ...] = ()
    template: str = "kept"  # kept | delivered | stripped
    creates_claim: bool = False
    starts_job: bool = False
    removes_job: bool = False
    removes_finished_job: bool = False
    claim_patch: dict[str, Any] | None = None
    requeue: float | None = None
    rule: str = ""  # the rule that decides, when the row is a case of a rule named otherwise
    ungates: bool = False


RULES: dict[str, tuple[Seen, Expect]] = {
    "invalid_spec": (
        with_(request=InvalidSpec(WEB, ("the annotation ai.deckhouse.io/model has an empty model name",))),
        Expect(DeliveryReason.INVALID_SPEC, ("ai.deckhouse.io/model", "empty model name")),
    ),
    "invalid_spec_keeps_a_delivered_template_and_its_claim": (
        with_(
            request=InvalidSpec(WEB, ("a problem",)),
            template=DELIVERED_TEMPLATE,
            claim=MATERIALIZED,
        ),
        Expect(DeliveryReason.INVALID_SPEC, rule="invalid_spec"),
    ),
    "node_cache_delivery_disabled": (
        with_(
            template={
                **USERS_TEMPLATE,
                "spec": {
                    **USERS_TEMPLATE["spec"],
                    "volumes": [{"name": "weights", "csi": {"driver": NODE_CACHE_DRIVER}}],
                },
            }
        ),
        Expect(DeliveryReason.NODE_CACHE_DELIVERY_DISABLED, ("weights", NODE_CACHE_DRIVER, "delivery.mode")),
    ),
    "model_not_ready": (
        with_(models=model(QWEN, ModelPhase.PUBLISHING)),
        Expect(DeliveryReason.MODEL_NOT_READY, ("Model team-a/qwen is Publishing, not Ready",)),
    ),
    "model_missing": (
        with_(models={BGE: MODELS[BGE]}),
        Expect(
            DeliveryReason.MODEL_NOT_READY,
            ("Model team-a/qwen does not exist", MODEL_ANNOTATION),
            rule="model_not_ready",
        ),
    ),
    "ready_model_without_its_artifact": (
        with_(models=model(BGE, ModelPhase.READY)),
        Expect(
            DeliveryReason.MODEL_NOT_READY,
            ("ClusterModel bge is Ready but its status.artifact",),
            rule="model_not_ready",
        ),
    ),
    "a_model_losing_ready_keeps_the_bound_claim_and_the_template_that_mounts_it": (
        with_(
            models=model(QWEN, ModelPhase.FAILED, D_QWEN, 4 * GIB),
            template=DELIVERED_TEMPLATE,
            claim=MATERIALIZED,
        ),
        Expect(DeliveryReason.MODEL_NOT_READY, ("Model team-a/qwen is Failed",), rule="model_not_ready"),
    ),
    "no_storage_class": (
        with_(claim=None, storage=ClassChoice(None, problem="no StorageClass is named by ...; set it")),
        Expect(DeliveryReason.SHARED_PVC_STORAGE_CLASS_MISSING, (CLAIM, "no StorageClass is named by")),
    ),
    "wait_for_first_consumer_named_before_any_claim": (
        with_(claim=None, storage=ClassChoice("local", binding_mode="WaitForFirstConsumer")),
        Expect(
            DeliveryReason.SHARED_PVC_STORAGE_CLASS_WAIT_FOR_FIRST_CONSUMER,
            (
                "StorageClass local",
                "WaitForFirstConsumer",
                "no claim is made",
                "delivery.sharedPVCStorageClassName",
            ),
        ),
    ),
    "an_existing_claim_outlives_a_class_that_is_gone_or_waits_for_consumers": (
        with_(claim=MATERIALIZED, storage=ClassChoice("local", binding_mode="WaitForFirstConsumer")),
        Expect(DeliveryReason.DELIVERED, template="delivered", rule="delivered", ungates=True),
    ),
    "create_claim": (
        with_(claim=None),
        Expect(
            DeliveryReason.SHARED_PVC_CLAIM_PENDING,
            (f"creating the shared claim {CLAIM}", "7Gi"),
            creates_claim=True,
        ),
    ),
    "claim_pending": (
        with_(claim=PENDING),
        Expect(
            DeliveryReason.SHARED_PVC_CLAIM_PENDING,
            (f"waiting for the shared claim {CLAIM}",),
            requeue=EVENTS_RECHECK_SECONDS,
        ),
    ),
    "claim_pending_close_to_its_deadline_looks_again_at_the_deadline": (
        with_(claim=dataclasses.replace(PENDING, created=NOW - 10 * MINUTE + datetime.timedelta(seconds=4))),
        Expect(DeliveryReason.SHARED_PVC_CLAIM_PENDING, requeue=4.0, rule="claim_pending"),
    ),
    "provisioning_failed": (
        with_(claim=PENDING, provisioning_failure="invalid access_mode, MULTI_NODE_MULTI_WRITER"),
        Expect(
            DeliveryReason.SHARED_PVC_PROVISIONING_FAILED,
            ("invalid access_mode, MULTI_NODE_MULTI_WRITER", "StorageClass nfs", "ReadWriteMany"),
            requeue=EVENTS_RECHECK_SECONDS,
        ),
    ),
    "provisioning_timed_out": (
        with_(claim=dataclasses.replace(PENDING, created=NOW - 10 * MINUTE)),
        Expect(
            DeliveryReason.SHARED_PVC_PROVISIONING_TIMED_OUT,
            ("not bound 10m after",),
            requeue=EVENTS_RECHECK_SECONDS,
        ),
    ),
    "volume_lost_when_the_claim_is_lost": (
        with_(claim=dataclasses.replace(MATERIALIZED, phase=ClaimPhase.LOST), template=DELIVERED_TEMPLATE),
        Expect(
            DeliveryReason.SHARED_PVC_VOLUME_LOST,
            ("PersistentVolume pv-1", f"kubectl -n team-a delete pvc {CLAIM}"),
            rule="volume_lost",
        ),
    ),
    "volume_lost_when_the_persistent_volume_is_gone": (
        with_(claim=dataclasses.replace(MATERIALIZED, volume_exists=False), template=DELIVERED_TEMPLATE),
        Expect(DeliveryReason.SHARED_PVC_VOLUME_LOST, rule="volume_lost"),
    ),
    "start_materialization": (
        BASE,
        Expect(
            DeliveryReason.SHARED_PVC_MATERIALIZING,
            ("started copying ClusterModel bge, Model team-a/qwen",),
            starts_job=True,
        ),
    ),
    "waiting_for_a_materialization_slot": (
        with_(materializations_running=2, materializations_limit=2),
        Expect(
            DeliveryReason.SHARED_PVC_MATERIALIZING,
            ("waiting for a materialization slot", "2 of 2", "delivery.maxConcurrentMaterializations"),
            requeue=SLOT_RECHECK_SECONDS,
        ),
    ),
    "materializing": (
        with_(materialization=MaterializationSeen(JobState.RUNNING), materializations_running=2),
        Expect(
            DeliveryReason.SHARED_PVC_MATERIALIZING,
            (f"copying ClusterModel bge, Model team-a/qwen into the shared claim {CLAIM}",),
        ),
    ),
    "materialization_job_going": (
        with_(materialization=MaterializationSeen(JobState.GOING_AWAY)),
        Expect(DeliveryReason.SHARED_PVC_MATERIALIZING, ("being removed",), requeue=1.0),
    ),
    "materialization_failed": (
        with_(
            materialization=MaterializationSeen(
                JobState.FAILED,
                "sha256 mismatch in model.safetensors",
                NOW - 20 * datetime.timedelta(seconds=1),
            )
        ),
        Expect(
            DeliveryReason.SHARED_PVC_MATERIALIZATION_FAILED,
            ("sha256 mismatch in model.safetensors", "tries again at 2026-12-01T12:00:40Z"),
            requeue=40.0,
        ),
    ),
    "materialization_retried": (
        with_(materialization=MaterializationSeen(JobState.FAILED, "serving API unavailable", NOW - MINUTE)),
        Expect(
            DeliveryReason.SHARED_PVC_MATERIALIZATION_FAILED,
            ("trying again now",),
            removes_job=True,
            requeue=1.0,
        ),
    ),
    "delivered_when_the_job_succeeds_records_the_digests_on_the_claim": (
        with_(materialization=MaterializationSeen(JobState.SUCCEEDED)),
        Expect(
            DeliveryReason.DELIVERED,
            ("ClusterModel bge, Model team-a/qwen delivered",),
            template="delivered",
            claim_patch={
                "metadata": {
                    "annotations": {MATERIALIZED_DIGESTS_ANNOTATION: ",".join(sorted([D_QWEN, D_BGE]))}
                }
            },
            rule="delivered",
            ungates=True,
        ),
    ),
    "delivered_from_a_claim_that_records_its_digests_after_its_job_is_gone": (
        with_(claim=MATERIALIZED),
        Expect(DeliveryReason.DELIVERED, template="delivered", rule="delivered", ungates=True),
    ),
    "delivered_from_a_claim_that_records_its_digests_removes_the_finished_job": (
        with_(
            claim=MATERIALIZED,
            template=DELIVERED_TEMPLATE,
            materialization=MaterializationSeen(JobState.SUCCEEDED),
        ),
        Expect(DeliveryReason.DELIVERED, rule="delivered", ungates=True, removes_finished_job=True),
    ),
    "delivered_from_a_claim_that_records_its_digests_keeps_a_running_job_until_it_ends": (
        with_(
            claim=MATERIALIZED,
            template=DELIVERED_TEMPLATE,
            materialization=MaterializationSeen(JobState.RUNNING),
        ),
        Expect(DeliveryReason.DELIVERED, rule="delivered", ungates=True),
    ),
    "delivered_again_is_a_no_op_for_the_template": (
        with_(claim=MATERIALIZED, template=DELIVERED_TEMPLATE),
        Expect(DeliveryReason.DELIVERED, rule="delivered", ungates=True),
    ),
    "a_complete_template_that_keeps_the_gate_is_left_as_it_is_and_its_pods_are_ungated": (
        with_(claim=MATERIALIZED, template=gate(DELIVERED_TEMPLATE)),
        Expect(DeliveryReason.DELIVERED, rule="delivered", ungates=True),
    ),
    "a_new_model_set_gets_its_own_claim_while_the_template_keeps_the_old_one": (
        with_(
            models=model(QWEN, ModelPhase.READY, "sha256:" + "c3" * 32, 4 * GIB),
            template=DELIVERED_TEMPLATE,
            claim=None,
        ),
        Expect(
            DeliveryReason.SHARED_PVC_CLAIM_PENDING,
            ("creating the shared claim",),
            creates_claim=True,
            rule="create_claim",
        ),
    ),
    "foreign_claim_with_the_wanted_name": (
        with_(claim=dataclasses.replace(BOUND, labels={SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE})),
        Expect(
            DeliveryReason.INVALID_SPEC,
            (f"PersistentVolumeClaim team-a/{CLAIM}", "not created by the module", "delete or rename it"),
        ),
    ),
    "adopt_earlier_incarnations_claim": (
        with_(
            claim=dataclasses.replace(
                MATERIALIZED, labels={**OURS, OWNER_UID_LABEL: "uid-old"}, owner_uids=frozenset({"uid-old"})
            )
        ),
        Expect(
            DeliveryReason.SHARED_PVC_CLAIM_PENDING,
            ("taking over the shared claim",),
            claim_patch={
                "metadata": {"labels": claim_labels(WEB), "ownerReferences": [owner_reference(WEB)]}
            },
        ),
    ),
    "earlier_incarnations_claim_going": (
        with_(
            claim=dataclasses.replace(
                BOUND,
                labels={**OURS, OWNER_UID_LABEL: "uid-old"},
                owner_uids=frozenset({"uid-old"}),
                deleting=True,
            )
        ),
        Expect(DeliveryReason.SHARED_PVC_CLAIM_PENDING, ("earlier Deployment web is being deleted",)),
    ),
    "claim_going": (
        with_(claim=dataclasses.replace(BOUND, deleting=True)),
        Expect(DeliveryReason.SHARED_PVC_CLAIM_PENDING, ("is being deleted; a new one is made",)),
    ),
    "annotations_removed": (
        with_(
            request=None, template=DELIVERED_TEMPLATE, annotations={DELIVERY_REASON_ANNOTATION: "Delivered"}
        ),
        Expect(None, template="stripped", ungates=True),
    ),
    "annotations_removed_from_a_gated_workload_lets_its_pods_schedule": (
        with_(request=None, template=GATED, annotations={}),
        Expect(None, template="stripped", rule="annotations_removed", ungates=True),
    ),
    "annotations_removed_clears_a_report_left_on_an_untouched_template": (
        with_(request=None, template=USERS_TEMPLATE, annotations={DELIVERY_REASON_ANNOTATION: "InvalidSpec"}),
        Expect(None, rule="annotations_removed", ungates=True),
    ),
}


@pytest.mark.parametrize("rule", RULES)
def test_delivery_rule(rule: str) -> None:
    seen, expect = RULES[rule]

    action = decide(seen, policy=POLICY, now=NOW)

    assert action is not None
    assert action.rule == (expect.rule or rule)
    if expect.reason is None:
        assert action.report is None
    else:
        assert action.report is not None
        assert action.report.reason is expect.reason
        for word in expect.words:
            assert word in action.report.message
    template = {"kept": None, "delivered": DELIVERED_TEMPLATE, "stripped": USERS_TEMPLATE}[expect.template]
    assert action.template == template
    assert (action.effect(CreateClaim) is not None) == expect.creates_claim
    assert (action.effect(StartMaterialization) is not None) == expect.starts_job
    removed = action.effect(RemoveJob)
    assert (removed is not None and not removed.finished) == expect.removes_job
    assert (removed is not None and removed.finished) == expect.removes_finished_job
    patched = action.effect(PatchClaim)
    assert (patched.patch if patched is not None else None) == expect.claim_patch
    assert action.requeue == expect.requeue
    assert (action.effect(UngatePods) is not None) == expect.ungates


# The safe order of a pass: the claim and its Job, the template that mounts the claim, the Pods'
# gates, the report (it says what was done), then the cleanup of a steady state.
EFFECT_ORDER = {
    WaitForSlot: 0,
    CreateClaim: 0,
    PatchClaim: 0,
    RemoveJob: 0,
    StartMaterialization: 0,
    WriteTemplate: 1,
    UngatePods: 2,
    WriteReport: 3,
    DeleteStaleReplicaSets: 4,
    ReleaseClaims: 4,
}


@pytest.mark.parametrize("rule", RULES)
def test_every_verdict_lists_its_effects_in_the_safe_order_with_one_report(rule: str) -> None:
    action = decide(RULES[rule][0])
    assert action is not None

    ranks = [EFFECT_ORDER[type(effect)] for effect in action.effects]

    assert ranks == sorted(ranks), [type(effect).__name__ for effect in action.effects]
    assert [type(effect) for effect in action.effects].count(WriteReport) == 1
    if action.template is not None:
        # Not in the pass that writes the template: its ReplicaSet and Pods are not made yet.
        assert action.effect(DeleteStaleReplicaSets) is None
        assert action.effect(ReleaseClaims) is None


def test_a_steady_delivery_cleans_up_after_its_report_and_keeps_its_claim() -> None:
    action = decide(with_(template=DELIVERED_TEMPLATE, claim=MATERIALIZED))
    assert action is not None

    assert action.effect(DeleteStaleReplicaSets) is not None
    assert action.effect(ReleaseClaims) == ReleaseClaims(wanted=CLAIM)


def test_every_shared_pvc_reason_is_reached_by_a_rule() -> None:
    reached = {expect.reason for _, expect in RULES.values()}

    # The other one is NodeCache mode's own (test_node_cache_decision.py).
    assert reached - {None} == set(DeliveryReason) - {DeliveryReason.INSUFFICIENT_NODE_CACHE_CAPACITY}


def test_a_stopped_or_blocked_delivery_keeps_the_template_that_mounts_its_claim() -> None:
    kept = 0
    for rule, (seen, _) in RULES.items():
        action = decide(seen, policy=POLICY, now=NOW)
        assert action is not None
        if seen.request is not None and seen.template == DELIVERED_TEMPLATE:
            assert action.template is None, rule
            kept += 1

    assert kept >= 5


def test_the_claim_created_is_the_one_the_model_set_wants() -> None:
    action = decide(with_(claim=None), policy=POLICY, now=NOW)

    assert action is not None
    created = action.effect(CreateClaim)
    assert created is not None
    assert created.manifest["metadata"]["name"] == wanted_claim(REQUEST, MODELS) == CLAIM
    assert created.manifest["spec"]["storageClassName"] == "nfs"


def test_the_materialization_copies_every_model_into_the_claim() -> None:
    action = decide(BASE, policy=POLICY, now=NOW)

    assert action is not None
    assert action.effect(StartMaterialization) == StartMaterialization(CLAIM, RESOLVED)


def test_fixing_the_cluster_returns_to_delivered_without_touching_the_workload() -> None:
    steps = [
        with_(claim=None, storage=ClassChoice(None, problem="no class")),
        with_(claim=None),
        with_(claim=PENDING, provisioning_failure="no capacity"),
        with_(claim=BOUND),
        with_(claim=BOUND, materialization=MaterializationSeen(JobState.RUNNING)),
        with_(claim=BOUND, materialization=MaterializationSeen(JobState.SUCCEEDED)),
    ]
    actions = [decide(seen, policy=POLICY, now=NOW) for seen in steps]
    reasons = [action.report.reason if action and action.report else None for action in actions]

    assert reasons == [
        DeliveryReason.SHARED_PVC_STORAGE_CLASS_MISSING,
        DeliveryReason.SHARED_PVC_CLAIM_PENDING,
        DeliveryReason.SHARED_PVC_PROVISIONING_FAILED,
        DeliveryReason.SHARED_PVC_MATERIALIZING,
        DeliveryReason.SHARED_PVC_MATERIALIZING,
        DeliveryReason.DELIVERED,
    ]
    last = actions[-1]
    assert last is not None
    assert last.template == DELIVERED_TEMPLATE
    assert not gated(last.template)


def test_the_module_namespace_and_a_workload_that_never_asked_get_nothing() -> None:
    assert (
        decide(
            with_(workload=Workload(WorkloadKind.DEPLOYMENT, MODULE_NAMESPACE, "api")), policy=POLICY, now=NOW
        )
        is None
    )
    assert (
        decide(with_(request=None, template=USERS_TEMPLATE, annotations={}), policy=POLICY, now=NOW) is None
    )


def test_a_claim_of_another_model_set_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="is not the claim"):
        decide(with_(claim=dataclasses.replace(BOUND, name="ai-models-web-other")), policy=POLICY, now=NOW)


def test_no_claim_name_while_a_model_is_not_ready() -> None:
    assert wanted_claim(REQUEST, model(QWEN, ModelPhase.PENDING)) is None


# ----- reading what was observed -------------------------------------------------------------------


def event(uid: str, message: str, *, at: str = "2026-12-01T11:59:00Z", **changes: Any) -> dict[str, Any]:
    return {
        "type": "Warning",
        "reason": "ProvisioningFailed",
        "message": message,
        "involvedObject": {"kind": "PersistentVolumeClaim", "name": CLAIM, "uid": uid},
        "lastTimestamp": at,
        **changes,
    }


def test_a_forged_provisioning_failed_event_with_another_uid_is_ignored() -> None:
    events = [
        event("uid-forged", "pay us to get a volume"),
        event("uid-claim", "no capacity in pool a", at="2026-12-01T11:00:00Z"),
    ]

    assert provisioning_failure(events, claim_uid="uid-claim") == "no capacity in pool a"
    assert provisioning_failure([events[0]], claim_uid="uid-claim") is None


def test_only_warning_provisioning_failed_events_count_and_the_latest_wins() -> None:
    events = [
        event("uid-claim", "old failure", at="2026-12-01T10:00:00Z"),
        event("uid-claim", "newest failure", at="2026-12-01T11:30:00Z"),
        event("uid-claim", "normal news", type="Normal"),
        event("uid-claim", "other reason", reason="ExternalProvisioning"),
        event("uid-claim", "about a pod", involvedObject={"kind": "Pod", "uid": "uid-claim"}),
    ]

    assert provisioning_failure(events, claim_uid="uid-claim") == "newest failure"
    assert provisioning_failure(events, claim_uid="") is None


def test_the_provisioner_message_is_verbatim_on_one_bounded_line() -> None:
    assert provisioner_text("failed:\n\tquota\x00 exceeded ") == "failed: quota  exceeded"
    assert len(provisioner_text("x" * 5000)) == 512


def test_a_claim_object_is_observed_with_its_phase_volume_owner_and_recorded_digests() -> None:
    obj = {
        "metadata": {
            "name": CLAIM,
            "namespace": "team-a",
            "uid": "uid-claim",
            "creationTimestamp": "2026-12-01T11:55:00Z",
            "labels": OURS,
            "ownerReferences": [{"uid": "uid-web"}],
            "annotations": {MATERIALIZED_DIGESTS_ANNOTATION: f"{D_BGE},{D_QWEN}"},
        },
        "spec": {"storageClassName": "nfs", "volumeName": "pv-1"},
        "status": {"phase": "Bound"},
    }

    assert ClaimSeen.of(obj, volume_exists=True) == MATERIALIZED


def test_the_report_is_two_annotations_and_an_event_type() -> None:
    report = DeliveryReport(DeliveryReason.SHARED_PVC_PROVISIONING_FAILED, "m" * 2000)

    annotations = report.annotations()

    assert annotations[DELIVERY_REASON_ANNOTATION] == "SharedPVCProvisioningFailed"
    assert len(annotations[DELIVERY_MESSAGE_ANNOTATION]) == 1024
    assert report.event_type == "Warning"
    assert DeliveryReport(DeliveryReason.DELIVERED, "ok").event_type == "Normal"
    assert report_of(annotations) == DeliveryReport(report.reason, annotations[DELIVERY_MESSAGE_ANNOTATION])
    assert report_of({DELIVERY_REASON_ANNOTATION: "Whatever"}) is None
    assert not changed(annotations, DeliveryReport(report.reason, "m" * 2000))
    assert changed(annotations, DeliveryReport(DeliveryReason.DELIVERED, "ok"))
    assert changed(annotations, None)
    assert not changed({}, None)


# ----- admission -----------------------------------------------------------------------------------

NEW = with_(workload=dataclasses.replace(WEB, uid=""), template=USERS_TEMPLATE, claim=None, annotations={})


@pytest.mark.parametrize(
    ("seen", "expected"),
    [
        pytest.param(
            NEW, gate(DELIVERED_TEMPLATE), id="ready_models_get_the_complete_template_with_the_gate"
        ),
        pytest.param(
            with_(template=USERS_TEMPLATE, claim=MATERIALIZED),
            DELIVERED_TEMPLATE,
            id="a_filled_claim_gets_the_complete_template_without_the_gate",
        ),
        pytest.param(
            dataclasses.replace(NEW, models=model(QWEN, ModelPhase.PUBLISHING)),
            GATED,
            id="a_model_not_ready_gates_the_users_template",
        ),
        pytest.param(
            dataclasses.replace(NEW, request=InvalidSpec(WEB, ("bad",))),
            GATED,
            id="a_broken_request_gates_the_users_template",
        ),
        pytest.param(
            dataclasses.replace(NEW, template=gate(DELIVERED_TEMPLATE)),
            None,
            id="an_admitted_template_is_admitted_unchanged",
        ),
        pytest.param(
            with_(template=DELIVERED_TEMPLATE, models=model(QWEN, ModelPhase.FAILED)),
            None,
            id="a_blocked_delivery_keeps_the_template_that_mounts_its_claim",
        ),
        pytest.param(
            with_(
                template=DELIVERED_TEMPLATE,
                claim=None,
                models=model(QWEN, ModelPhase.READY, "sha256:" + "c3" * 32, GIB),
            ),
            None,
            id="a_new_model_set_keeps_the_old_claim_mounted_until_the_new_one_is_filled",
        ),
        pytest.param(
            dataclasses.replace(NEW, request=None), None, id="a_workload_that_asks_for_nothing_is_left_alone"
        ),
        pytest.param(
            with_(template=gate(DELIVERED_TEMPLATE), claim=MATERIALIZED),
            None,
            id="an_update_of_a_delivered_gated_template_keeps_the_gate_no_rollout",
        ),
        pytest.param(
            with_(template=DELIVERED_TEMPLATE, request=None),
            USERS_TEMPLATE,
            id="an_update_that_removes_the_annotations_strips_the_template",
        ),
        pytest.param(
            with_(template=GATED, request=None),
            USERS_TEMPLATE,
            id="an_update_that_removes_the_annotations_drops_the_gate",
        ),
        pytest.param(
            dataclasses.replace(NEW, workload=Workload(WorkloadKind.DEPLOYMENT, MODULE_NAMESPACE, "api")),
            None,
            id="the_module_namespace_is_left_alone",
        ),
    ],
)
def test_admission(seen: Seen, expected: dict[str, Any] | None) -> None:
    assert admit(seen) == expected


def test_a_deployment_admitted_with_ready_models_is_delivered_without_a_second_template() -> None:
    admitted = admit(NEW)
    assert admitted is not None

    action = decide(with_(template=admitted, claim=MATERIALIZED), policy=POLICY, now=NOW)

    assert action is not None
    assert action.report is not None
    assert action.report.reason is DeliveryReason.DELIVERED
    assert action.template is None
    assert action.effect(UngatePods) is not None
