"""Helpers for the hook tests: load a hook from hooks/, build binding contexts, apply values patches.

The hooks import their shared code as `lib.*`: addon-operator runs each hook with its own directory
first on `sys.path`, and this conftest does the same for the test process.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import jsonpatch
import pytest

from support.hooks import HOOKS_DIR, load_hook
from support.values import MODULE_VALUES_KEY, validate, values_schema

if str(HOOKS_DIR) not in sys.path:
    sys.path.insert(0, str(HOOKS_DIR))

Snapshot = list[dict[str, Any]]


class HookKit:
    """Binding contexts as addon-operator writes them (`filterResult` only: the hooks use jqFilters
    with `keepFullObjectsInMemory: false`, so no `object` is sent)."""

    hooks_dir = HOOKS_DIR

    @staticmethod
    def load(name: str) -> ModuleType:
        return load_hook(name)

    @staticmethod
    def snapshot(*results: Mapping[str, Any]) -> Snapshot:
        return [{"filterResult": dict(result)} for result in results]

    @staticmethod
    def synchronization(binding: str, snapshots: Mapping[str, Snapshot]) -> dict[str, Any]:
        return {
            "binding": binding,
            "type": "Synchronization",
            "objects": copy.deepcopy(list(snapshots.get(binding, []))),
            "snapshots": copy.deepcopy(dict(snapshots)),
        }

    @staticmethod
    def event(
        binding: str, watch_event: str, result: Mapping[str, Any], snapshots: Mapping[str, Snapshot]
    ) -> dict[str, Any]:
        return {
            "binding": binding,
            "type": "Event",
            "watchEvent": watch_event,
            "filterResult": dict(result),
            "snapshots": copy.deepcopy(dict(snapshots)),
        }

    @staticmethod
    def before_helm(snapshots: Mapping[str, Snapshot]) -> dict[str, Any]:
        return {"binding": "beforeHelm", "snapshots": copy.deepcopy(dict(snapshots))}

    @staticmethod
    def schedule(binding: str, snapshots: Mapping[str, Snapshot]) -> dict[str, Any]:
        return {"binding": binding, "type": "Schedule", "snapshots": copy.deepcopy(dict(snapshots))}

    @staticmethod
    def patched(initial: Mapping[str, Any], output: Any) -> dict[str, Any]:
        """Values after addon-operator applies every patch of the run, validated by the schema."""
        result: dict[str, Any] = jsonpatch.apply_patch(
            copy.deepcopy(dict(initial)), output.values_patches.data
        )
        validate(values_schema(), result[MODULE_VALUES_KEY])
        return result

    @staticmethod
    def kube(output: Any) -> list[dict[str, Any]]:
        operations: list[dict[str, Any]] = output.kube_operations.data
        return operations


@pytest.fixture
def kit() -> HookKit:
    return HookKit()
