"""The module's internal TLS values (CA, api and controller certificates) as the real hook issues
them: `hooks/internal_tls.py` run once as in beforeHelm, so stacks that need the admission webhook
render the chart exactly as a cluster would."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
from deckhouse import hook

from support.hooks import load_hook


def with_internal_tls(values: dict[str, Any]) -> dict[str, Any]:
    """`values` (full Helm values) with `aiModels.internal.{rootCA,apiCert,controllerCert}` filled."""
    output = hook.testrun(
        load_hook("internal_tls").main,
        binding_context=[{"binding": "beforeHelm", "snapshots": {}}],
        initial_values=copy.deepcopy(values),
    )
    patched: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(values), output.values_patches.data)
    return patched
