"""`make dev`: the local ai-models stack on this machine.

Starts the Kubernetes API emulator (HTTPS on 127.0.0.1; kubectl sends tokens only over TLS) with the
module's CRDs, the `d8-ai-models` namespace and the module's access-level ClusterRoles rendered from
the chart by the real Helm engine, plus three dev identities:

- `cluster-admin` (Deckhouse ClusterAdmin level, cluster-wide; the kubeconfig's current context),
- `user` (User level, cluster-wide),
- `namespace-user` (User level, limited to namespace `default`).

Writes `<out>/kubeconfig` (one context per identity), `<out>/env` (shell: KUBECONFIG, server URL,
CA file, `AI_MODELS_TOKEN_*` and `AI_MODELS_API_URL`) and `<out>/ca.crt`, prints example commands,
and serves until Ctrl-C/SIGTERM (exit 0; the files stay). `<out>` is `AI_MODELS_DEV_DIR` or
`--out-dir` (default `.dev` in the repository); the port is `AI_MODELS_DEV_PORT` or `--port`
(default 18443, 0 = any). Every port (`AI_MODELS_DEV_*_PORT`, see `port_settings`) is checked
first: a taken one ends the stack at once, naming its variable; the banner comes only once every
component listens.

The emulator's objects are saved to `<out>/cluster-state.json` while it runs and loaded at the next
start (as etcd keeps a cluster's, resourceVersions continuing), so a restart keeps the Models and
the artifacts of `<out>/store` together; `--fresh` (`AI_MODELS_DEV_FRESH=1`, `make dev FRESH=1`)
removes the state and the store first and starts empty.

Also runs the module's controller and api as their ServiceAccounts with a directory store in
`<out>/store` (logs in `<out>/logs/`), and the test bed's Job runner (`testbed.jobrunner`) that runs
the Jobs with the module image (the controller's publish Jobs) as local processes (Pod logs in
`<out>/jobs/`), and the rest of a cluster's controllers (`testbed.simulation`): workload controllers
(Deployments roll out ReplicaSets, StatefulSets, DaemonSets, CronJobs), a scheduler and kubelets for
one node (`kubeemu-node`) that report Pods Running, and a provisioner whose default StorageClass
`testbed-rwx` (Immediate, ReadWriteMany) binds every claim to a directory under `<out>/volumes/`.
Run as `PYTHONPATH=tests .venv/bin/python -m testbed.devstack`.

`AI_MODELS_DEV_DELIVERY_MODE=NodeCache` (or `--delivery-mode NodeCache`) starts it with the module
setting `delivery.mode: NodeCache` instead: two nodes (`dev-node-a`, `dev-node-b`, in the node group
the setting selects), on each the real node plugin `ai-models node-cache` as the chart's
ServiceAccount with its cache under `<out>/nodes/<node>/cache`, and the test bed's CSI kubelet
(`testbed.csi_kubelet`), which publishes the pods' model volumes over each node's plugin socket:
real read-only bind mounts under `<out>/nodes/<node>/kubelet/pods/`, so this mode needs root (or a
user and mount namespace: `unshare -rm`). What is still mounted there is unmounted at the end.

What the guides describe can be tried too (`testbed.dev_features`): the internal lookup API over TLS
with the module CA (`AI_MODELS_DEV_API_INTERNAL_PORT`, default 18444), a storage budget
(`AI_MODELS_DEV_CAPACITY_LIMIT`), `kubectl logs` of the Jobs' Pods, and `status.upload.external`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shlex
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ai_models import names
from kubeemu.admission import MutatingAdmission
from kubeemu.authn import Identity, new_token
from kubeemu.cluster import Cluster
from kubeemu.crds import load_crd_manifests
from kubeemu.kubeconfig import kubeconfig_document, write_kubeconfig
from kubeemu.persistence import StateFileError, StateWriter, restore_state
from kubeemu.server import serve_forever, tls_context
from support.devcomponents import DevPorts, internal_serving_url, start_components, start_job_runner
from support.module_install import install_rbac, pod_bound
from support.module_tls import with_internal_tls
from support.node_cache_plugin import plugin_process
from support.processes import ModuleProcess, ProcessExited
from support.render import RenderedChart, render_chart
from support.values import MINIMAL_SETTINGS, module_values
from testbed.access_levels import grant_access_level
from testbed.csi_kubelet import (
    MAX_SOCKET_PATH,
    CsiNode,
    MountsNotPermitted,
    require_bind_mounts,
    unmount_under,
)
from testbed.dev_features import BudgetRefused, DevFeatures, bound_lookup_port, checked_budget, features_help
from testbed.dev_lookup import CA_FILE
from testbed.dev_pod_logs import job_pod_logs
from testbed.dev_ports import DevStackError, PortSetting, check_ports, component_failed
from testbed.jobrunner import ServedCluster
from testbed.module import module_cluster_simulation

log = logging.getLogger("testbed.devstack")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PORT = 18443
MODULE_NAMESPACE = "d8-ai-models"
CONTROLLER_SERVICE = "ai-models-controller"
# Deckhouse's own namespace, where an admin keeps what the module copies (e.g. S3 credentials).
PLATFORM_NAMESPACE = "d8-system"
# Templates whose objects the stack loads (the module's RBAC for users).
ROLE_TEMPLATES = ("templates/user-authz-cluster-roles.yaml", "templates/rbacv2/")
SHARED_PVC, NODE_CACHE = "SharedPVC", "NodeCache"
# NodeCache mode: the nodes, the node group the module setting selects, and each node's cache size.
DEV_CACHE_NODES = ("dev-node-a", "dev-node-b")
DEV_NODE_GROUP = {"node.deckhouse.io/group": "model-cache"}
DEV_CACHE_SIZE = "20Gi"
# The emulator's objects across restarts (as etcd keeps a cluster's), see kubeemu.persistence.
STATE_FILE = "cluster-state.json"
# The dev identities' tokens, kept with the state (the env file exports them).
TOKENS_FILE = "tokens.json"
# What `--fresh` removes from the out directory: the cluster's state and everything that belongs to
# it (artifacts, the api's index, Pod and volume directories, logs); the client files are rewritten.
FRESH_ENTRIES = (STATE_FILE, TOKENS_FILE, "store", "api-index", "jobs", "volumes", "nodes", "logs", "config")


@dataclass
class DevIdentity:
    context: str
    env_var: str
    identity: Identity
    level: str
    namespace: str | None = None


@dataclass
class DevStack:
    cluster: Cluster
    out_dir: Path
    identities: list[DevIdentity] = field(default_factory=list)
    service_accounts: dict[str, Identity] = field(default_factory=dict)
    chart: RenderedChart | None = None
    delivery_mode: str = SHARED_PVC
    # The lookup API, a budget, Pod logs, status.upload.external (testbed.dev_features).
    features: DevFeatures = field(default_factory=DevFeatures)


def delivery_settings(mode: str) -> dict[str, Any]:
    """The module settings of the delivery mode (`delivery.*`) the stack renders its chart with."""
    if mode == NODE_CACHE:
        return {
            "delivery": {
                "mode": NODE_CACHE,
                "nodeCache": {"size": DEV_CACHE_SIZE, "nodeSelector": DEV_NODE_GROUP},
            }
        }
    return {}


def kept_tokens(path: Path, names: tuple[str, ...]) -> dict[str, str]:
    """A token per identity name: the ones saved at `path` by the last run, new ones for the rest
    (saved for the next run, readable by the owner only)."""
    try:
        saved = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        saved = {}
    if not isinstance(saved, dict):
        saved = {}
    tokens = {name: str(saved.get(name) or new_token()) for name in names}
    if tokens != saved:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.unlink(missing_ok=True)
        with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as stream:
            stream.write(json.dumps(tokens))
        partial.replace(path)
    return tokens


def module_rbac_objects(rendered: RenderedChart | None = None) -> list[dict[str, Any]]:
    """The module's ClusterRoles (user-authz levels and rbacv2), rendered from the chart with Helm
    (or taken from `rendered`)."""
    if rendered is None:
        rendered = render_chart(module_values())
    objects: list[dict[str, Any]] = []
    for path, text in sorted(rendered.files.items()):
        relative = path.split("/", 1)[1] if "/" in path else path
        if relative.startswith(ROLE_TEMPLATES) or relative in ROLE_TEMPLATES:
            objects.extend(d for d in yaml.safe_load_all(text) if isinstance(d, dict) and d.get("kind"))
    return objects


def build_stack(
    *,
    out_dir: Path,
    crd_dir: Path = REPO_ROOT / "crds",
    delivery_mode: str = SHARED_PVC,
    state_file: Path | None = None,
    features: DevFeatures | None = None,
) -> DevStack:
    """The emulated cluster with everything the module expects, and the dev identities bound; with
    `state_file`, the objects saved there by the last run first (the module's own objects are then
    applied over them, from this checkout's chart and CRDs)."""
    names = ("dev-cluster-admin", "dev-user", "dev-namespace-user")
    # Kept with the state: a shell that sourced the env file goes on working after a restart.
    tokens = kept_tokens(out_dir / TOKENS_FILE, names) if state_file is not None else {}
    dev = [
        DevIdentity(
            "cluster-admin",
            "AI_MODELS_TOKEN_CLUSTER_ADMIN",
            Identity(name=names[0], token=tokens.get(names[0]) or new_token()),
            "ClusterAdmin",
        ),
        DevIdentity(
            "user",
            "AI_MODELS_TOKEN_USER",
            Identity(name=names[1], token=tokens.get(names[1]) or new_token()),
            "User",
        ),
        DevIdentity(
            "namespace-user",
            "AI_MODELS_TOKEN_NAMESPACE_USER",
            Identity(name=names[2], token=tokens.get(names[2]) or new_token()),
            "User",
            namespace="default",
        ),
    ]
    features = features or DevFeatures()
    cluster = Cluster(identities=[d.identity for d in dev])
    if state_file is not None:
        try:
            restored = restore_state(cluster, state_file)
        except StateFileError as error:
            raise DevStackError(
                f"cannot restore the cluster: {error}; start empty with `make dev FRESH=1` "
                "(AI_MODELS_DEV_FRESH=1)"
            ) from None
        if restored is not None:
            log.info(
                "restored %d objects from %s (resourceVersion %d)",
                restored.count,
                state_file,
                restored.resource_version,
            )
    cluster.load_crds(load_crd_manifests(crd_dir))
    for namespace in (PLATFORM_NAMESPACE, MODULE_NAMESPACE):
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    # With the certificates the internal TLS hook issues: the controller serves the delivery
    # webhook, which the emulator calls as the API server would.
    chart = render_chart(
        with_internal_tls(
            module_values(features.settings({**MINIMAL_SETTINGS, **delivery_settings(delivery_mode)}))
        )
    )
    for obj in module_rbac_objects(chart):
        cluster.apply(obj)
    for obj in chart.of_kind("MutatingWebhookConfiguration"):
        cluster.apply(obj)
    # The components' own RBAC, exactly as the chart renders it: they run as their ServiceAccounts.
    service_accounts = install_rbac(cluster, chart)
    for entry in dev:
        grant_access_level(cluster, entry.identity, entry.level, namespace=entry.namespace)
    return DevStack(
        cluster=cluster,
        out_dir=out_dir,
        identities=dev,
        service_accounts=service_accounts,
        chart=chart,
        delivery_mode=delivery_mode,
        features=features,
    )


def write_client_files(
    stack: DevStack, *, url: str, ca_pem: str, api_port: int, extra_env: dict[str, str] | None = None
) -> None:
    out = stack.out_dir
    out.mkdir(parents=True, exist_ok=True)
    ca_file = out / "ca.crt"
    ca_file.write_text(ca_pem)
    kubeconfig = write_kubeconfig(
        out / "kubeconfig",
        kubeconfig_document(
            url,
            [(d.context, d.identity) for d in stack.identities],
            current="cluster-admin",
            namespaces={d.context: d.namespace for d in stack.identities if d.namespace},
            ca_pem=ca_pem,
        ),
    )
    lines = [
        "# ai-models dev stack: `source` this file.",
        f"export KUBECONFIG={shlex.quote(str(kubeconfig.resolve()))}",
        # The project's own kubectl (and later the `ai-models` CLI) come first, not the machine's.
        f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH",
        f"export AI_MODELS_DEV_SERVER={shlex.quote(url)}",
        f"export AI_MODELS_DEV_CA_FILE={shlex.quote(str(ca_file.resolve()))}",
        # Where the `ai-models` CLI finds the module's api (uploads, catalog import).
        f"export AI_MODELS_API_URL={shlex.quote(f'http://127.0.0.1:{api_port}')}",
        *(f"export {d.env_var}={shlex.quote(d.identity.token)}" for d in stack.identities),
        *(f"export {key}={shlex.quote(value)}" for key, value in (extra_env or {}).items()),
    ]
    # Written last and renamed into place: its appearance means the stack is ready.
    partial = out / "env.partial"
    partial.write_text("\n".join(lines) + "\n")
    partial.chmod(0o600)
    partial.replace(out / "env")


def report_jsonpath() -> str:
    """kubectl's JSONPath of a Node's cache report annotation (dots in the key escaped)."""
    return "{.metadata.annotations." + names.NODE_CACHE_REPORT_ANNOTATION.replace(".", "\\.") + "}"


def delivery_help(stack: DevStack) -> str:
    """The banner's walk-through of workload delivery in the stack's mode."""
    out = stack.out_dir
    if stack.delivery_mode == NODE_CACHE:
        nodes = ", ".join(DEV_CACHE_NODES)
        return f"""Delivery mode NodeCache: nodes {nodes}, each with its node plugin (logs:
{out}/logs/node-cache-<node>.log; cache: {out}/nodes/<node>/cache/) and a kubelet that mounts each
model read-only into the pod's volume directory under {out}/nodes/<node>/kubelet/pods/:
  kubectl get nodes -L {names.NODE_CACHE_READY_LABEL}     # "true" once a node's plugin is up
  kubectl apply -f docs/examples/deployment-with-model.yaml    # once qwen3-0-6b is Ready, or before
  kubectl get deploy list-model-files -o yaml | grep model-delivery   # the delivery report
  kubectl get pods -o wide                     # Running once the node's cache has the model
  kubectl get events --field-selector reason=FailedMount   # what a pod waits for (a download, a refusal)
  kubectl get node {DEV_CACHE_NODES[0]} -o jsonpath='{report_jsonpath()}'   # its cache report
  findmnt -R {out}/nodes                     # the pods' read-only bind mounts of the cache
"""
    return f"""A workload gets the model's files on a shared volume (default StorageClass testbed-rwx;
materialize Jobs run as local processes, the pods' view of each volume is a directory under
{out}/volumes/):
  kubectl apply -f docs/examples/deployment-with-model.yaml    # once qwen3-0-6b is Ready, or before
  kubectl get deploy list-model-files -o yaml | grep model-delivery   # the delivery report
  kubectl get pvc -l ai.deckhouse.io/shared-pvc=true
  ls -R {out}/volumes/    # pvc-<uid>/objects/sha256-<digest>/ = /data/modelcache/models/qwen3-0-6b
"""


def banner(stack: DevStack, url: str, *, api_port: int, extra: str = "") -> str:
    out = stack.out_dir
    return f"""
ai-models dev stack is up: {url}
  source {out}/env          # PATH (.venv kubectl), KUBECONFIG (contexts cluster-admin, user,
                            # namespace-user) and the tokens AI_MODELS_TOKEN_*
  kubectl apply -f docs/examples/model-hf.yaml
  kubectl get models -A -w
  kubectl apply -f - <<'EOF'     # rejected: spec.source must have exactly one of url, upload, catalog
apiVersion: ai.deckhouse.io/v1alpha1
kind: Model
metadata: {{name: invalid, namespace: default}}
spec: {{source: {{url: https://huggingface.co/org/repo, upload: {{}}}}}}
EOF
  kubectl auth can-i create models --context user                       # no
  kubectl auth can-i list models -n default --context namespace-user    # yes
  kubectl auth can-i list models -n kube-system --context namespace-user  # no
  kubectl get clustermodels --context namespace-user                     # Forbidden: cluster-scoped

The controller and the api run against it (logs: {out}/logs/; store: {out}/store); Jobs with the
module image (publications) run as local processes (Pod logs: {out}/jobs/<namespace>/<pod>/log):
  kubectl get jobs,pods -n d8-ai-models
A model from your own file: PUT it to its status.upload URL with the token of a subject allowed to
update the model (every User reads the URL; $AI_MODELS_TOKEN_USER gets 403):
  kubectl apply -f docs/examples/model-upload.yaml
  url=$(kubectl get model my-finetune -n default -o jsonpath='{{.status.upload.inCluster}}')
  curl -T ./model.gguf -H "Authorization: Bearer $AI_MODELS_TOKEN_CLUSTER_ADMIN" "$url"
{delivery_help(stack)}{extra}A catalog source indexes from HF_ENDPOINT (default https://huggingface.co)
once it carries the opt-in annotation:
  kubectl apply -f docs/examples/modelcatalogsource-hf.yaml
  kubectl get modelcatalogsources -w
  curl -s -H "Authorization: Bearer $AI_MODELS_TOKEN_USER" \\
    "$AI_MODELS_API_URL/api/catalog-import/v1/models?q=qwen&pageSize=5"   # the api, port {api_port}
The cluster's objects are kept in {out}/{STATE_FILE} (with the artifacts in {out}/store): a restart
of `make dev` brings them back, with the same tokens; `make dev FRESH=1` starts empty.
Stop with Ctrl-C.
"""


def port_settings(args: argparse.Namespace) -> list[PortSetting]:
    """Every listener of the stack with the variable (and option) that sets its port."""
    return [
        PortSetting("AI_MODELS_DEV_PORT", "--port", "the Kubernetes API (emulator)", args.port),
        PortSetting(
            "AI_MODELS_DEV_CONTROLLER_HEALTH_PORT",
            "--controller-health-port",
            "the controller's probes",
            args.controller_health_port,
        ),
        PortSetting(
            "AI_MODELS_DEV_CONTROLLER_METRICS_PORT",
            "--controller-metrics-port",
            "the controller's metrics",
            args.controller_metrics_port,
        ),
        PortSetting("AI_MODELS_DEV_API_PORT", "--api-port", "the api", args.api_port),
        PortSetting(
            "AI_MODELS_DEV_API_METRICS_PORT", "--api-metrics-port", "the api's metrics", args.api_metrics_port
        ),
        PortSetting(
            "AI_MODELS_DEV_API_INTERNAL_PORT",
            "--api-internal-port",
            "the api's internal lookup API",
            args.api_internal_port,
        ),
    ]


def wait_listening(processes: list[ModuleProcess]) -> None:
    """Block until every listener of the components has logged the address it bound (the api's own
    port is known already): the banner comes after all of them."""
    for process in processes:
        if process.args[0] == "controller":
            process.health_port()
            process.metrics_port()
        elif process.args[0] == "api":
            process.metrics_port()


def fresh_start(out_dir: Path) -> None:
    """Remove the last run's cluster state and what belongs to it (`FRESH_ENTRIES`)."""
    unmount_under(out_dir / "nodes")  # a killed NodeCache run may leave its pods' mounts
    for entry in FRESH_ENTRIES:
        path = out_dir / entry
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    log.info("starting empty: removed the cluster state and the store under %s", out_dir)


async def run_stack(
    stack: DevStack,
    *,
    host: str,
    port: int,
    ports: DevPorts,
    stop: asyncio.Event,
    settings: list[PortSetting] | None = None,
    state_file: Path | None = None,
) -> None:
    context, ca_file = tls_context(stack.out_dir / "tls")
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[str] = loop.create_future()
    admission = MutatingAdmission(stack.cluster)
    server = asyncio.create_task(
        serve_forever(
            stack.cluster,
            host=host,
            port=port,
            stop=stop,
            ssl_context=context,
            ready=ready,
            admission=admission,
            pod_logs=job_pod_logs(stack.out_dir / "jobs"),  # `kubectl logs` of the Jobs' Pods
        )
    )
    waiting: set[asyncio.Future[Any]] = {server, ready}
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        try:
            await server  # it failed before binding (e.g. the port is taken): raise its error
        except OSError as error:
            raise DevStackError(
                f"the dev stack cannot start: the Kubernetes API cannot listen on {host}:{port} "
                f"({error.strerror or error}): set AI_MODELS_DEV_PORT to a free port (or 0 for any)"
            ) from None
    url = ready.result()
    # From here on every write is saved (at most twice a second and once at the end).
    writer = StateWriter(stack.cluster.store, state_file).start() if state_file is not None else None
    # Before the env file appears (it means "ready"): the stack can run Jobs from the start.
    runner = start_job_runner(
        cluster=stack.cluster, url=url, ca_pem=ca_file.read_text(), out_dir=stack.out_dir
    )
    cache_nodes = dev_cache_nodes(stack.out_dir) if stack.delivery_mode == NODE_CACHE else []
    served = ServedCluster(cluster=stack.cluster, url=url, ca_pem=ca_file.read_text(), workdir=stack.out_dir)
    simulation = (
        module_cluster_simulation(served, nodes=(), csi_nodes=cache_nodes)
        if cache_nodes
        else module_cluster_simulation(served)
    )
    for node in cache_nodes:
        label_node(stack.cluster, node.name, DEV_NODE_GROUP)
    processes: list[ModuleProcess] = []
    try:
        # The api first: the controller's upload URLs and the env file name the port it bound.
        try:
            components = await asyncio.to_thread(
                start_components,
                out_dir=stack.out_dir,
                url=url,
                ca_pem=ca_file.read_text(),
                service_accounts=stack.service_accounts,
                ports=ports,
                chart=stack.chart,
                controller_env={
                    **controller_delivery_env(stack.delivery_mode),
                    **stack.features.controller_env(),
                },
                api_env=stack.features.api_env(stack.chart, out_dir=stack.out_dir) if stack.chart else None,
            )
            processes = components.processes
            await asyncio.to_thread(wait_listening, processes)
        except (ProcessExited, AssertionError, TimeoutError) as error:
            failed = next((p for p in processes if not p.running()), None)
            # start_components kills what it started when one fails; ProcessExited names its args.
            component = failed.args[0] if failed is not None else str(error).split(" ", 1)[0]
            for process in processes:
                await asyncio.to_thread(process.kill)  # their ports free, the check names a taken one
            raise component_failed(
                f"ai-models {component}",
                error,
                log_file=str(stack.out_dir / "logs" / f"{component}.log"),
                # The emulator listens on its own port by now.
                settings=[s for s in settings or [] if s.variable != "AI_MODELS_DEV_PORT"],
            ) from None
        if components.webhook_port is not None:
            admission.route_service(MODULE_NAMESPACE, CONTROLLER_SERVICE, components.webhook_port)
        for node in cache_nodes:
            plugin = await asyncio.to_thread(
                start_node_plugin,
                stack,
                node,
                url=url,
                ca_pem=ca_file.read_text(),
                internal_port=bound_lookup_port(processes),
            )
            processes.append(plugin)
        lookup_port = await asyncio.to_thread(bound_lookup_port, processes)
        write_client_files(
            stack,
            url=url,
            ca_pem=ca_file.read_text(),
            api_port=components.api_port,
            extra_env=stack.features.client_env(out_dir=stack.out_dir, lookup_port=lookup_port),
        )
        extra = features_help(stack.features, out_dir=stack.out_dir, lookup_port=lookup_port)
        print(banner(stack, url, api_port=components.api_port, extra=extra), flush=True)
        await server
    finally:
        for process in processes:
            code = await asyncio.to_thread(process.terminate)
            log.info("%s stopped with exit code %s", process.name, code)
        await asyncio.to_thread(simulation.close)
        log.info("cluster simulation stopped")
        if cache_nodes:
            await asyncio.to_thread(unmount_under, stack.out_dir / "nodes")
        # Last: the controller may create Jobs until it stops; their processes go with the runner.
        await asyncio.to_thread(runner.close)
        log.info("job runner stopped")
        if writer is not None:
            await asyncio.to_thread(writer.close)
            log.info("cluster state saved to %s", state_file)


def dev_cache_nodes(out_dir: Path) -> list[CsiNode]:
    """NodeCache mode's nodes: kubelet directories under `<out>/nodes/`, the plugin sockets beside
    them, or under a short directory in /tmp where that path is too long for a unix socket."""
    sockets = out_dir.resolve() / "nodes"
    if len(str(sockets / DEV_CACHE_NODES[0] / "csi" / "csi.sock")) > MAX_SOCKET_PATH:
        sockets = Path(tempfile.mkdtemp(prefix="ai-models-dev-", dir="/tmp"))
    nodes = [
        CsiNode(
            name=name,
            kubelet_dir=out_dir.resolve() / "nodes" / name / "kubelet",
            socket=sockets / name / "csi" / "csi.sock",
        )
        for name in DEV_CACHE_NODES
    ]
    for node in nodes:
        node.socket.parent.mkdir(parents=True, exist_ok=True)
        node.socket.unlink(missing_ok=True)  # left by a plugin of an earlier run
    return nodes


def label_node(cluster: Cluster, name: str, labels: dict[str, str]) -> None:
    """Add `labels` to the Node, as an admin puts a node into a node group."""
    nodes = cluster.resource("", "v1", "nodes")
    assert nodes is not None
    with cluster.store.lock:
        node = cluster.get(nodes, namespace="", name=name)
        node["metadata"].setdefault("labels", {}).update(labels)
        cluster.update(nodes, node, namespace="", name=name)


def controller_delivery_env(mode: str) -> dict[str, str]:
    """The controller's delivery settings, as the chart renders them from `delivery_settings`."""
    if mode != NODE_CACHE:
        return {}
    return {
        "AI_MODELS_DELIVERY_MODE": NODE_CACHE,
        "AI_MODELS_DELIVERY_NODE_CACHE_SIZE": DEV_CACHE_SIZE,
        "AI_MODELS_DELIVERY_NODE_CACHE_SELECTOR": json.dumps(DEV_NODE_GROUP),
    }


def start_node_plugin(
    stack: DevStack, node: CsiNode, *, url: str, ca_pem: str, internal_port: int
) -> ModuleProcess:
    """The node's `ai-models node-cache` as the chart's ServiceAccount, serving once its socket
    exists. Like the DaemonSet's pod it reads the serving API on the api's internal TLS listener,
    verified with the module CA, with a token for the module audience (what kubelet projects, D159);
    its own token is for the Kubernetes API only."""
    out = stack.out_dir
    identity = pod_bound(stack.cluster, stack.service_accounts[names.NODE_CACHE_COMPONENT], node=node.name)
    kubeconfig = write_kubeconfig(
        out / f"kubeconfig-{names.NODE_CACHE_COMPONENT}-{node.name}",
        kubeconfig_document(
            url, [(identity.name, identity)], current=identity.name, namespaces={}, ca_pem=ca_pem
        ),
    )
    account = identity.service_account_ref
    assert account is not None, identity
    bound = Identity.service_account(*account, audiences=(names.MODULE_TOKEN_AUDIENCE,))
    stack.cluster.authn.add(bound)
    token_file = out / "node-cache-token"
    token_file.write_text(bound.token)
    token_file.chmod(0o600)
    process = plugin_process(
        node,
        cache_root=out.resolve() / "nodes" / node.name / "cache",
        kubeconfig=kubeconfig,
        token_file=token_file,
        api_url=internal_serving_url(internal_port),
        ca_file=(out / CA_FILE).resolve(),
        cache_size=DEV_CACHE_SIZE,
        log_path=out / "logs" / f"node-cache-{node.name}.log",
        env={"AI_MODELS_LOG_FORMAT": "text"},
    ).start()
    try:
        process.wait_until(
            node.socket.exists, timeout=60, what=f"the plugin of {node.name} serving {node.socket}"
        )
    except BaseException:
        process.kill()
        raise
    return process


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m testbed.devstack",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=int(os.environ.get("AI_MODELS_DEV_PORT", DEFAULT_PORT)))
    parser.add_argument(
        "--out-dir", type=Path, default=Path(os.environ.get("AI_MODELS_DEV_DIR", str(REPO_ROOT / ".dev")))
    )
    parser.add_argument("--debug", action="store_true", help="log one line per API request")
    parser.add_argument(
        "--fresh",
        action="store_true",
        default=os.environ.get("AI_MODELS_DEV_FRESH", "") not in ("", "0", "false"),
        help="start with an empty cluster and store (AI_MODELS_DEV_FRESH=1, `make dev FRESH=1`); "
        "by default a restart keeps the last run's objects and artifacts",
    )
    parser.add_argument(
        "--delivery-mode",
        choices=(SHARED_PVC, NODE_CACHE),
        default=os.environ.get("AI_MODELS_DEV_DELIVERY_MODE", SHARED_PVC),
        help="the module setting delivery.mode (NodeCache: two nodes with the node plugin; needs root)",
    )
    parser.add_argument(
        "--controller-health-port",
        type=int,
        default=int(os.environ.get("AI_MODELS_DEV_CONTROLLER_HEALTH_PORT", "18081")),
        help="controller /healthz and /readyz (0 = any free port)",
    )
    parser.add_argument(
        "--controller-metrics-port",
        type=int,
        default=int(os.environ.get("AI_MODELS_DEV_CONTROLLER_METRICS_PORT", "18082")),
        help="controller /metrics on 127.0.0.1 (0 = any free port)",
    )
    parser.add_argument(
        "--api-port",
        type=int,
        default=int(os.environ.get("AI_MODELS_DEV_API_PORT", "18000")),
        help="the catalog API on 127.0.0.1 (0 = any free port; the env file and the banner name it)",
    )
    parser.add_argument(
        "--api-internal-port",
        type=int,
        default=int(os.environ.get("AI_MODELS_DEV_API_INTERNAL_PORT", "18444")),
        help="the api's internal lookup API (TLS, module CA) on 127.0.0.1 (0 = any free port)",
    )
    parser.add_argument(
        "--capacity-limit",
        default=os.environ.get("AI_MODELS_DEV_CAPACITY_LIMIT") or None,
        help="the storage budget, the setting artifacts.capacityLimit (e.g. 10Mi; default none)",
    )
    parser.add_argument(
        "--api-metrics-port",
        type=int,
        default=int(os.environ.get("AI_MODELS_DEV_API_METRICS_PORT", "18083")),
        help="api /metrics on 127.0.0.1 (0 = any free port)",
    )
    return parser.parse_args(argv)


async def _main(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    settings = port_settings(args)
    check_ports(settings)  # before anything starts: a taken port ends the stack at once
    # The env file appears when the stack is ready: the last run's must not say so meanwhile.
    (args.out_dir / "env").unlink(missing_ok=True)
    if args.fresh:
        fresh_start(args.out_dir)
    if args.delivery_mode == NODE_CACHE:
        try:
            require_bind_mounts(args.out_dir / "nodes")
        except MountsNotPermitted as refused:
            raise SystemExit(f"NodeCache mode cannot start: {refused}") from None
    state_file = args.out_dir / STATE_FILE
    try:
        features = DevFeatures(budget=checked_budget(args.capacity_limit), lookup_port=args.api_internal_port)
    except BudgetRefused as refused:
        raise SystemExit(f"the dev stack cannot start: {refused}") from None
    stack = build_stack(
        out_dir=args.out_dir, delivery_mode=args.delivery_mode, state_file=state_file, features=features
    )
    ports = DevPorts(
        controller_health=args.controller_health_port,
        controller_metrics=args.controller_metrics_port,
        api=args.api_port,
        api_metrics=args.api_metrics_port,
    )
    await run_stack(
        stack,
        host="127.0.0.1",
        port=args.port,
        ports=ports,
        stop=stop,
        settings=settings,
        state_file=state_file,
    )
    log.info("dev stack stopped")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("kubeemu").setLevel(logging.DEBUG if args.debug else logging.INFO)
    logging.getLogger("testbed").setLevel(logging.DEBUG if args.debug else logging.INFO)
    try:
        asyncio.run(_main(args))
    except DevStackError as error:
        print(f"make dev: {error}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
