""".dmtlint.yaml: only settings DMT documents, exclusions that exist, and no file the license rule
checks left uncovered (DMT reports unused exclusions, and a missed file fails `dmt lint`)."""

from __future__ import annotations

import os
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


@pytest.fixture(scope="module")
def license_rules() -> dict[str, list[str]]:
    config: dict[str, Any] = load_yaml(REPO_ROOT / ".dmtlint.yaml")
    # Only the keys DMT's configuration documents for this module's needs.
    assert set(config) == {"linters-settings"}
    assert set(config["linters-settings"]) == {"module"}
    assert set(config["linters-settings"]["module"]) == {"exclude-rules"}
    assert set(config["linters-settings"]["module"]["exclude-rules"]) == {"license"}
    rules: dict[str, list[str]] = config["linters-settings"]["module"]["exclude-rules"]["license"]
    assert set(rules) <= {"files", "directories"}
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
