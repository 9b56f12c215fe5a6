"""Every hook is discoverable by addon-operator and writes only declared values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from deckhouse import hook

from support.values import module_values, values_schema

HOOKS_DIR = Path(__file__).resolve().parents[2] / "hooks"
HOOK_FILES = sorted(HOOKS_DIR.glob("*.py"))
EXPECTED = {
    "artifacts_credentials",
    "copy_custom_certificate",
    "disable_cleanup",
    "internal_tls",
}


def test_the_expected_hooks_exist() -> None:
    assert {path.stem for path in HOOK_FILES} == EXPECTED


@pytest.mark.parametrize("path", HOOK_FILES, ids=lambda path: path.stem)
def test_hook_is_executable_and_prints_its_binding_config(path: Path) -> None:
    assert os.access(path, os.X_OK), f"{path.name} needs chmod +x"
    assert path.read_text(encoding="utf-8").splitlines()[0] == "#!/usr/bin/env python3"
    # The venv's interpreter, as the shebang would find python3 in the module's environment.
    result = subprocess.run(
        [sys.executable, str(path), "--config"],
        capture_output=True,
        text=True,
        check=True,
        cwd=HOOKS_DIR.parent,
    )
    config = json.loads(result.stdout)
    assert config["configVersion"] == "v1"
    bindings = config.get("kubernetes", [])
    assert any(key in config for key in ("beforeHelm", "schedule", "kubernetes"))
    names = [binding["name"] for binding in bindings] + [item["name"] for item in config.get("schedule", [])]
    assert len(names) == len(set(names))
    for binding in bindings:
        assert binding["kind"]
        assert binding["apiVersion"]
        assert binding["jqFilter"]
        assert binding["keepFullObjectsInMemory"] is False
        assert set(binding.get("includeSnapshotsFrom", [])) <= set(names)
    for item in config.get("schedule", []):
        assert len(item["crontab"].split()) == 5
        assert set(item.get("includeSnapshotsFrom", [])) <= set(names)


def test_shared_code_is_not_executable() -> None:
    # addon-operator warns about executable files under lib/ and would not run them anyway.
    shared = [
        path for path in (HOOKS_DIR / "lib").rglob("*") if path.is_file() and "__pycache__" not in path.parts
    ]
    assert shared
    assert [path.name for path in shared if os.access(path, os.X_OK)] == []


def declared(schema: dict[str, Any], path: list[str]) -> bool:
    node = schema
    for key in path:
        properties = node.get("properties", {})
        if key not in properties:
            return False
        node = properties[key]
    return True


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_written_internal_key_is_declared(kit: Any, name: str) -> None:
    output = hook.testrun(
        kit.load(name).main,
        binding_context=[{"binding": "beforeHelm", "snapshots": {}}],
        initial_values=module_values(),
    )
    for patch in output.values_patches.data:
        parts = patch["path"].strip("/").split("/")
        assert parts[:2] == ["aiModels", "internal"], patch["path"]
        assert declared(values_schema(), parts[1:]), patch["path"]
    if name == "internal_tls":
        assert output.values_patches.data
