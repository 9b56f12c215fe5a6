"""The module's processes in the local stack (`make dev`): real `ai-models` sub-commands that
authenticate as their ServiceAccounts and keep their data in a directory store under `.dev/`, plus
the test bed's Job runner, which runs the Jobs the controller creates with the module image."""

from __future__ import annotations

import base64
import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kubeemu.authn import Identity
from kubeemu.cluster import Cluster
from kubeemu.kubeconfig import kubeconfig_document, write_kubeconfig
from support.processes import ModuleProcess
from support.render import RenderedChart
from testbed.jobrunner import JobRunner, ServedCluster
from testbed.module import module_job_runner

DEFAULT_HF_ENDPOINT = "https://huggingface.co"
# The controller's log line with the address of its admission webhook listener.
WEBHOOK_LISTENING = "serving the admission webhook"


@dataclasses.dataclass(frozen=True)
class DevPorts:
    """The ports the components are told; 0 lets each bind a free one and log it."""

    controller_health: int
    controller_metrics: int
    api: int
    api_metrics: int


@dataclasses.dataclass(frozen=True)
class DevComponents:
    processes: list[ModuleProcess]
    api_port: int  # the one the api bound (`DevPorts.api`, or the free one it picked for 0)
    internal_port: int | None = None  # the api's internal TLS listener, when it has one
    webhook_port: int | None = None  # the controller's admission webhook (a free port), if served


# A retried publish Pod waits this long (doubling); the real Job controller starts at 10 s.
DEV_JOB_BACKOFF_SECONDS = 1.0


def start_job_runner(*, cluster: Cluster, url: str, ca_pem: str, out_dir: Path) -> JobRunner:
    """Run the Jobs whose image is the module image as local processes (Pod directories with the
    log and termination message under `<out>/jobs/<namespace>/<pod>/`)."""
    return module_job_runner(
        ServedCluster(cluster=cluster, url=url, ca_pem=ca_pem, workdir=out_dir),
        backoff_seconds=DEV_JOB_BACKOFF_SECONDS,
    )


# The name the local processes reach the api's internal TLS listener by: its certificate carries it
# beside the Service's names (`testbed.dev_lookup`; 127.0.0.1 has no DNS name of its own).
LOCAL_HOST = "localhost"


def internal_serving_url(port: int) -> str:
    """The serving API as the dev stack's node plugin and materializers read it (D159)."""
    return f"https://{LOCAL_HOST}:{port}"


def mounted_config_maps(
    chart: RenderedChart, *, deployment: str, container: str, directory: Path
) -> dict[str, str]:
    """The container's variables that point into ConfigMap or Secret volumes, pointed at local
    copies instead.

    The kubelet would mount the chart's ConfigMaps and Secrets (the publisher and materializer pod
    templates, the webhook certificate); the dev stack writes each mounted object's data under
    `directory/<volume>/` and rewrites the variables whose values lie under the volume's mountPath."""
    config_maps = {obj["metadata"]["name"]: obj for obj in chart.of_kind("ConfigMap")}
    secrets = {obj["metadata"]["name"]: obj for obj in chart.of_kind("Secret")}
    pod = chart.get("Deployment", deployment)["spec"]["template"]["spec"]
    spec: Mapping[str, Any] = next(c for c in pod["containers"] if c["name"] == container)
    local: dict[str, Path] = {}  # mountPath -> local directory
    for volume in pod.get("volumes") or []:
        files = _volume_files(volume, config_maps=config_maps, secrets=secrets)
        if files is None:
            continue
        target = directory / volume["name"]
        target.mkdir(parents=True, exist_ok=True)
        for key, value in files.items():
            (target / key).write_bytes(value)
        for mount in spec.get("volumeMounts") or []:
            if mount["name"] == volume["name"]:
                local[mount["mountPath"].rstrip("/")] = target.resolve()
    env: dict[str, str] = {}
    for variable in spec.get("env") or []:
        value = variable.get("value")
        for mount_path, target in local.items():
            if isinstance(value, str) and (value == mount_path or value.startswith(mount_path + "/")):
                env[variable["name"]] = str(target) + value[len(mount_path) :]
    return env


def _volume_files(
    volume: Mapping[str, Any],
    *,
    config_maps: Mapping[str, Mapping[str, Any]],
    secrets: Mapping[str, Mapping[str, Any]],
) -> dict[str, bytes] | None:
    """file name -> content of a ConfigMap or Secret volume of the chart's own objects (None for
    any other volume)."""
    source = str((volume.get("configMap") or {}).get("name") or "")
    if source in config_maps:
        return {key: str(value).encode() for key, value in (config_maps[source].get("data") or {}).items()}
    secret = str((volume.get("secret") or {}).get("secretName") or "")
    if secret in secrets:
        data = {key: base64.b64decode(value) for key, value in (secrets[secret].get("data") or {}).items()}
        items = (volume.get("secret") or {}).get("items")
        if items:
            return {str(item["path"]): data[item["key"]] for item in items if item["key"] in data}
        return data
    return None


# What the dev stack replaces in the publisher pod template: the cluster's S3 settings and
# credentials (the chart renders them from aiModels.artifacts) become the local directory store.
_CLUSTER_STORE_VARIABLES = frozenset(
    {
        "AI_MODELS_STORE_URL",
        "AI_MODELS_S3_ENDPOINT",
        "AI_MODELS_S3_REGION",
        "AI_MODELS_S3_USE_PATH_STYLE",
        "AI_MODELS_S3_INSECURE",
        "AI_MODELS_S3_CA_FILE",
        "AI_MODELS_HF_ENDPOINT",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AI_MODELS_LOG_FORMAT",
    }
)


def use_local_store(template_file: Path, *, store_url: str, hf_endpoint: str) -> None:
    """Point the publisher pod template at the dev stack's directory store and Hub endpoint.

    In a cluster the publish Pods reach the bucket with the module's credentials; the local stack
    has no bucket and no credentials Secret, so its publish Jobs get the store the controller and
    the api use."""
    template = yaml.safe_load(template_file.read_text(encoding="utf-8"))
    for container in template["spec"]["containers"]:
        env = [item for item in container.get("env") or [] if item["name"] not in _CLUSTER_STORE_VARIABLES]
        env += [
            {"name": "AI_MODELS_STORE_URL", "value": store_url},
            {"name": "AI_MODELS_HF_ENDPOINT", "value": hf_endpoint},
            {"name": "AI_MODELS_LOG_FORMAT", "value": "text"},
        ]
        container["env"] = [
            item for item in env if item["name"] != "AI_MODELS_LOG_FORMAT" or item.get("value") == "text"
        ]
    template_file.write_text(yaml.safe_dump(template, sort_keys=False), encoding="utf-8")


def start_components(
    *,
    out_dir: Path,
    url: str,
    ca_pem: str,
    service_accounts: dict[str, Identity],
    ports: DevPorts,
    chart: RenderedChart | None = None,
    controller_env: Mapping[str, str] | None = None,
    api_env: Mapping[str, str] | None = None,
) -> DevComponents:
    """Start the api, then the controller (its upload URLs name the port the api bound); blocks
    until the api listens. `HF_ENDPOINT` (a Hub or a mirror) is what the module setting
    `sources.huggingFace.endpoint` sets in a cluster. With the rendered `chart`, the controller also
    gets the files of its ConfigMap volumes (see `mounted_config_maps`); `controller_env` adds its
    module settings (the delivery mode), `api_env` the api's (its internal listener, a budget)."""
    logs = out_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    store = out_dir / "store"
    store.mkdir(parents=True, exist_ok=True)

    def kubeconfig(account: str) -> Path:
        identity = service_accounts[account]
        return write_kubeconfig(
            out_dir / f"kubeconfig-{account}",
            kubeconfig_document(url, [(account, identity)], current=account, namespaces={}, ca_pem=ca_pem),
        )

    common = {
        "AI_MODELS_STORE_URL": f"file://{store.resolve()}",
        "AI_MODELS_HF_ENDPOINT": os.environ.get("HF_ENDPOINT", DEFAULT_HF_ENDPOINT),
        "AI_MODELS_NAMESPACE": "d8-ai-models",
        "AI_MODELS_LOG_FORMAT": "text",
    }
    mounted = (
        mounted_config_maps(
            chart, deployment="ai-models-controller", container="controller", directory=out_dir / "config"
        )
        if chart is not None
        else {}
    )
    template = mounted.get("AI_MODELS_PUBLISH_POD_TEMPLATE_FILE")
    if template is not None:
        use_local_store(
            Path(template),
            store_url=common["AI_MODELS_STORE_URL"],
            hf_endpoint=common["AI_MODELS_HF_ENDPOINT"],
        )
    api = ModuleProcess(
        "api",
        "--host",
        "127.0.0.1",
        "--port",
        str(ports.api),
        env={
            **common,
            "KUBECONFIG": str(kubeconfig("api")),
            "AI_MODELS_POD_NAME": "api-dev",
            "AI_MODELS_API_METRICS_PORT": str(ports.api_metrics),
            "AI_MODELS_API_INDEX_DIR": str((out_dir / "api-index").resolve()),
            **dict(api_env or {}),
        },
        log_path=logs / "api.log",
    ).start()
    try:
        api_port = api.api_port()
        # The internal TLS listener, where materializers read the serving API (D159).
        internal = api.internal_api_port() if "AI_MODELS_API_TLS_CERT_FILE" in (api_env or {}) else None
    except BaseException:
        api.kill()
        raise
    delivery = (
        {"AI_MODELS_DELIVERY_API_URL": internal_serving_url(internal)}
        if internal is not None
        # Without the internal listener no materializer can start (it refuses plain http).
        else {"AI_MODELS_DELIVERY_API_URL": f"http://127.0.0.1:{api_port}"}
    )
    controller = ModuleProcess(
        "controller",
        env={
            **common,
            **mounted,
            # Upload URLs in status.upload point at the local api, so curl can use them as shown.
            "AI_MODELS_UPLOAD_IN_CLUSTER_URL": f"http://127.0.0.1:{api_port}",
            # status.upload.external too: in a cluster the public domain's Ingress leads to the same
            # listener; the dev stack has no Ingress, so its external URL is the api's own.
            "AI_MODELS_UPLOAD_PUBLIC_URL": f"http://127.0.0.1:{api_port}",
            "KUBECONFIG": str(kubeconfig("controller")),
            "AI_MODELS_POD_NAME": "controller-dev",
            "AI_MODELS_CONTROLLER_HEALTH_PORT": str(ports.controller_health),
            "AI_MODELS_CONTROLLER_METRICS_PORT": str(ports.controller_metrics),
            # The emulator calls the webhook here (its route for the controller Service).
            "AI_MODELS_CONTROLLER_WEBHOOK_ADDRESS": "127.0.0.1",
            "AI_MODELS_CONTROLLER_WEBHOOK_PORT": "0",
            # Materialize Jobs run as local processes and read from the local api's internal
            # listener, verified with the module CA (the chart's ConfigMap, a local copy in `mounted`).
            **delivery,
            **dict(controller_env or {}),
        },
        log_path=logs / "controller.log",
    ).start()
    webhook_port = None
    if "AI_MODELS_CONTROLLER_WEBHOOK_CERT_DIR" in mounted:
        try:
            webhook_port = controller.bound_port(WEBHOOK_LISTENING)
        except BaseException:
            controller.kill()
            api.kill()
            raise
    return DevComponents(
        processes=[controller, api], api_port=api_port, webhook_port=webhook_port, internal_port=internal
    )
