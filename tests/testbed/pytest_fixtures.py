"""Pytest fixtures of the test bed (import them into a conftest.py next to kubeemu's).

- `job_runner`: a `testbed.jobrunner.JobRunner` on `kube_emulator` that runs the Jobs whose image is
  `module_image()` (the image the rendered chart gives the module's containers) as local processes.
- `cluster_simulation`: a `testbed.simulation.ClusterSimulation` on `kube_emulator` (volumes,
  scheduler and kubelets, workload controllers) with one node and the default ReadWriteMany
  Immediate class `testbed.module.DEV_STORAGE_CLASS`; it leaves the module image's Jobs to
  `job_runner` (request both to run them).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubeemu.pytest_fixtures import RunningEmulator
from testbed.jobrunner import JobRunner
from testbed.module import module_cluster_simulation, module_job_runner
from testbed.simulation import ClusterSimulation


@pytest.fixture
def job_runner(kube_emulator: RunningEmulator) -> Iterator[JobRunner]:
    """Runs the module image's Jobs of `kube_emulator` as local processes (see testbed.jobrunner)."""
    with module_job_runner(kube_emulator) as runner:
        yield runner


@pytest.fixture
def cluster_simulation(kube_emulator: RunningEmulator) -> Iterator[ClusterSimulation]:
    """The cluster's controllers for workloads, Pods and volumes on `kube_emulator`."""
    with module_cluster_simulation(kube_emulator) as simulation:
        yield simulation
