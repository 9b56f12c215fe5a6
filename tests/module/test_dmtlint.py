""".dmtlint.yaml and .helmignore, the two files DMT reads about the module itself.

.dmtlint.yaml: only keys DMT's configuration structs read, the rule levels set exactly for the
module's deliberate deviations, each with its reason, exclusions that exist, and no file the
license rule checks left uncovered (DMT reports unused exclusions, and a missed file fails
`dmt lint`). .helmignore: every entry of the module root that is not part of the chart is listed,
as DMT's module/helmignore rule requires."""

from __future__ import annotations

import fnmatch
import os
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from support.paths import REPO_ROOT
from support.yamlfiles import load_yaml

# What DMT's module/license rule reads: these suffixes, and executable files without a suffix.
LICENSED_SUFFIXES = {".py", ".go", ".sh", ".lua"}
# Skipped by DMT itself.
DMT_SKIPS = ("lib/python/", "charts/helm_lib/")
# Not in a clean clone (see .gitignore): local environments, caches and build output.
NOT_IN_A_CLONE = {
    ".git", ".venv", ".dev", "out", "build", "__pycache__",
    ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis",
}  # fmt: skip

# Keys DMT reads, as dotted paths, from deckhouse/dmt (HEAD 3599840, 2026): the module layer is
# config.ModuleConfig (pkg/config/linters_settings.go, top-level `linters-settings`), the global
# layer config.RootConfig.GlobalSettings (pkg/config/global/global.go, top-level `global`). Only
# the global layer has per-rule `impact` (internal/modules/module.go mapModuleRules and
# mapTemplatesRules read globalConfig.<linter>.Rules.<rule>.Impact); the module layer's
# `module.legacy-release-file` is declared but never read. `*` is a list of strings.
KNOWN_KEYS = {
    "linters-settings.module.exclude-rules.license.files.*",
    "linters-settings.module.exclude-rules.license.directories.*",
    "global.linters-settings.module.rules.legacy-release-file.impact",
    "global.linters-settings.templates.rules.prometheus-rules.impact",
    "global.linters-settings.templates.rules.grafana-dashboards.impact",
}
# pkg/level.go: the levels ParseStringToLevel knows (anything else silently becomes "error").
LEVELS = {"ignored", "warn", "error", "critical"}
# The deviations D127 keeps, each lowered to a warning only: release.yaml (D5) and
# templates/monitoring.yaml with the module's own helpers (D10).
_RULES = "global.linters-settings.templates.rules"
DEVIATIONS = {
    "global.linters-settings.module.rules.legacy-release-file.impact": "release.yaml",
    f"{_RULES}.prometheus-rules.impact": "ai_models.prometheus_rules",
    f"{_RULES}.grafana-dashboards.impact": "ai_models.grafana_dashboard_definitions",
}


def _leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, list):
        for item in node:
            yield f"{prefix}.*", item
    else:
        yield prefix, node


@pytest.fixture(scope="module")
def dmtlint() -> dict[str, Any]:
    config: dict[str, Any] = load_yaml(REPO_ROOT / ".dmtlint.yaml")
    return config


def test_only_keys_dmt_reads(dmtlint: dict[str, Any]) -> None:
    unknown = sorted({path for path, _ in _leaves(dmtlint)} - KNOWN_KEYS)
    assert unknown == [], f"keys DMT does not read (it ignores them silently): {unknown}"


def test_exactly_the_kept_deviations_are_lowered_to_warnings(dmtlint: dict[str, Any]) -> None:
    levels = {path: value for path, value in _leaves(dmtlint) if path.endswith(".impact")}
    assert levels == dict.fromkeys(DEVIATIONS, "warn")
    assert set(levels.values()) <= LEVELS


def test_every_rule_level_says_why() -> None:
    """The comment right above each configured rule names what it keeps and why."""
    lines = (REPO_ROOT / ".dmtlint.yaml").read_text(encoding="utf-8").splitlines()
    for path, reason in DEVIATIONS.items():
        rule = path.split(".")[-2]
        index = next(i for i, line in enumerate(lines) if line.strip() == f"{rule}:")
        comment = []
        for line in reversed(lines[:index]):
            if not line.strip().startswith("#"):
                break
            comment.append(line)
        text = " ".join(comment)
        assert reason in text, f"{rule}: the comment above it does not name {reason}"
        assert "(D5)" in text or "(D10)" in text, f"{rule}: the comment cites no decision"


def test_the_header_does_not_claim_dmt_has_no_setting() -> None:
    text = (REPO_ROOT / ".dmtlint.yaml").read_text(encoding="utf-8")
    assert "no setting" not in text
    assert "not configurable" not in text


@pytest.fixture(scope="module")
def license_rules(dmtlint: dict[str, Any]) -> dict[str, list[str]]:
    rules: dict[str, list[str]] = dmtlint["linters-settings"]["module"]["exclude-rules"]["license"]
    return rules


def test_every_excluded_path_exists(license_rules: dict[str, list[str]]) -> None:
    for path in license_rules.get("files", []):
        assert not path.startswith("/"), f"{path}: paths are relative to the module root"
        assert (REPO_ROOT / path).is_file(), f"{path} is excluded but no such file exists"
    for path in license_rules.get("directories", []):
        assert path.endswith("/"), f"{path}: write directories as 'dir/'"
        assert not path.startswith("/"), f"{path}: paths are relative to the module root"
        assert (REPO_ROOT / path).is_dir(), f"{path} is excluded but no such directory exists"
        assert any(_licensed_files(REPO_ROOT / path)), f"{path} holds no file the rule checks"


def _licensed_files(top: Path) -> list[str]:
    found = []
    for directory, subdirectories, files in os.walk(top):
        subdirectories[:] = [
            name for name in subdirectories if name not in NOT_IN_A_CLONE and not name.endswith(".egg-info")
        ]
        for name in files:
            path = Path(directory) / name
            if path.suffix in LICENSED_SUFFIXES or (not path.suffix and os.access(path, os.X_OK)):
                found.append(path.relative_to(REPO_ROOT).as_posix())
    return found


def test_every_file_the_license_rule_checks_is_excluded(license_rules: dict[str, list[str]]) -> None:
    """A new directory of Python files (or a new script) must be excluded, or get a header."""
    files = set(license_rules.get("files", []))
    prefixes = (*license_rules.get("directories", []), *DMT_SKIPS)
    uncovered = [
        path for path in _licensed_files(REPO_ROOT) if path not in files and not path.startswith(prefixes)
    ]
    assert uncovered == []


# DMT's module/helmignore rule (pkg/linters/module/rules/helmignore.go): every entry of the module
# root must be ignored by .helmignore except these, which Helm renders or Deckhouse reads from the
# chart; .helmignore itself is skipped.
CHART_ENTRIES = {"templates", "charts", "monitoring", "Chart.yaml", "values.yaml", ".helmignore"}
# Files another part of the work adds at the root (the werf build, the licence); covered ahead.
EXPECTED_ROOT_FILES = {
    ".git": True, "werf.yaml": False, "werf-giterminism.yaml": False, ".werf": True, "LICENSE": False,
}  # fmt: skip


def _helmignore_patterns() -> list[str]:
    lines = (REPO_ROOT / ".helmignore").read_text(encoding="utf-8").splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    # The matcher below is the subset of Helm's ignore rules these patterns use.
    assert not [p for p in patterns if p.startswith("!") or "/" in p.rstrip("/")], patterns
    return patterns


def _ignored(name: str, is_dir: bool, patterns: list[str]) -> bool:
    for pattern in patterns:
        if pattern.endswith("/") and not is_dir:
            continue
        if fnmatch.fnmatchcase(name, pattern.rstrip("/")):
            return True
    return False


def _root_entries() -> dict[str, bool]:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    entries = {path.split("/")[0]: "/" in path for path in tracked}
    return {**entries, **EXPECTED_ROOT_FILES}


def test_helmignore_lists_every_root_entry_that_is_not_chart_content() -> None:
    patterns = _helmignore_patterns()
    unlisted = [
        f"{name}/" if is_dir else name
        for name, is_dir in sorted(_root_entries().items())
        if name not in CHART_ENTRIES and not _ignored(name, is_dir, patterns)
    ]
    assert unlisted == []


@pytest.mark.parametrize("entry", ["module.yaml", ".dmtlint.yaml", ".git/"])
def test_helmignore_names_what_deckhouse_and_dmt_read_outside_the_chart(entry: str) -> None:
    assert entry in _helmignore_patterns()


def test_helmignore_keeps_the_chart_content() -> None:
    patterns = _helmignore_patterns()
    for name in ("templates", "monitoring", "Chart.yaml"):
        assert not _ignored(name, name != "Chart.yaml", patterns), name
