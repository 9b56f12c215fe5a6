"""The cluster's own controllers for workload delivery, started together: `testbed.volumes` (PV
controller and provisioners), `testbed.scheduler` (kube-scheduler and the nodes' kubelets) and
`testbed.workloads` (Deployment, ReplicaSet, StatefulSet, DaemonSet, CronJob and Job controllers), and
`testbed.serviceaccounts` (a `default` ServiceAccount in every Namespace), and, given `csi_nodes`,
`testbed.csi_kubelet` (kubelet's CSI volume manager: Pods with inline volumes of `csi_drivers` on
those nodes run once each volume is published over the node's plugin socket).

The Job runner (`testbed.jobrunner`) is not part of it: tests that run module Jobs start one beside
it, and `runner_image` tells the simulation which images the runner has, so the simulation leaves
those Jobs and their Pods to it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from testbed.csi_kubelet import RETRY_CAP_SECONDS, CsiKubelet, CsiNode
from testbed.jobrunner import NODE_NAME, Emulator
from testbed.mounts import ClaimMount, pod_mounts
from testbed.scheduler import PodScheduler
from testbed.serviceaccounts import ServiceAccounts
from testbed.volumes import StorageClassBehaviour, VolumeProvisioner
from testbed.workloads import WorkloadControllers


class ClusterSimulation:
    """`volumes`, `scheduler` and `workloads` on one emulator; `close()` stops all three."""

    def __init__(
        self,
        emulator: Emulator,
        *,
        classes: Sequence[StorageClassBehaviour] = (),
        nodes: Sequence[str] = (NODE_NAME,),
        runner_image: Callable[[str], bool] = lambda image: False,
        workdir: Path | None = None,
        csi_nodes: Sequence[CsiNode] = (),
        csi_drivers: Collection[str] = (),
        csi_retry_cap: float | None = None,
    ) -> None:
        self.accounts = ServiceAccounts(emulator)
        started: list[Any] = [self.accounts]
        self.csi: CsiKubelet | None = None
        try:
            self.volumes = VolumeProvisioner(emulator, classes=classes, workdir=workdir)
            started.append(self.volumes)
            if csi_nodes:
                self.csi = CsiKubelet(
                    emulator,
                    nodes=csi_nodes,
                    drivers=csi_drivers,
                    retry_cap=RETRY_CAP_SECONDS if csi_retry_cap is None else csi_retry_cap,
                )
                started.append(self.csi)
            all_nodes = [*nodes, *(n.name for n in csi_nodes if n.name not in nodes)]
            self.scheduler = PodScheduler(
                emulator,
                nodes=all_nodes,
                runs_elsewhere=runner_image,
                **({"volume_setup": self.csi.pending_message} if self.csi else {}),
            )
            started.append(self.scheduler)
            if self.csi is not None:
                scheduler = self.scheduler
                self.csi.on_change = lambda namespace, name: scheduler.kick(("pod", namespace, name))
            self.workloads = WorkloadControllers(emulator, runner_runs_image=runner_image)
        except BaseException:
            for reactor in reversed(started):
                reactor.close()
            raise

    def pod_mounts(self, pod: Mapping[str, Any]) -> list[ClaimMount]:
        """Which directory each claim mount of the Pod would show (`testbed.mounts.pod_mounts`)."""
        return pod_mounts(self.volumes.cluster, pod)

    def close(self) -> None:
        # Creators first: nothing makes new Pods or claims while the others stop.
        self.workloads.close()
        self.scheduler.close()
        if self.csi is not None:
            self.csi.close()
        self.volumes.close()
        self.accounts.close()

    def __enter__(self) -> ClusterSimulation:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
