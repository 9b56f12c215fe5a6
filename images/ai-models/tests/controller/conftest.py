"""Fixtures of the controller tests: the Kubernetes API emulator (HTTPS) and its superuser client."""

from __future__ import annotations

from kubeemu.pytest_fixtures import kube_api_client, kube_emulator, kube_emulator_factory

__all__ = ["kube_api_client", "kube_emulator", "kube_emulator_factory"]
