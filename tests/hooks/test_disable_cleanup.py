"""disable_cleanup: what the after-delete hook writes from the snapshots addon-operator gives it
(D158). The jq-built snapshots of whole objects are in test_jq_filters.py; here the hook's own
decisions on hand-written filter results."""

from __future__ import annotations

import json
from typing import Any

import pytest
from deckhouse import hook

from ai_models.names import CATALOG_FINALIZER, MODEL_FINALIZER
from support.values import module_values


def after_delete(kit: Any, **snapshots: list[dict[str, Any]]) -> Any:
    return hook.testrun(
        kit.load("disable_cleanup").main,
        binding_context=[{"binding": "afterDeleteHelm", "snapshots": snapshots}],
        initial_values=module_values(),
    )


def test_the_hook_runs_only_after_helm_deleted_the_release(kit: Any) -> None:
    parsed = json.loads(kit.load("disable_cleanup").config)
    assert set(parsed) == {"configVersion", "afterDeleteHelm", "kubernetes"}
    for binding in parsed["kubernetes"]:
        assert binding["executeHookOnEvent"] == []
        assert binding["executeHookOnSynchronization"] is False


def test_an_empty_cluster_gets_no_operation(kit: Any) -> None:
    assert kit.kube(after_delete(kit)) == []


def test_claims_are_kept_and_each_is_named_with_the_command_that_deletes_it(
    kit: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    output = after_delete(
        kit, shared_claims=kit.snapshot({"namespace": "team-a", "name": "ai-models-web-01", "storage": "4Gi"})
    )

    assert kit.kube(output) == []
    logged = capsys.readouterr().err
    assert "team-a/ai-models-web-01 (4Gi)" in logged
    assert "kubectl -n team-a delete pvc ai-models-web-01" in logged


def test_only_the_modules_finalizers_are_removed(kit: Any) -> None:
    output = after_delete(
        kit,
        models=kit.snapshot(
            {"namespace": "team-a", "name": "qwen", "finalizers": [MODEL_FINALIZER, "example.com/keep"]},
            {"namespace": "team-a", "name": "free", "finalizers": []},
        ),
        catalogsources=kit.snapshot({"namespace": None, "name": "hub", "finalizers": [CATALOG_FINALIZER]}),
    )

    assert kit.kube(output) == [
        {
            "operation": "JSONPatch",
            "kind": "Model",
            "namespace": "team-a",
            "name": "qwen",
            "jsonPatch": [
                {"op": "test", "path": "/metadata/finalizers/0", "value": MODEL_FINALIZER},
                {"op": "remove", "path": "/metadata/finalizers/0"},
            ],
            "apiVersion": "ai.deckhouse.io/v1alpha1",
            "ignoreMissingObject": True,
        },
        {
            "operation": "JSONPatch",
            "kind": "ModelCatalogSource",
            "namespace": "",
            "name": "hub",
            "jsonPatch": [
                {"op": "test", "path": "/metadata/finalizers/0", "value": CATALOG_FINALIZER},
                {"op": "remove", "path": "/metadata/finalizers/0"},
            ],
            "apiVersion": "ai.deckhouse.io/v1alpha1",
            "ignoreMissingObject": True,
        },
    ]


def test_a_pod_held_by_another_gate_only_is_left_alone(kit: Any) -> None:
    output = after_delete(
        kit,
        gated_pods=kit.snapshot(
            {"namespace": "team-a", "name": "quota", "gates": ["example.com/quota"], "moduleVolumes": True},
            {"namespace": "team-a", "name": "plain", "gates": [], "moduleVolumes": False},
        ),
    )
    assert kit.kube(output) == []
