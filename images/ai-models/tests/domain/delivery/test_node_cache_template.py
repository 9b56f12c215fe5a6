"""The NodeCache pod-template rewrite: one inline CSI volume per model, the placement, and that it
comes off exactly, also when the mode changes in either direction."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_models.domain.delivery.contract import WorkloadKind, parse
from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.domain.delivery.template import (
    NODE_CACHE_VOLUME_NAME,
    CachedModel,
    DeliveredModel,
    applied,
    cache_volumes,
    gate,
    gated,
    json_patch,
    node_cache_volume,
    node_selector_conflicts,
    rewrite,
    rewrite_for_node_cache,
    strip,
)
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    DELIVERY_APPLIED_ANNOTATION,
    MODEL_ANNOTATION,
    MODELS_DIR,
    MODELS_DIR_VARIABLE,
    MODELS_VARIABLE,
    NODE_CACHE_DRIVER,
    NODE_CACHE_READY_LABEL,
    NODE_CACHE_VOLUME_PREFIX,
    SHARED_PVC_VOLUME,
    VOLUME_CLUSTER_MODEL_ATTRIBUTE,
    VOLUME_DIGEST_ATTRIBUTE,
    VOLUME_MODEL_ATTRIBUTE,
    ModelKind,
)

QWEN = CachedModel(ModelKey(ModelKind.MODEL, "team-a", "qwen"), "sha256:" + "a1" * 32)
BGE = CachedModel(ModelKey(ModelKind.CLUSTER_MODEL, "", "bge"), "sha256:" + "b2" * 32)
PLACEMENT = {"node-role.example.com/gpu": "", NODE_CACHE_READY_LABEL: "true"}
CLAIM = "ai-models-web-0123456789"


def users_template() -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "web"}, "annotations": {"team": "a"}},
        "spec": {
            "schedulingGates": [{"name": "example.com/quota"}],
            "nodeSelector": {"kubernetes.io/arch": "amd64"},
            "initContainers": [{"name": "warmup", "image": "busybox"}],
            "containers": [
                {
                    "name": "server",
                    "image": "vllm",
                    "env": [{"name": "MODEL", "value": "$(AI_MODELS_MODELS_DIR)/qwen"}],
                    "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
                },
                {"name": "sidecar", "image": "envoy"},
            ],
            "volumes": [{"name": "cache", "emptyDir": {}}],
        },
    }


def delivered(template: dict[str, Any] | None = None) -> dict[str, Any]:
    return rewrite_for_node_cache(
        users_template() if template is None else template, models=[QWEN, BGE], node_selector=PLACEMENT
    )


def test_one_read_only_inline_volume_per_model_names_the_model_and_its_digest() -> None:
    spec = delivered()["spec"]

    assert spec["volumes"] == [
        {"name": "cache", "emptyDir": {}},
        {
            "name": node_cache_volume(BGE.key),
            "csi": {
                "driver": NODE_CACHE_DRIVER,
                "readOnly": True,
                "volumeAttributes": {
                    VOLUME_CLUSTER_MODEL_ATTRIBUTE: "bge",
                    VOLUME_DIGEST_ATTRIBUTE: BGE.digest,
                },
            },
        },
        {
            "name": node_cache_volume(QWEN.key),
            "csi": {
                "driver": NODE_CACHE_DRIVER,
                "readOnly": True,
                "volumeAttributes": {VOLUME_MODEL_ATTRIBUTE: "qwen", VOLUME_DIGEST_ATTRIBUTE: QWEN.digest},
            },
        },
    ]


def test_every_container_mounts_each_model_whole_and_read_only_with_the_consumer_variables_first() -> None:
    spec = delivered()["spec"]

    for container in [*spec["initContainers"], *spec["containers"]]:
        assert container["env"][:2] == [
            {"name": MODELS_DIR_VARIABLE, "value": MODELS_DIR},
            {
                "name": MODELS_VARIABLE,
                "value": json.dumps(
                    [
                        {"name": "bge", "path": f"{MODELS_DIR}/bge", "digest": BGE.digest},
                        {"name": "qwen", "path": f"{MODELS_DIR}/qwen", "digest": QWEN.digest},
                    ],
                    separators=(",", ":"),
                ),
            },
        ]
        ours = [m for m in container["volumeMounts"] if m["name"].startswith(NODE_CACHE_VOLUME_PREFIX)]
        assert ours == [
            {"name": node_cache_volume(BGE.key), "mountPath": f"{MODELS_DIR}/bge", "readOnly": True},
            {"name": node_cache_volume(QWEN.key), "mountPath": f"{MODELS_DIR}/qwen", "readOnly": True},
        ]


def test_the_consumer_variable_is_the_same_in_both_modes() -> None:
    shared = rewrite(users_template(), claim=CLAIM, models=[QWEN.delivered, BGE.delivered])
    cached = delivered()

    for mode in (shared, cached):
        assert mode["spec"]["containers"][0]["env"][:2] == cached["spec"]["containers"][0]["env"][:2]


def test_placement_adds_the_selector_and_the_readiness_label_next_to_the_users_entries() -> None:
    result = delivered()

    assert result["spec"]["nodeSelector"] == {"kubernetes.io/arch": "amd64", **PLACEMENT}
    record = applied(result)
    assert record is not None
    assert record.mode is DeliveryMode.NODE_CACHE
    assert record.claim is None
    assert record.node_selector == PLACEMENT
    assert record.volumes == (node_cache_volume(BGE.key), node_cache_volume(QWEN.key))
    assert record.models == (BGE.delivered, QWEN.delivered)


def test_an_entry_the_user_already_has_with_the_same_value_is_the_users_and_stays() -> None:
    template = users_template()
    template["spec"]["nodeSelector"][NODE_CACHE_READY_LABEL] = "true"

    result = delivered(template)
    record = applied(result)

    assert record is not None
    assert NODE_CACHE_READY_LABEL not in record.node_selector
    assert strip(result) == template


def test_a_conflicting_user_entry_is_refused_never_overwritten() -> None:
    template = users_template()
    template["spec"]["nodeSelector"][NODE_CACHE_READY_LABEL] = "false"

    assert node_selector_conflicts(template, PLACEMENT) == {NODE_CACHE_READY_LABEL: "false"}
    with pytest.raises(ValueError, match=NODE_CACHE_READY_LABEL):
        delivered(template)


def test_the_module_entries_of_a_delivered_template_are_no_conflict_once_stripped() -> None:
    assert node_selector_conflicts(strip(delivered()), PLACEMENT) == {}
    assert node_selector_conflicts(strip(delivered()), {NODE_CACHE_READY_LABEL: "true", "zone": "b"}) == {}


def test_rewriting_a_rewritten_template_with_the_same_input_changes_nothing() -> None:
    once = delivered()

    assert rewrite_for_node_cache(once, models=[BGE, QWEN], node_selector=PLACEMENT) == once
    assert json_patch(once, delivered(once), prefix="/spec/template") == []


def test_stripping_gives_back_exactly_the_users_template_as_the_api_server_returns_it() -> None:
    bare: dict[str, Any] = {"metadata": {"creationTimestamp": None}, "spec": {"containers": [{"name": "c"}]}}
    empty: dict[str, Any] = {"metadata": {}, "spec": {}}
    for template in (users_template(), bare, empty):
        assert strip(gate(delivered(copy.deepcopy(template)))) == template
        assert strip(delivered(gate(copy.deepcopy(template)))) == template


def test_the_rewrite_removes_only_the_delivery_gate() -> None:
    result = delivered(gate(users_template()))

    assert result["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]
    assert not gated(result)


def test_switching_from_shared_pvc_to_node_cache_and_back_leaves_nothing_of_the_other_mode() -> None:
    shared = rewrite(users_template(), claim=CLAIM, models=[QWEN.delivered, BGE.delivered])

    cached = rewrite_for_node_cache(shared, models=[QWEN, BGE], node_selector=PLACEMENT)
    back = rewrite(cached, claim=CLAIM, models=[QWEN.delivered, BGE.delivered])

    assert cached == delivered()
    assert all(volume["name"] != SHARED_PVC_VOLUME for volume in cached["spec"]["volumes"])
    assert back == shared
    assert back["spec"]["nodeSelector"] == {"kubernetes.io/arch": "amd64"}
    assert cache_volumes(back) == frozenset()
    assert strip(cached) == strip(back) == users_template()


def test_a_new_model_set_replaces_the_old_volumes_instead_of_adding_to_them() -> None:
    republished = CachedModel(QWEN.key, "sha256:" + "c3" * 32)

    new = rewrite_for_node_cache(
        delivered(), models=[republished], node_selector={NODE_CACHE_READY_LABEL: "true"}
    )

    assert new == rewrite_for_node_cache(
        users_template(), models=[republished], node_selector={NODE_CACHE_READY_LABEL: "true"}
    )
    assert cache_volumes(new) == {(node_cache_volume(QWEN.key), republished.digest)}


def test_the_volume_name_is_a_dns_label_per_kind_and_name_and_keeps_across_digests() -> None:
    names = {node_cache_volume(ModelKey(kind, "ns", "x" * 253)) for kind in ModelKind}

    assert len(names) == 2
    for name in names:
        assert NODE_CACHE_VOLUME_NAME.match(name)
        assert len(name) <= 63
    assert node_cache_volume(QWEN.key) == CachedModel(QWEN.key, "sha256:" + "0" * 64).volume
    # The Model's namespace is the pod's: the same name in another namespace is the same volume.
    assert node_cache_volume(ModelKey(ModelKind.MODEL, "team-b", "qwen")) == node_cache_volume(QWEN.key)


def test_a_users_own_volume_named_like_a_node_cache_volume_is_invalid_spec() -> None:
    obj: dict[str, Any] = {
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a", "annotations": {MODEL_ANNOTATION: "qwen"}},
        "spec": {"template": users_template()},
    }
    obj["spec"]["template"]["spec"]["volumes"].append({"name": node_cache_volume(QWEN.key), "emptyDir": {}})

    problems = parse(obj)

    assert not hasattr(problems, "models")
    assert f"its own volume named {node_cache_volume(QWEN.key)}" in getattr(problems, "message", "")
    # What the module itself added is not the user's.
    obj["spec"]["template"] = delivered()
    assert hasattr(parse(obj), "models")


def test_a_damaged_node_cache_record_is_not_taken_for_the_modules_additions() -> None:
    result = delivered()
    record = json.loads(result["metadata"]["annotations"][DELIVERY_APPLIED_ANNOTATION])
    for damage in (
        {**record, "volumes": record["volumes"][:1]},
        {**record, "nodeSelector": ["x"]},
        {**record, "mode": "X"},
    ):
        broken = copy.deepcopy(result)
        broken["metadata"]["annotations"][DELIVERY_APPLIED_ANNOTATION] = json.dumps(damage)
        assert applied(broken) is None


def test_a_shared_pvc_record_without_a_mode_is_read_as_issue_12_wrote_it() -> None:
    shared = rewrite(users_template(), claim=CLAIM, models=[QWEN.delivered])
    record = applied(shared)

    assert record is not None
    assert "mode" not in json.loads(shared["metadata"]["annotations"][DELIVERY_APPLIED_ANNOTATION])
    assert (record.mode, record.claim, record.volumes) == (
        DeliveryMode.SHARED_PVC,
        CLAIM,
        (SHARED_PVC_VOLUME,),
    )
    assert record.models == (DeliveredModel("qwen", QWEN.digest),)


def test_the_json_patch_turns_the_users_template_into_the_node_cache_one_for_every_kind() -> None:
    for kind in WorkloadKind:
        before = users_template()
        after = delivered(before)
        obj: dict[str, Any] = {"kind": kind, "metadata": {"name": "web"}}
        node = obj
        for part in kind.template_path[:-1]:
            node = node.setdefault(part, {})
        node[kind.template_path[-1]] = before

        patched = jsonpatch.JsonPatch(json_patch(before, after, prefix=kind.template_pointer)).apply(obj)

        node = patched
        for part in kind.template_path:
            node = node[part]
        assert node == after


# ----- properties ----------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "server", NODE_CACHE_VOLUME_PREFIX + "x"])
ENV = st.lists(
    st.fixed_dictionaries({"name": st.sampled_from(["A", "B", "PATH"]), "value": st.text("ab", max_size=2)}),
    min_size=1,
    max_size=2,
)
MOUNTS = st.lists(
    st.fixed_dictionaries({"name": NAMES, "mountPath": st.sampled_from(["/a", "/b/c"])}),
    min_size=1,
    max_size=2,
)
CONTAINER = st.fixed_dictionaries(
    {"name": NAMES}, optional={"env": ENV, "volumeMounts": MOUNTS, "image": st.just("i")}
)
SELECTOR_KEYS = st.sampled_from(["zone", "gpu", NODE_CACHE_READY_LABEL])
# A pod template as the API server returns it: metadata always, and a spec with its containers.
TEMPLATE = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {},
            optional={
                "labels": st.dictionaries(st.sampled_from(["app"]), st.just("w"), min_size=1),
                "annotations": st.dictionaries(st.sampled_from(["team"]), st.just("a"), min_size=1),
            },
        ),
        "spec": st.fixed_dictionaries(
            {"containers": st.lists(CONTAINER, min_size=1, max_size=2)},
            optional={
                "initContainers": st.lists(CONTAINER, min_size=1, max_size=2),
                "volumes": st.lists(
                    st.fixed_dictionaries({"name": NAMES, "emptyDir": st.just({})}), min_size=1, max_size=2
                ),
                "nodeSelector": st.dictionaries(
                    SELECTOR_KEYS, st.sampled_from(["true", "a"]), min_size=1, max_size=2
                ),
                "schedulingGates": st.lists(
                    st.fixed_dictionaries({"name": st.just("example.com/q")}), min_size=1, max_size=1
                ),
            },
        ),
    },
)
MODELS = st.lists(
    st.sampled_from([QWEN, BGE, CachedModel(QWEN.key, "sha256:" + "c3" * 32)]),
    min_size=1,
    max_size=2,
    unique_by=lambda m: m.key,
)
PLACEMENTS = st.dictionaries(SELECTOR_KEYS, st.sampled_from(["true", "a"]), max_size=3)


@given(template=TEMPLATE, models=MODELS, placement=PLACEMENTS, gated_first=st.booleans())
def test_any_node_cache_rewrite_strips_back_to_the_users_template_and_is_idempotent(
    template: dict[str, Any], models: list[CachedModel], placement: dict[str, str], gated_first: bool
) -> None:
    if node_selector_conflicts(template, placement):
        with pytest.raises(ValueError, match="conflicts with the placement"):
            rewrite_for_node_cache(template, models=models, node_selector=placement)
        return
    source = gate(template) if gated_first else template

    once = rewrite_for_node_cache(source, models=models, node_selector=placement)

    assert strip(once) == template
    assert rewrite_for_node_cache(once, models=models, node_selector=placement) == once
    selector = (once.get("spec") or {}).get("nodeSelector") or {}
    assert all(selector.get(key) == value for key, value in placement.items())
    assert cache_volumes(once) == {(model.volume, model.digest) for model in models}
    assert jsonpatch.JsonPatch(json_patch(source, once, prefix="")).apply(copy.deepcopy(source)) == once


@given(template=TEMPLATE, models=MODELS)
def test_any_mode_switch_and_back_gives_the_same_template(
    template: dict[str, Any], models: list[CachedModel]
) -> None:
    placement = {NODE_CACHE_READY_LABEL: "true"}
    if node_selector_conflicts(template, placement):
        return
    shared = rewrite(template, claim=CLAIM, models=[model.delivered for model in models])
    cached = rewrite_for_node_cache(template, models=models, node_selector=placement)

    assert rewrite_for_node_cache(shared, models=models, node_selector=placement) == cached
    assert rewrite(cached, claim=CLAIM, models=[model.delivered for model in models]) == shared
