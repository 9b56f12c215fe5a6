"""What the stand-in controllers must know about this module's image: its digest as the chart
renders it, its entry point, and how its programs learn their settings.

The stand-ins themselves (`testbed.jobrunner`, ...) take these as parameters; this file is the one
place that fills them in for ai-models.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ai_models import names
from support.module_install import MODULE_NAMESPACE
from support.render import render_chart
from support.values import module_values
from testbed.csi_kubelet import CsiNode
from testbed.jobrunner import NODE_NAME, Emulator, JobRunner
from testbed.simulation import ClusterSimulation
from testbed.volumes import StorageClassBehaviour

MODULE_COMMAND = "ai-models"
# The console entry point next to the test venv's Python: what the image's `ai-models` is here.
ENTRY_POINT = Path(sys.executable).parent / MODULE_COMMAND
# The module image's entrypoint (images/ai-models/werf.inc.yaml): what runs when a container has no command.
IMAGE_ENTRYPOINT = (MODULE_COMMAND,)
# Every setting of the module's processes is an environment variable with this prefix.
SETTINGS_ENV_PREFIX: str = names.ENV_PREFIX
# Through these variables `ai-models publish` and `ai-models materialize` learn the file the
# kubelet mounts for their outcome.
TERMINATION_MESSAGE_ENV: str = names.PublishVariable.TERMINATION_MESSAGE_PATH.value
TERMINATION_MESSAGE_VARIABLES: tuple[str, ...] = (
    TERMINATION_MESSAGE_ENV,
    names.MaterializeVariable.TERMINATION_MESSAGE_PATH.value,
)
# The controller deployment of the rendered chart, whose image the module gives its Jobs too.
CONTROLLER_DEPLOYMENT = "ai-models-controller"
CONTROLLER_CONTAINER = "controller"


@functools.cache
def module_image() -> str:
    """The module image exactly as the rendered controller Deployment names it for its container
    (`<registry base>@<global.modulesImages.digests.aiModels.aiModels>`); the controller gives its
    publish Jobs the same image, so a `JobRunner` picks them by it."""
    deployment = render_chart(module_values()).get("Deployment", CONTROLLER_DEPLOYMENT, MODULE_NAMESPACE)
    containers = deployment["spec"]["template"]["spec"]["containers"]
    image: str = next(c["image"] for c in containers if c["name"] == CONTROLLER_CONTAINER)
    return image


def withheld_from_pods(name: str) -> bool:
    """The test process's own module settings never reach a Pod: its settings come from its spec."""
    return name.startswith(SETTINGS_ENV_PREFIX)


def module_job_runner(
    emulator: Emulator,
    *,
    image: str | None = None,
    commands: Mapping[str, Path] | None = None,
    namespace: str | None = None,
    workdir: Path | None = None,
    backoff_seconds: float = 0.0,
) -> JobRunner:
    """A `JobRunner` for the Jobs with the module image (default: `module_image()`): `ai-models` is
    the venv's entry point, also without a command; `commands` adds more programs (test stand-ins)."""
    wanted = image or module_image()
    return JobRunner(
        emulator,
        image_matches=lambda candidate: candidate == wanted,
        commands={MODULE_COMMAND: ENTRY_POINT, **(commands or {})},
        entrypoint=IMAGE_ENTRYPOINT,
        termination_message_env=TERMINATION_MESSAGE_VARIABLES,
        withheld_env=withheld_from_pods,
        namespace=namespace,
        workdir=workdir,
        backoff_seconds=backoff_seconds,
    )


# `make dev`'s default StorageClass: Immediate, ReadWriteMany (what SharedPVC delivery needs).
DEV_STORAGE_CLASS = StorageClassBehaviour(name="testbed-rwx", default=True)


def module_cluster_simulation(
    emulator: Emulator,
    *,
    classes: Sequence[StorageClassBehaviour] = (DEV_STORAGE_CLASS,),
    nodes: Sequence[str] = (NODE_NAME,),
    image: str | None = None,
    workdir: Path | None = None,
    csi_nodes: Sequence[CsiNode] = (),
    csi_retry_cap: float | None = None,
) -> ClusterSimulation:
    """A `ClusterSimulation` that leaves the module image's Jobs (default: `module_image()`) to a
    Job runner; by default with one node and `DEV_STORAGE_CLASS` as the default class. With
    `csi_nodes`, the CSI kubelet publishes the module's NodeCache volumes on those nodes."""
    wanted = image or module_image()
    return ClusterSimulation(
        emulator,
        classes=classes,
        nodes=nodes,
        runner_image=lambda candidate: candidate == wanted,
        workdir=workdir,
        csi_nodes=csi_nodes,
        csi_drivers=(names.NODE_CACHE_DRIVER,),
        csi_retry_cap=csi_retry_cap,
    )
