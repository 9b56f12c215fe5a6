"""Pytest fixtures of the test bed (import them into a conftest.py next to kubeemu's).

- `job_runner`: a `testbed.jobrunner.JobRunner` on `kube_emulator` that runs the Jobs whose image is
  `module_image()` (the image the rendered chart gives the module's containers) as local processes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubeemu.pytest_fixtures import RunningEmulator
from testbed.jobrunner import JobRunner
from testbed.module import module_job_runner


@pytest.fixture
def job_runner(kube_emulator: RunningEmulator) -> Iterator[JobRunner]:
    """Runs the module image's Jobs of `kube_emulator` as local processes (see testbed.jobrunner)."""
    with module_job_runner(kube_emulator) as runner:
        yield runner
