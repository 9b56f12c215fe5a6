"""Cluster tests run the module against the Kubernetes API emulator (tests/kubeemu)."""

from __future__ import annotations

from kubeemu.pytest_fixtures import (  # noqa: F401  (fixtures used by this package's tests)
    kube_emulator,
    kube_emulator_factory,
)
