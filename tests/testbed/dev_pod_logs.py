"""`kubectl logs` in the dev stack: the emulator serves `pods/{name}/log` of the Pods the test bed's
Job runner runs as local processes (publish and materialize Jobs) from the output it captures in
`<jobs>/<namespace>/<pod>/log` (`testbed.jobrunner.PodRun.log_path`)."""

from __future__ import annotations

from pathlib import Path

from kubeemu.podlogs import PodLogSource


def job_pod_logs(jobs_dir: Path) -> PodLogSource:
    """The log source of the Job runner whose Pod directories are under `jobs_dir`; each such Pod
    runs one container, so the container name selects nothing."""

    def source(namespace: str, pod: str, container: str) -> Path | None:
        path = jobs_dir / namespace / pod / "log"
        return path if path.is_file() else None

    return source
