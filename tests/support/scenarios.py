"""Value scenarios of the render test bed: one YAML file per cluster situation.

A scenario file in `tests/fixtures/values/` has these keys (all optional except `description`):

    description: what cluster situation it models
    settings:    ModuleConfig spec.settings, merged over the minimal valid settings
                 (`null` deletes a key)
    internal:    hook-computed values under aiModels.internal
    global:      overrides of the typical cluster's global values (`null` deletes a key)
    registry:    overrides of aiModels.registry (what Deckhouse injects for an external module)
    apiVersions: what `.Capabilities.APIVersions` serves, "group/version" and "group/version/Kind"
    kubeVersion: what `.Capabilities.KubeVersion` reports (default v1.34.0)

Values are built by `support.values.module_values`, so a scenario with a broken setting fails
with the setting's path before Helm runs.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from support.paths import REPO_ROOT, VALUES_FIXTURES_DIR
from support.render import KUBE_VERSION, RenderedChart, render_chart
from support.values import (
    MINIMAL_SETTINGS,
    MODULE_VALUES_KEY,
    deep_merge,
    module_values,
    validate,
    values_schema,
)

REGISTRY_HOST = "registry.example.com"
# What Deckhouse puts under aiModels.registry for a module installed from a ModuleSource.
DEFAULT_REGISTRY: dict[str, Any] = {
    "base": f"{REGISTRY_HOST}/deckhouse/modules",
    "dockercfg": base64.b64encode(
        json.dumps({"auths": {REGISTRY_HOST: {"auth": base64.b64encode(b"reader:secret").decode()}}}).encode()
    ).decode(),
    "scheme": "https",
}

_KEYS = {"description", "settings", "internal", "global", "registry", "apiVersions", "kubeVersion"}


class InvalidScenario(ValueError):
    """A scenario file that does not follow the format above."""


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    settings: dict[str, Any] = field(default_factory=dict)
    internal: dict[str, Any] = field(default_factory=dict)
    global_overrides: dict[str, Any] = field(default_factory=dict)
    registry: dict[str, Any] = field(default_factory=dict)
    api_versions: tuple[str, ...] = ()
    kube_version: str = KUBE_VERSION

    def values(self) -> dict[str, Any]:
        """Full Helm values, defaulted and validated like addon-operator does."""
        values = module_values(
            deep_merge(MINIMAL_SETTINGS, self.settings),
            internal=self.internal or None,
            global_overrides=self.global_overrides,
        )
        module = values[MODULE_VALUES_KEY]
        module["registry"] = deep_merge(DEFAULT_REGISTRY, self.registry)
        validate(values_schema(), module)
        return values

    def render(self, chart_dir: Path = REPO_ROOT) -> RenderedChart:
        return render_chart(
            self.values(),
            api_versions=self.api_versions,
            kube_version=self.kube_version,
            chart_dir=chart_dir,
        )


def _mapping(raw: Mapping[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = raw.get(key) or {}
    if not isinstance(value, Mapping):
        raise InvalidScenario(f"{path.name}: {key} must be a mapping")
    return copy.deepcopy(dict(value))


def load_scenario(path: Path) -> Scenario:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, Mapping):
        raise InvalidScenario(f"{path.name}: a scenario is a mapping")
    unknown = set(raw) - _KEYS
    if unknown:
        raise InvalidScenario(f"{path.name}: unknown keys {sorted(unknown)} (allowed: {sorted(_KEYS)})")
    if not raw.get("description"):
        raise InvalidScenario(f"{path.name}: description is required")
    api_versions = raw.get("apiVersions") or []
    if not isinstance(api_versions, list) or not all(isinstance(item, str) for item in api_versions):
        raise InvalidScenario(f"{path.name}: apiVersions must be a list of strings")
    return Scenario(
        name=path.stem,
        description=str(raw["description"]).strip(),
        settings=_mapping(raw, "settings", path),
        internal=_mapping(raw, "internal", path),
        global_overrides=_mapping(raw, "global", path),
        registry=_mapping(raw, "registry", path),
        api_versions=tuple(api_versions),
        kube_version=str(raw.get("kubeVersion") or KUBE_VERSION),
    )


@cache
def load_scenarios(directory: Path = VALUES_FIXTURES_DIR) -> tuple[Scenario, ...]:
    """Every scenario in the directory, sorted by name."""
    return tuple(load_scenario(path) for path in sorted(directory.glob("*.yaml")))


def scenario(name: str) -> Scenario:
    for candidate in load_scenarios():
        if candidate.name == name:
            return candidate
    raise KeyError(f"no scenario {name!r} in {VALUES_FIXTURES_DIR}")
