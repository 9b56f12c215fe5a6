"""Fixtures for the emulator's conformance tests; the reusable ones live in kubeemu.pytest_fixtures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeemu.pytest_fixtures import (  # noqa: F401  (re-exported fixtures)
    EmulatorFactory,
    RunningEmulator,
    kube_api_client,
    kube_emulator,
    kube_emulator_factory,
    kubectl,
)

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_crd(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((FIXTURES / name).read_text())
    return document


@pytest.fixture
def emulator(kube_emulator_factory: EmulatorFactory) -> RunningEmulator:  # noqa: F811
    """An emulator serving the fixture CRDs (Widget, namespaced; Gadget, cluster-scoped)."""
    return kube_emulator_factory(crd_dirs=[FIXTURES])


@pytest.fixture
def api(emulator: RunningEmulator) -> Any:
    """Superuser ApiClient of `emulator`."""
    return emulator.api_client()
