"""What a materialize Job leaves in the workload's namespace for pulling its image, with the
controller wired from the chart's own render (its env and the module's pull Secret): by default a
copy of the module's pull Secret (`kubernetes.io/dockerconfigjson`, owned by the Job); with
`delivery.materializer.imageRepository` none at all (D162)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ai_models.controller.delivery.jobs import registry_secret_name
from ai_models.controller.delivery.wiring import Sources
from ai_models.controller.settings import ControllerSettings
from ai_models.names import MODULE_NAMESPACE, DeliveryReason
from fakes.served_artifacts import publish_ready
from support.eventually import eventually
from support.scenarios import scenario

NAMESPACE = "team-a"  # the conftest's
DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson"
SECONDS = 90
Stack = Any  # conftest.DeliveryStack


def controller_settings(
    scenario_name: str, stack_apply: Callable[[dict[str, Any]], Any]
) -> ControllerSettings:
    """The controller's settings as the chart renders them for `scenario_name`, with the module's
    pull Secret of the same render applied to the cluster."""
    chart = scenario(scenario_name).render()
    controller = chart.get("Deployment", "ai-models-controller", MODULE_NAMESPACE)
    env = {
        entry["name"]: entry.get("value")
        for entry in controller["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    stack_apply(chart.get("Secret", "ai-models-module-registry", MODULE_NAMESPACE))
    return ControllerSettings(
        namespace=MODULE_NAMESPACE, delivery_registry_secret=env.get("AI_MODELS_DELIVERY_REGISTRY_SECRET")
    )


def pull_secrets_in_the_workloads_namespace(stack: Stack) -> list[str]:
    return sorted(
        item["metadata"]["name"]
        for item in stack.items(f"/api/v1/namespaces/{NAMESPACE}/secrets")
        if item.get("type") == DOCKER_CONFIG_JSON
    )


def jobs(stack: Stack) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = stack.items(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs")
    return found


@pytest.mark.parametrize(
    ("scenario_name", "copied"),
    [("minimal", True), ("delivery-materializer-mirror", False)],
    ids=["by-default-a-copy", "with-a-mirror-none"],
)
def test_a_pull_secret_reaches_the_workloads_namespace_only_without_a_mirror(
    start_delivery: Callable[..., Stack], kube_emulator: Any, scenario_name: str, copied: bool
) -> None:
    settings: dict[str, ControllerSettings] = {}

    def credentials(client: Any) -> Callable[[], bytes | None]:
        # Read at each Job, as the controller does: the settings come once the module is applied.
        return lambda: Sources(client, settings["controller"]).registry_credentials()

    stack = start_delivery(registry_credentials=credentials)
    settings["controller"] = controller_settings(scenario_name, stack.emulator.cluster.apply)
    publish_ready(stack.emulator, stack.store, "llama", {"config.json": b"{}"}, namespace=NAMESPACE)
    stack.deployment("web", models="llama")

    seen: list[dict[str, Any]] = []

    def job_created() -> bool:
        seen[:] = jobs(stack)
        return bool(seen)

    eventually(job_created, timeout=SECONDS, message="the materialize Job")
    (job,) = seen
    pull = job["spec"]["template"]["spec"].get("imagePullSecrets") or []
    if copied:
        copy = registry_secret_name(job["metadata"]["name"])
        assert pull == [{"name": copy}]
        eventually(
            lambda: pull_secrets_in_the_workloads_namespace(stack) == [copy],
            timeout=SECONDS,
            message=lambda: str(pull_secrets_in_the_workloads_namespace(stack)),
        )
        (secret,) = [
            item
            for item in stack.items(f"/api/v1/namespaces/{NAMESPACE}/secrets")
            if item["metadata"]["name"] == copy
        ]
        # It lives as long as the Job: owned by it.
        assert [owner["kind"] for owner in secret["metadata"]["ownerReferences"]] == ["Job"]
    else:
        assert pull == []
    eventually(
        lambda: stack.report("web")[0] == DeliveryReason.DELIVERED.value,
        timeout=SECONDS,
        message=lambda: str(stack.report("web")),
    )
    if not copied:
        assert pull_secrets_in_the_workloads_namespace(stack) == []
