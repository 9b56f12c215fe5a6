"""Fixtures every suite under tests/ may use: the API emulator, the test bed's Job runner, the fake
Hub, the moto S3 server."""

from __future__ import annotations

from fakes.hub import fake_hub, fake_hub_corpus
from fakes.s3 import moto_s3, s3_bucket
from kubeemu.pytest_fixtures import (
    kube_api_client,
    kube_emulator,
    kube_emulator_factory,
    kubectl,
)
from testbed.pytest_fixtures import cluster_simulation, job_runner

__all__ = [
    "cluster_simulation",
    "fake_hub",
    "fake_hub_corpus",
    "job_runner",
    "kube_api_client",
    "kube_emulator",
    "kube_emulator_factory",
    "kubectl",
    "moto_s3",
    "s3_bucket",
]
