"""The pod-template rewrite: what delivery adds, that it is idempotent, and that it comes off exactly."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
from hypothesis import given
from hypothesis import strategies as st

from ai_models.domain.delivery.claim_layout import object_dir
from ai_models.domain.delivery.contract import WorkloadKind
from ai_models.domain.delivery.template import (
    DeliveredModel,
    applied,
    gate,
    gated,
    json_patch,
    rewrite,
    strip,
)
from ai_models.names import (
    DELIVERY_APPLIED_ANNOTATION,
    DELIVERY_SCHEDULING_GATE,
    MODELS_DIR,
    MODELS_DIR_VARIABLE,
    MODELS_VARIABLE,
    SHARED_PVC_VOLUME,
)

QWEN = DeliveredModel("qwen", "sha256:" + "a1" * 32)
BGE = DeliveredModel("bge", "sha256:" + "b2" * 32)
CLAIM = "ai-models-web-0123456789"


def users_template() -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "web"}, "annotations": {"team": "a"}},
        "spec": {
            "schedulingGates": [{"name": "example.com/quota"}],
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


def test_every_container_sees_each_model_read_only_with_the_variables_first() -> None:
    result = rewrite(users_template(), claim=CLAIM, models=[QWEN, BGE])

    spec = result["spec"]
    assert spec["volumes"][-1] == {
        "name": SHARED_PVC_VOLUME,
        "persistentVolumeClaim": {"claimName": CLAIM, "readOnly": True},
    }
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
        assert [m for m in container["volumeMounts"] if m["name"] == SHARED_PVC_VOLUME] == [
            {
                "name": SHARED_PVC_VOLUME,
                "mountPath": f"{MODELS_DIR}/bge",
                "subPath": object_dir(BGE.digest),
                "readOnly": True,
            },
            {
                "name": SHARED_PVC_VOLUME,
                "mountPath": f"{MODELS_DIR}/qwen",
                "subPath": object_dir(QWEN.digest),
                "readOnly": True,
            },
        ]
    assert spec["containers"][0]["env"][2] == {"name": "MODEL", "value": "$(AI_MODELS_MODELS_DIR)/qwen"}
    record = applied(result)
    assert record is not None
    assert (record.claim, record.models) == (CLAIM, (BGE, QWEN))


def test_the_rewrite_removes_only_the_delivery_gate() -> None:
    result = rewrite(gate(users_template()), claim=CLAIM, models=[QWEN])

    assert result["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]
    assert not gated(result)


def test_rewriting_a_rewritten_template_with_the_same_input_changes_nothing() -> None:
    once = rewrite(users_template(), claim=CLAIM, models=[QWEN, BGE])

    assert rewrite(once, claim=CLAIM, models=[BGE, QWEN]) == once
    assert json_patch(once, rewrite(once, claim=CLAIM, models=[QWEN, BGE]), prefix="/spec/template") == []


def test_stripping_gives_back_exactly_the_users_template_as_the_api_server_returns_it() -> None:
    bare: dict[str, Any] = {"metadata": {"creationTimestamp": None}, "spec": {"containers": [{"name": "c"}]}}
    empty: dict[str, Any] = {"metadata": {}, "spec": {}}
    for template in (users_template(), bare, empty):
        assert strip(rewrite(gate(template), claim=CLAIM, models=[QWEN])) == template


def test_a_new_model_set_replaces_the_old_one_instead_of_adding_to_it() -> None:
    old = rewrite(users_template(), claim=CLAIM, models=[QWEN, BGE])

    new = rewrite(old, claim="ai-models-web-other", models=[QWEN])

    assert new == rewrite(users_template(), claim="ai-models-web-other", models=[QWEN])


def test_a_container_the_user_added_after_the_rewrite_keeps_everything_it_has() -> None:
    delivered = rewrite(users_template(), claim=CLAIM, models=[QWEN])
    own = {"name": "later", "env": [{"name": MODELS_VARIABLE, "value": "mine"}]}
    delivered["spec"]["containers"].append(copy.deepcopy(own))

    assert strip(delivered)["spec"]["containers"][-1] == own


def test_gate_is_added_once() -> None:
    once = gate({"spec": {"containers": []}})

    assert gate(once) == once
    assert once["spec"]["schedulingGates"] == [{"name": DELIVERY_SCHEDULING_GATE}]
    assert strip(once) == {"spec": {"containers": []}}


def test_a_damaged_record_is_not_taken_for_the_modules_additions() -> None:
    delivered = rewrite(users_template(), claim=CLAIM, models=[QWEN])
    delivered["metadata"]["annotations"][DELIVERY_APPLIED_ANNOTATION] = "{not json"

    assert applied(delivered) is None
    assert strip(delivered)["spec"]["volumes"][-1]["name"] == SHARED_PVC_VOLUME


def test_the_json_patch_turns_the_old_template_into_the_new_one_under_the_template_path() -> None:
    for kind in WorkloadKind:
        before = users_template()
        after = rewrite(gate(before), claim=CLAIM, models=[QWEN, BGE])
        obj: dict[str, Any] = {"kind": kind, "metadata": {"name": "web"}}
        node = obj
        for part in kind.template_path[:-1]:
            node = node.setdefault(part, {})
        node[kind.template_path[-1]] = before

        operations = json_patch(before, after, prefix=kind.template_pointer)

        assert all(op["path"].startswith(kind.template_pointer + "/") for op in operations)
        patched = jsonpatch.JsonPatch(operations).apply(obj)
        node = patched
        for part in kind.template_path:
            node = node[part]
        assert node == after


def test_annotation_keys_are_escaped_in_patch_paths() -> None:
    operations = json_patch(
        {"metadata": {"annotations": {}}}, rewrite({}, claim=CLAIM, models=[QWEN]), prefix=""
    )

    assert {
        "op": "add",
        "path": "/spec",
        "value": rewrite({}, claim=CLAIM, models=[QWEN])["spec"],
    } in operations
    assert any(
        op["path"] == "/metadata/annotations/ai.deckhouse.io~1model-delivery-applied" for op in operations
    )


def test_a_missing_template_is_added_whole() -> None:
    assert json_patch(None, {"spec": {}}, prefix="/spec/template") == [
        {"op": "add", "path": "/spec/template", "value": {"spec": {}}}
    ]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text("a~/", max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text("ab~/", max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(
    old=st.dictionaries(st.text("ab~/", max_size=3), JSON, max_size=4),
    new=st.dictionaries(st.text("ab~/", max_size=3), JSON, max_size=4),
)
def test_any_json_patch_applies_to_its_old_document_and_gives_the_new_one(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    document = {"spec": {"template": copy.deepcopy(old)}}

    patched = jsonpatch.JsonPatch(json_patch(old, new, prefix="/spec/template")).apply(document)

    assert patched == {"spec": {"template": new}}
