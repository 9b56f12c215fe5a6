"""The module's internal TLS values (CA, api and controller certificates) as the real hook issues
them: `hooks/internal_tls.py` run once as in beforeHelm, so stacks that need the admission webhook
render the chart exactly as a cluster would."""

from __future__ import annotations

import copy
import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonpatch
from deckhouse import hook

HOOKS_DIR = Path(__file__).resolve().parents[2] / "hooks"


@cache
def _internal_tls_hook() -> ModuleType:
    # The hooks import their shared code as `lib.*`, with their own directory first on sys.path.
    if str(HOOKS_DIR) not in sys.path:
        sys.path.insert(0, str(HOOKS_DIR))
    spec = importlib.util.spec_from_file_location(
        "ai_models_hook_internal_tls", HOOKS_DIR / "internal_tls.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def with_internal_tls(values: dict[str, Any]) -> dict[str, Any]:
    """`values` (full Helm values) with `aiModels.internal.{rootCA,apiCert,controllerCert}` filled."""
    output = hook.testrun(
        _internal_tls_hook().main,
        binding_context=[{"binding": "beforeHelm", "snapshots": {}}],
        initial_values=copy.deepcopy(values),
    )
    patched: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(values), output.values_patches.data)
    return patched
