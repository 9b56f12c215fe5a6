"""The console entry point as an operator or a Helm template calls it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ai_models

ENTRY_POINT = Path(sys.executable).parent / "ai-models"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ENTRY_POINT), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
        check=False,
    )


def test_version_command_prints_the_package_version() -> None:
    result = run("version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"ai-models {ai_models.__version__}"
    assert ai_models.__version__ == "0.1.0"


def test_help_lists_the_sub_commands() -> None:
    result = run("--help")
    assert result.returncode == 0
    assert "usage: ai-models" in result.stdout
    assert "version" in result.stdout


def test_missing_sub_command_is_a_usage_error() -> None:
    result = run()
    assert result.returncode == 2
    assert "COMMAND" in result.stderr


def test_invalid_setting_names_the_variable_and_the_allowed_values() -> None:
    result = run("version", env={"AI_MODELS_LOG_LEVEL": "Loud"})
    assert result.returncode == 2
    assert "AI_MODELS_LOG_LEVEL" in result.stderr
    assert "'Debug', 'Info', 'Warn' or 'Error'" in result.stderr
