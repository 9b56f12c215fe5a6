"""`python -m support.render_cli --out DIR` (what `make render` runs) and the scenario file format."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support.paths import REPO_ROOT, VALUES_FIXTURES_DIR
from support.render_cli import main
from support.scenarios import InvalidScenario, load_scenario, load_scenarios


def test_render_cli_writes_one_multidoc_file_per_scenario(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "support.render_cli", "--out", str(out)],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tests")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    names = {scenario.name for scenario in load_scenarios()}
    assert {path.stem for path in out.glob("*.yaml")} == names
    text = (out / "minimal.yaml").read_text()
    assert text.startswith("# Scenario minimal: ")
    assert "# Source: ai-models/templates/namespace.yaml" in text
    documents = [doc for doc in yaml.safe_load_all(text) if doc]
    assert {doc["kind"] for doc in documents} >= {"Namespace", "ClusterRole", "Secret"}
    assert f"rendered {len(names)} scenario(s)" in result.stdout


def test_render_cli_reports_a_scenario_that_fails_and_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "good.yaml").write_text("description: fine\n")
    (scenarios / "bad.yaml").write_text(
        "description: broken\nsettings:\n  https:\n    mode: CustomCertificate\n"
    )
    assert main(["--out", str(tmp_path / "out"), "--scenarios", str(scenarios)]) == 1
    assert (tmp_path / "out" / "good.yaml").exists()
    assert not (tmp_path / "out" / "bad.yaml").exists()
    assert "error: bad: " in capsys.readouterr().err


def test_scenario_files_reject_unknown_keys_and_need_a_description(tmp_path: Path) -> None:
    typo = tmp_path / "typo.yaml"
    typo.write_text("description: x\nsetings: {}\n")
    with pytest.raises(InvalidScenario, match=r"unknown keys \['setings'\]"):
        load_scenario(typo)
    bare = tmp_path / "bare.yaml"
    bare.write_text("settings: {}\n")
    with pytest.raises(InvalidScenario, match="description is required"):
        load_scenario(bare)


def test_every_committed_scenario_has_valid_values() -> None:
    for path in sorted(VALUES_FIXTURES_DIR.glob("*.yaml")):
        load_scenario(path).values()
