"""What a reconcile and an admission do in NodeCache mode, and the one NodeCache reason of SharedPVC
mode: one row per rule, every reason reached, placement conflicts, capacity with and without the
Nodes' reports, and the mode switch in both directions."""

from __future__ import annotations

import dataclasses
import datetime
import json
from typing import Any

import pytest

from ai_models.domain.delivery import verdict
from ai_models.domain.delivery.claim_facts import ClaimFacts, ClaimSeen
from ai_models.domain.delivery.claims import ClassChoice, claim_name
from ai_models.domain.delivery.contract import DeliveryRequest, InvalidSpec, parse
from ai_models.domain.delivery.effects import (
    CreateClaim,
    PatchClaim,
    RemoveJob,
    StartMaterialization,
    UngatePods,
)
from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.domain.delivery.modes.node_cache import NodeCache
from ai_models.domain.delivery.modes.shared_pvc import Policy, SharedPVC
from ai_models.domain.delivery.placement import (
    REPORT_MAX_CHARACTERS,
    NodeCacheSeen,
    NodeSeen,
    capacity_problem,
    node_seen,
    placement,
    reported_limit,
    selected_nodes,
)
from ai_models.domain.delivery.template import (
    CachedModel,
    DeliveredModel,
    applied,
    gate,
    gated,
    node_cache_volume_source,
    rewrite,
    rewrite_for_node_cache,
    strip,
)
from ai_models.domain.delivery.verdict import DeliveryObservation, Verdict
from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage.prerequisites import ClaimPhase
from ai_models.names import (
    CLUSTER_MODEL_ANNOTATION,
    MODEL_ANNOTATION,
    MODULE,
    MODULE_LABEL,
    NODE_CACHE_DRIVER,
    NODE_CACHE_READY_LABEL,
    NODE_CACHE_REPORT_ANNOTATION,
    OWNER_UID_LABEL,
    SHARED_PVC_LABEL,
    SHARED_PVC_LABEL_VALUE,
    DeliveryReason,
    ModelKind,
    ModelPhase,
)

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
POLICY = Policy(
    provisioning_deadline=datetime.timedelta(minutes=10), materialization_retry=datetime.timedelta(1)
)
GIB = 1024**3
QWEN = ModelKey(ModelKind.MODEL, "team-a", "qwen")
BGE = ModelKey(ModelKind.CLUSTER_MODEL, "", "bge")
D_QWEN = "sha256:" + "a1" * 32
D_BGE = "sha256:" + "b2" * 32
GPU = {"node-role.example.com/gpu": ""}
PLACEMENT = {**GPU, NODE_CACHE_READY_LABEL: "true"}
SETTINGS = NodeCacheSeen(selector=GPU, size_bytes=10 * GIB)
UNAVAILABLE = (
    "node-driver-registrar image for Kubernetes 1.35 missing: the NodeCache node plugin is not deployed"
)


def workload_object(template_spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "team-a",
            "uid": "uid-web",
            "annotations": {MODEL_ANNOTATION: "qwen", CLUSTER_MODEL_ANNOTATION: "bge"},
        },
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": template_spec or {"containers": [{"name": "server", "image": "vllm"}]},
            }
        },
    }


OBJ = workload_object()
REQUEST = parse(OBJ)
assert isinstance(REQUEST, DeliveryRequest)
WEB = REQUEST.workload
USERS_TEMPLATE = OBJ["spec"]["template"]
MODELS = {
    QWEN: ModelSeen(QWEN, ModelPhase.READY, D_QWEN, 4 * GIB),
    BGE: ModelSeen(BGE, ModelPhase.READY, D_BGE, GIB),
}
CACHED = [CachedModel(BGE, D_BGE), CachedModel(QWEN, D_QWEN)]
DELIVERED = rewrite_for_node_cache(USERS_TEMPLATE, models=CACHED, node_selector=PLACEMENT)
CLAIM = claim_name(WEB, [D_QWEN, D_BGE])
SHARED = rewrite(USERS_TEMPLATE, claim=CLAIM, models=[item.delivered for item in CACHED])

Seen = DeliveryObservation[Any]
BASE: Seen = DeliveryObservation(
    workload=WEB,
    facts=SETTINGS,
    annotations=OBJ["metadata"]["annotations"],
    template=USERS_TEMPLATE,
    request=REQUEST,
    models=MODELS,
)
CLAIM_FACTS = {field.name for field in dataclasses.fields(ClaimFacts)}


def with_(
    *, mode: DeliveryMode | None = None, node_cache: NodeCacheSeen | None = None, **changes: Any
) -> Seen:
    """BASE with `changes`; in SharedPVC `mode` (or with a SharedPVC fact), facts of that mode."""
    return in_mode(BASE, mode=mode, node_cache=node_cache, **changes)


def in_mode(
    seen: Seen, *, mode: DeliveryMode | None = None, node_cache: NodeCacheSeen | None = None, **changes: Any
) -> Seen:
    facts = {key: value for key, value in changes.items() if key in CLAIM_FACTS}
    common = {key: value for key, value in changes.items() if key not in CLAIM_FACTS}
    if mode is DeliveryMode.SHARED_PVC or facts:
        return dataclasses.replace(seen, facts=ClaimFacts(**facts), **common)
    if mode is DeliveryMode.NODE_CACHE or node_cache is not None:
        return dataclasses.replace(seen, facts=node_cache or SETTINGS, **common)
    return dataclasses.replace(seen, **common)


def rules_of(seen: Seen) -> Any:
    return SharedPVC(POLICY) if isinstance(seen.facts, ClaimFacts) else NodeCache()


def decide(seen: Seen, *, policy: Policy = POLICY, now: datetime.datetime = NOW) -> Verdict | None:
    return verdict.decide(seen, rules_of(seen), now=now)


def admit(seen: Seen) -> dict[str, Any] | None:
    return verdict.admit(seen, rules_of(seen), now=NOW).template


def conflicting(value: str) -> dict[str, Any]:
    template: dict[str, Any] = json.loads(json.dumps(USERS_TEMPLATE))
    template["spec"]["nodeSelector"] = {NODE_CACHE_READY_LABEL: value}
    return template


def reporting(*limits: int | None) -> NodeCacheSeen:
    return dataclasses.replace(
        SETTINGS, nodes=tuple(NodeSeen(f"node-{index}", limit) for index, limit in enumerate(limits))
    )


@dataclasses.dataclass(frozen=True)
class Expect:
    reason: DeliveryReason | None
    words: tuple[str, ...] = ()
    template: str = "kept"  # kept | delivered | stripped
    rule: str = ""
    ungates: bool = False


RULES: dict[str, tuple[Seen, Expect]] = {
    "delivered": (
        BASE,
        Expect(
            DeliveryReason.DELIVERED,
            ("ClusterModel bge, Model team-a/qwen delivered from the node cache", NODE_CACHE_READY_LABEL),
            template="delivered",
            ungates=True,
        ),
    ),
    "a_delivered_template_is_not_written_again": (
        with_(template=DELIVERED),
        Expect(DeliveryReason.DELIVERED, rule="delivered", ungates=True),
    ),
    "a_gated_template_gets_the_complete_one_without_the_gate": (
        with_(template=gate(USERS_TEMPLATE)),
        Expect(DeliveryReason.DELIVERED, template="delivered", rule="delivered", ungates=True),
    ),
    "a_shared_pvc_template_is_rewritten_for_the_node_cache": (
        with_(template=SHARED),
        Expect(DeliveryReason.DELIVERED, template="delivered", rule="delivered", ungates=True),
    ),
    "invalid_spec": (
        with_(request=InvalidSpec(WEB, ("the annotation ai.deckhouse.io/model has an empty model name",))),
        Expect(DeliveryReason.INVALID_SPEC, ("empty model name",)),
    ),
    "node_selector_conflict": (
        with_(template=conflicting("false")),
        Expect(
            DeliveryReason.INVALID_SPEC,
            (f"{NODE_CACHE_READY_LABEL}='false'", f"{NODE_CACHE_READY_LABEL}='true'", "remove"),
        ),
    ),
    "model_not_ready": (
        with_(models={**MODELS, QWEN: ModelSeen(QWEN, ModelPhase.PUBLISHING)}),
        Expect(DeliveryReason.MODEL_NOT_READY, ("Model team-a/qwen is Publishing, not Ready",)),
    ),
    "a_model_losing_ready_keeps_the_delivered_template": (
        with_(template=DELIVERED, models={**MODELS, BGE: ModelSeen(BGE, ModelPhase.FAILED, D_BGE, GIB)}),
        Expect(DeliveryReason.MODEL_NOT_READY, rule="model_not_ready"),
    ),
    "insufficient_node_cache_capacity": (
        with_(node_cache=dataclasses.replace(SETTINGS, size_bytes=4 * GIB)),
        Expect(
            DeliveryReason.INSUFFICIENT_NODE_CACHE_CAPACITY,
            (
                "5.0 GiB",
                "Model team-a/qwen 4.0 GiB",
                "ClusterModel bge 1.0 GiB",
                "delivery.nodeCache.size is 4.0 GiB",
            ),
        ),
    ),
    "capacity_exceeding_every_reported_limit": (
        with_(node_cache=reporting(2 * GIB, 3 * GIB, None)),
        Expect(
            DeliveryReason.INSUFFICIENT_NODE_CACHE_CAPACITY,
            ("largest cache", "3.0 GiB (node node-1, of 2 reporting"),
            rule="insufficient_node_cache_capacity",
        ),
    ),
    "capacity_fits_the_largest_reported_limit": (
        with_(node_cache=reporting(2 * GIB, 6 * GIB)),
        Expect(DeliveryReason.DELIVERED, template="delivered", rule="delivered", ungates=True),
    ),
    "nodes_without_reports_allow_what_the_setting_allows": (
        with_(node_cache=reporting(None, None)),
        Expect(DeliveryReason.DELIVERED, template="delivered", rule="delivered", ungates=True),
    ),
    "insufficient_capacity_keeps_a_delivered_template": (
        with_(template=DELIVERED, node_cache=reporting(GIB)),
        Expect(DeliveryReason.INSUFFICIENT_NODE_CACHE_CAPACITY, rule="insufficient_node_cache_capacity"),
    ),
    "node_plugin_not_deployed": (
        with_(node_cache=dataclasses.replace(SETTINGS, unavailable=UNAVAILABLE)),
        Expect(DeliveryReason.NODE_CACHE_DELIVERY_DISABLED, (UNAVAILABLE,)),
    ),
    "annotations_removed": (
        with_(request=None, template=DELIVERED, annotations={}),
        Expect(None, template="stripped", ungates=True),
    ),
}


@pytest.mark.parametrize("rule", RULES)
def test_node_cache_rule(rule: str) -> None:
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
    template = {"kept": None, "delivered": DELIVERED, "stripped": USERS_TEMPLATE}[expect.template]
    assert action.template == template
    # Nothing of SharedPVC in NodeCache mode: no claim, no Job.
    for kind in (CreateClaim, PatchClaim, StartMaterialization, RemoveJob):
        assert action.effect(kind) is None
    assert (action.effect(UngatePods) is not None) == expect.ungates


def test_every_reason_of_the_node_cache_mode_is_reached_by_a_rule() -> None:
    reached = {expect.reason for _, expect in RULES.values()} - {None}

    assert reached == {
        DeliveryReason.DELIVERED,
        DeliveryReason.MODEL_NOT_READY,
        DeliveryReason.INVALID_SPEC,
        DeliveryReason.INSUFFICIENT_NODE_CACHE_CAPACITY,
        DeliveryReason.NODE_CACHE_DELIVERY_DISABLED,
    }


def test_the_delivered_template_places_pods_and_mounts_one_inline_volume_per_model() -> None:
    action = decide(BASE, policy=POLICY, now=NOW)
    assert action is not None
    assert action.template is not None

    spec = action.template["spec"]

    assert spec["nodeSelector"] == PLACEMENT
    assert [volume["csi"]["driver"] for volume in spec["volumes"]] == [NODE_CACHE_DRIVER] * 2
    assert strip(action.template) == USERS_TEMPLATE


# ----- SharedPVC mode: a template that needs the node cache ----------------------------------------

HAND_WRITTEN = workload_object(
    {
        "containers": [{"name": "server", "image": "vllm"}],
        "volumes": [node_cache_volume_source(CachedModel(QWEN, D_QWEN)) | {"name": "my-model"}],
    }
)
SHARED_MODE = with_(
    mode=DeliveryMode.SHARED_PVC,
    node_cache=NodeCacheSeen(),
    template=HAND_WRITTEN["spec"]["template"],
    storage=ClassChoice("nfs", binding_mode="Immediate"),
)


def test_in_shared_pvc_mode_a_hand_written_node_cache_volume_is_node_cache_delivery_disabled() -> None:
    action = decide(SHARED_MODE, policy=POLICY, now=NOW)

    assert action is not None
    assert action.rule == "node_cache_delivery_disabled"
    assert action.report is not None
    assert action.report.reason is DeliveryReason.NODE_CACHE_DELIVERY_DISABLED
    for word in ("my-model", NODE_CACHE_DRIVER, "switch delivery.mode to NodeCache", "remove the volume"):
        assert word in action.report.message
    assert action.template is None
    assert action.effect(CreateClaim) is None


def test_in_node_cache_mode_the_same_hand_written_volume_is_the_users_and_delivery_goes_on() -> None:
    action = decide(
        in_mode(SHARED_MODE, mode=DeliveryMode.NODE_CACHE),
        policy=POLICY,
        now=NOW,
    )

    assert action is not None
    assert action.report is not None
    assert action.report.reason is DeliveryReason.DELIVERED


def test_switching_node_cache_back_to_shared_pvc_is_no_node_cache_delivery_disabled() -> None:
    # The module's own volumes (its record) are not the user's: SharedPVC delivery starts afresh.
    action = decide(
        with_(
            mode=DeliveryMode.SHARED_PVC,
            template=DELIVERED,
            storage=ClassChoice("nfs", binding_mode="Immediate"),
        ),
        policy=POLICY,
        now=NOW,
    )

    assert action is not None
    assert action.report is not None
    assert action.report.reason is DeliveryReason.SHARED_PVC_CLAIM_PENDING
    assert action.effect(CreateClaim) is not None
    assert action.template is None  # kept (its pods keep running) until the claim is filled


def test_switching_back_delivers_the_shared_pvc_template_from_the_filled_claim() -> None:
    claim = ClaimSeen(
        name=CLAIM,
        uid="uid-claim",
        phase=ClaimPhase.BOUND,
        created=NOW,
        labels={SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE, MODULE_LABEL: MODULE, OWNER_UID_LABEL: "uid-web"},
        owner_uids=frozenset({"uid-web"}),
        materialized=frozenset({D_QWEN, D_BGE}),
    )

    action = decide(
        with_(mode=DeliveryMode.SHARED_PVC, template=DELIVERED, claim=claim), policy=POLICY, now=NOW
    )

    assert action is not None
    assert action.template == SHARED
    record = applied(SHARED)
    assert record is not None
    assert record.claim == CLAIM


# ----- admission -----------------------------------------------------------------------------------

NEW = with_(workload=dataclasses.replace(WEB, uid=""), annotations={})


@pytest.mark.parametrize(
    ("seen", "expected"),
    [
        pytest.param(NEW, DELIVERED, id="ready_models_get_the_complete_template_without_the_gate"),
        pytest.param(
            dataclasses.replace(NEW, models={**MODELS, QWEN: ModelSeen(QWEN, None)}),
            gate(USERS_TEMPLATE),
            id="a_missing_model_gates",
        ),
        pytest.param(
            dataclasses.replace(NEW, request=InvalidSpec(WEB, ("bad",))),
            gate(USERS_TEMPLATE),
            id="a_broken_request_gates",
        ),
        pytest.param(
            dataclasses.replace(NEW, template=conflicting("false")),
            gate(conflicting("false")),
            id="a_conflicting_node_selector_gates",
        ),
        pytest.param(
            in_mode(NEW, node_cache=dataclasses.replace(SETTINGS, size_bytes=GIB)),
            gate(USERS_TEMPLATE),
            id="models_larger_than_the_cache_size_gate",
        ),
        pytest.param(
            in_mode(NEW, node_cache=dataclasses.replace(SETTINGS, unavailable=UNAVAILABLE)),
            gate(USERS_TEMPLATE),
            id="a_release_without_the_node_plugin_gates",
        ),
        pytest.param(
            dataclasses.replace(NEW, template=DELIVERED), None, id="an_admitted_template_is_unchanged"
        ),
        pytest.param(
            dataclasses.replace(NEW, template=gate(DELIVERED)),
            None,
            id="a_complete_gated_template_is_unchanged",
        ),
        pytest.param(
            dataclasses.replace(NEW, template=SHARED),
            DELIVERED,
            id="an_update_rewrites_a_shared_pvc_template",
        ),
        pytest.param(
            dataclasses.replace(
                NEW, template=DELIVERED, models={**MODELS, QWEN: ModelSeen(QWEN, ModelPhase.FAILED)}
            ),
            None,
            id="a_blocked_delivery_keeps_its_template",
        ),
        pytest.param(
            dataclasses.replace(NEW, template=DELIVERED, request=None),
            USERS_TEMPLATE,
            id="an_update_that_removes_the_annotations_strips_the_template",
        ),
    ],
)
def test_admission_in_node_cache_mode(seen: Seen, expected: dict[str, Any] | None) -> None:
    assert admit(seen) == expected


def test_admission_does_not_judge_the_nodes_reports_the_controller_does() -> None:
    seen = in_mode(NEW, node_cache=reporting(GIB))

    assert admit(seen) == DELIVERED
    action = decide(dataclasses.replace(seen, template=DELIVERED), policy=POLICY, now=NOW)
    assert action is not None
    assert action.report is not None
    assert action.report.reason is DeliveryReason.INSUFFICIENT_NODE_CACHE_CAPACITY


def test_a_workload_admitted_complete_is_delivered_without_a_second_template() -> None:
    admitted = admit(NEW)
    assert admitted is not None
    assert not gated(admitted)

    action = decide(with_(template=admitted), policy=POLICY, now=NOW)

    assert action is not None
    assert action.template is None


def test_admission_in_shared_pvc_mode_gates_a_template_that_needs_the_node_cache() -> None:
    seen = dataclasses.replace(SHARED_MODE, workload=dataclasses.replace(WEB, uid=""))

    assert admit(seen) == gate(HAND_WRITTEN["spec"]["template"])


# ----- placement and capacity ----------------------------------------------------------------------


def node(name: str, labels: dict[str, str], report: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if report is not None:
        meta["annotations"] = {NODE_CACHE_REPORT_ANNOTATION: report}
    return {"kind": "Node", "metadata": meta}


def report(limit: object) -> str:
    return json.dumps({"limitBytes": limit, "usedBytes": 0, "availableBytes": 0, "readyDigests": []})


def test_placement_is_the_setting_plus_the_readiness_label() -> None:
    assert placement(GPU) == PLACEMENT
    assert placement({}) == {NODE_CACHE_READY_LABEL: "true"}
    # The readiness is the module's: a setting naming the label cannot turn it off.
    assert placement({NODE_CACHE_READY_LABEL: "false"}) == {NODE_CACHE_READY_LABEL: "true"}


def test_selected_nodes_are_those_of_the_selector_with_their_reported_limits() -> None:
    nodes = [
        node("b", {**GPU, NODE_CACHE_READY_LABEL: "true"}, report(8 * GIB)),
        node("a", GPU),
        node("c", {"other": "x"}, report(100 * GIB)),
    ]

    assert selected_nodes(nodes, GPU) == (NodeSeen("a", None), NodeSeen("b", 8 * GIB))


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "{not json",
        "[]",
        report("8Gi"),
        report(-1),
        report(True),
        report(None),
        "x" * (REPORT_MAX_CHARACTERS + 1),
    ],
)
def test_a_report_that_cannot_be_read_counts_as_no_report(text: str | None) -> None:
    assert reported_limit(text) is None
    assert node_seen(node("n", {}, text)).limit_bytes is None


def test_two_models_of_one_digest_take_its_size_once() -> None:
    other = ModelKey(ModelKind.MODEL, "team-a", "qwen-copy")
    artifacts = [(QWEN, D_QWEN, 4 * GIB), (other, D_QWEN, 4 * GIB)]

    assert capacity_problem(artifacts, dataclasses.replace(SETTINGS, size_bytes=4 * GIB)) is None
    assert capacity_problem(artifacts, dataclasses.replace(SETTINGS, size_bytes=4 * GIB - 1)) is not None


def test_without_a_size_setting_or_reports_nothing_limits_the_models() -> None:
    assert capacity_problem([(QWEN, D_QWEN, 10**15)], NodeCacheSeen()) is None


def test_the_capacity_message_names_both_limits_and_the_fix() -> None:
    message = capacity_problem(
        [(QWEN, D_QWEN, 4 * GIB)], dataclasses.replace(reporting(GIB), size_bytes=2 * GIB)
    )

    assert message is not None
    for word in (
        "4.0 GiB in one node's cache",
        "delivery.nodeCache.size is 2.0 GiB and the largest cache",
        "raise delivery.nodeCache.size",
        "delivery.nodeCache.nodeSelector",
        "fewer or smaller models",
    ):
        assert word in message


def test_a_shared_pvc_delivered_model_is_the_same_directory_in_node_cache_mode() -> None:
    assert [item.delivered for item in CACHED] == [
        DeliveredModel("bge", D_BGE),
        DeliveredModel("qwen", D_QWEN),
    ]
