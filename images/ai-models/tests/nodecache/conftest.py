"""Fixtures of the node plugin's tests: the Kubernetes API emulator and the Models in it."""

from __future__ import annotations

import pytest

from csi.models import ClusterModels
from kubeemu.pytest_fixtures import (  # noqa: F401  (fixtures used by this package's tests)
    RunningEmulator,
    kube_api_client,
    kube_emulator,
    kube_emulator_factory,
)


@pytest.fixture
def cluster_models(request: pytest.FixtureRequest) -> ClusterModels:
    emulator: RunningEmulator = request.getfixturevalue("kube_emulator")
    return ClusterModels(emulator)
