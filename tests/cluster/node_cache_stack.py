"""A NodeCache delivery stack for cluster tests: the delivery stack (`delivery_stack`: emulator with
the module's RBAC rendered in `delivery.mode: NodeCache`, fake Hub, moto S3, api and controller as
real processes, the webhook over HTTPS) plus what a NodeCache cluster runs on its nodes:

- the test bed's cluster simulation with CSI nodes: every node has a kubelet directory
  (`<workdir>/nodes/<node>/kubelet`) and the CSI kubelet (`testbed.csi_kubelet`) publishes the Pods'
  inline volumes of `node-cache.ai-models.deckhouse.io` over that node's plugin socket;
- per node, the REAL plugin process `ai-models node-cache --csi-endpoint unix://... --node-name <node>
  --cache-root <workdir>/nodes/<node>/cache`, as the chart's DaemonSet starts it: its ServiceAccount
  `node-cache` with the ClusterRole the chart renders (kubeconfig of the emulator), the
  same ServiceAccount's token in its token file (what the serving API reviews), the serving API
  reached through a `TcpProxy` (`api_proxy`: a test throttles or cuts the downloads);
- the plugin's own readiness: it labels its Node `ai.deckhouse.io/node-cache-runtime-ready=true`, and
  the controller places the pods on such Nodes.

`node_cache_environment` starts the emulator, the fake Hub and a bucket for a whole test module (a
publication and a stack per test would cost most of the run): tests share one stack, each with its
own Models (so its own digests: no other test's cache hides its download) and workload names.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import shutil
import tempfile
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ai_models import names
from ai_models.domain.delivery.claim_layout import object_dir
from cluster.delivery_stack import DeliveryStack, delivery_stack, tree_digests
from cluster.model_stack import USER_NAMESPACE
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel
from fakes.model_files import safetensors_bytes
from fakes.s3 import MotoS3, S3Bucket, fresh_bucket_name
from kubeemu.pytest_fixtures import REPO_CRDS, RunningEmulator, start_emulator
from support.node_cache_plugin import plugin_process
from support.node_cache_stack import module_token
from support.processes import ModuleProcess
from support.tcpproxy import TcpProxy
from testbed.csi_kubelet import CsiMount, CsiNode, is_mount_point, require_bind_mounts, unmount_under
from testbed.module import module_cluster_simulation
from testbed.simulation import ClusterSimulation

# The chart's ServiceAccount of the node plugin, named after its component like the controller's
# and the api's (templates/node-cache/rbac-for-us.yaml).
NODE_CACHE_ACCOUNT = names.NODE_CACHE_COMPONENT
NODES = ("cache-node-a", "cache-node-b")
# The node group of the cache nodes, as an admin labels them and selects them in the module setting.
NODE_GROUP = {"node.deckhouse.io/group": "model-cache"}
# The cache size of the module setting and of every plugin, unless a test gives another.
CACHE_SIZE = "64Mi"
# The plugins' wait inside NodePublish: short, so a test sees the retryable answers and the retries.
PUBLISH_WAIT_SECONDS = "3"
# The CSI kubelet's retry cap (kubelet's is 2 min 2 s): tests wait seconds, not minutes.
KUBELET_RETRY_CAP_SECONDS = 2.0


def model_files(tag: str, *, rows: int = 256) -> dict[str, bytes]:
    """A small llama-shaped repository whose digest is its own (`tag` is in its config); `rows`
    sets the weights' size: rows x 64 BF16 values per tensor, two tensors."""
    config = json.dumps(
        {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "name_or_path": tag}
    ).encode()
    weights = safetensors_bytes(
        {"embed.weight": ("BF16", (rows, 64)), "lm_head.weight": ("BF16", (rows, 64))}
    )
    return {"config.json": config, "model.safetensors": weights, "tokenizer.json": b'{"version": "1.0"}'}


@dataclasses.dataclass
class NodeCachePlugin:
    """One node's plugin process and where it keeps things."""

    node: CsiNode
    cache_root: Path
    process: ModuleProcess


@dataclasses.dataclass
class NodeCacheStack:
    delivery: DeliveryStack
    nodes: dict[str, CsiNode]
    plugins: dict[str, NodeCachePlugin]
    api_proxy: TcpProxy
    token_file: Path
    workdir: Path
    cache_size: str

    @property
    def emulator(self) -> RunningEmulator:
        return self.delivery.emulator

    @property
    def simulation(self) -> ClusterSimulation:
        return self.delivery.simulation

    @property
    def core(self) -> Any:
        return self.delivery.core

    # ----- plugins -------------------------------------------------------------------------------

    def start_plugin(self, node: str, **env: str) -> NodeCachePlugin:
        """The real `ai-models node-cache` of `node` (again, after `kill_plugin`: same socket, same
        cache root, the log appended to)."""
        csi = self.nodes[node]
        cache_root = self.workdir / "nodes" / node / "cache"
        process = plugin_process(
            csi,
            cache_root=cache_root,
            kubeconfig=self.delivery.models.module.pod_kubeconfig(NODE_CACHE_ACCOUNT, node=node),
            token_file=self.token_file,
            api_url=self.api_proxy.url("https"),
            ca_file=self.delivery.models.api_ca_file,
            cache_size=self.cache_size,
            log_path=self.workdir / f"node-cache-{node}.log",
            env={"AI_MODELS_NODE_CACHE_PUBLISH_WAIT_SECONDS": PUBLISH_WAIT_SECONDS, **env},
        ).start()
        self.delivery.models.processes.append(process)
        plugin = NodeCachePlugin(node=csi, cache_root=cache_root, process=process)
        self.plugins[node] = plugin
        process.wait_until(csi.socket.exists, timeout=60, what=f"the plugin of {node} serving {csi.socket}")
        return plugin

    def kill_plugin(self, node: str) -> None:
        """SIGKILL, as a node's plugin container crashing: nothing of it cleans up."""
        plugin = self.plugins[node]
        plugin.process.kill()
        # kubelet's socket dir outlives the container; a restarted plugin removes the stale socket.

    def node(self, name: str) -> dict[str, Any]:
        status, _, body = self.emulator.request("GET", f"/api/v1/nodes/{name}")
        assert status == 200, (name, status, body)
        assert isinstance(body, dict)
        return body

    def node_ready(self, name: str) -> bool:
        labels = self.node(name)["metadata"].get("labels") or {}
        return labels.get(names.NODE_CACHE_READY_LABEL) == "true"

    def node_report(self, name: str) -> dict[str, Any]:
        """The plugin's cache report on its Node (the annotation an admin reads)."""
        annotations = self.node(name)["metadata"].get("annotations") or {}
        text = annotations.get(names.NODE_CACHE_REPORT_ANNOTATION)
        report: dict[str, Any] = json.loads(text) if text else {}
        return report

    def wait_nodes_ready(self, nodes: Sequence[str] = NODES, *, timeout: float = 60) -> None:
        for name in nodes:
            self.eventually(
                functools.partial(self.node_ready, name),
                timeout=timeout,
                what=functools.partial(self._node_described, name),
            )

    def _node_described(self, name: str) -> str:
        return f"node {name} labelled ready by its plugin: {self.node(name)['metadata']}"

    # ----- the cache on a node -------------------------------------------------------------------

    def tree(self, node: str, digest: str) -> Path:
        """Where the plugin of `node` keeps the verified tree of `digest` (the claim layout)."""
        return self.plugins[node].cache_root / object_dir(digest)

    # ----- pods ----------------------------------------------------------------------------------

    def csi_mounts(self, pod: Mapping[str, Any]) -> list[CsiMount]:
        assert self.simulation.csi is not None
        return self.simulation.csi.mounts(pod)

    def delivered_files(self, pod: Mapping[str, Any], model: str) -> dict[str, str]:
        """relative path -> sha256 of what the pod sees at /data/modelcache/models/<model>: the
        files at its volume's target on its node, which must be a mount point."""
        wanted = f"{names.MODELS_DIR}/{model}"
        for mount in self.csi_mounts(pod):
            if mount.mount_path == wanted:
                assert is_mount_point(mount.target), f"{mount.target} is not mounted"
                return tree_digests(mount.target)
        return {}

    def failed_mounts(self, pod: Mapping[str, Any]) -> list[str]:
        """The messages of the Pod's FailedMount Events, oldest first."""
        assert self.simulation.csi is not None
        return [str(e.get("message")) for e in self.simulation.csi.failed_mounts(pod)]

    def pod(self, name: str, namespace: str = USER_NAMESPACE) -> dict[str, Any]:
        status, _, body = self.emulator.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        assert status == 200, (namespace, name, status, body)
        assert isinstance(body, dict)
        return body

    def pods(self, namespace: str = USER_NAMESPACE, selector: str | None = None) -> list[dict[str, Any]]:
        return self.delivery.pods(namespace, selector)

    def running(self, namespace: str = USER_NAMESPACE, selector: str | None = None) -> list[dict[str, Any]]:
        return [
            p for p in self.pods(namespace, selector) if (p.get("status") or {}).get("phase") == "Running"
        ]

    def wait_running(
        self, count: int, *, namespace: str = USER_NAMESPACE, selector: str | None = None, timeout: float = 90
    ) -> list[dict[str, Any]]:
        self.eventually(
            lambda: len(self.running(namespace, selector)) == count,
            timeout=timeout,
            what=lambda: f"{count} pods running ({selector}): {self.describe(namespace, selector)}",
        )
        return self.running(namespace, selector)

    def describe(self, namespace: str = USER_NAMESPACE, selector: str | None = None) -> str:
        lines = []
        for pod in self.pods(namespace, selector)[:10]:
            statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
            lines.append(
                f"pod {pod['metadata']['name']} on {pod['spec'].get('nodeName')}: "
                f"{(pod.get('status') or {}).get('phase')} {statuses[0].get('state')} "
                f"nodeSelector {pod['spec'].get('nodeSelector')}"
            )
        lines.extend(f"node {n}: {self.node(n)['metadata'].get('labels')}" for n in self.nodes)
        return "\n".join(lines)

    def eventually(
        self, check: Callable[[], object], *, timeout: float = 60, what: str | Callable[[], str]
    ) -> None:
        self.delivery.models.eventually(lambda: bool(check()), timeout=timeout, what=what)

    # ----- the serving API's side of the downloads -----------------------------------------------

    def api_metrics(self) -> dict[str, float]:
        return self.delivery.models.metrics("api-0")

    def served(self, route: str) -> float:
        """GET answers 200/206 of the serving API so far on routes ending `/<route>` or with it
        inside (`manifest`, `files/{path:path}`)."""
        return sum(
            value
            for sample, value in self.api_metrics().items()
            if sample.startswith(f"{names.API_METRICS_PREFIX}requests_total{{")
            and f"/{route}" in sample
            and 'method="GET"' in sample
            and ('code="200"' in sample or 'code="206"' in sample)
        )

    def served_bytes(self) -> float:
        return self.api_metrics().get(f"{names.API_METRICS_PREFIX}served_bytes_total", 0.0)


def csi_volume(model: str, digest: str, *, cluster: bool = False, name: str = "model") -> dict[str, Any]:
    """A hand-written inline volume of the driver, as a user could write it (hints only)."""
    kind = names.VOLUME_CLUSTER_MODEL_ATTRIBUTE if cluster else names.VOLUME_MODEL_ATTRIBUTE
    return {
        "name": name,
        "csi": {
            "driver": names.NODE_CACHE_DRIVER,
            "readOnly": True,
            "volumeAttributes": {kind: model, names.VOLUME_DIGEST_ATTRIBUTE: digest},
        },
    }


def bare_pod(name: str, *, namespace: str, node: str, volume: Mapping[str, Any]) -> dict[str, Any]:
    """A Pod written by hand onto `node` with one inline volume of the driver (no webhook sees it),
    mounted where delivery mounts the model the volume's attributes name."""
    attributes = volume["csi"]["volumeAttributes"]
    model = attributes.get(names.VOLUME_MODEL_ATTRIBUTE) or attributes[names.VOLUME_CLUSTER_MODEL_ATTRIBUTE]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "server",
                    "image": "registry.example/inference:1",
                    "volumeMounts": [
                        {"name": volume["name"], "mountPath": f"{names.MODELS_DIR}/{model}", "readOnly": True}
                    ],
                }
            ],
            "volumes": [dict(volume)],
        },
    }


@contextlib.contextmanager
def node_cache_environment(
    workdir: Path, moto: MotoS3, corpus: Sequence[FakeModel]
) -> Iterator[tuple[RunningEmulator, FakeHub, S3Bucket]]:
    """The emulator (with the repository's CRDs), a fake Hub over `corpus` and a fresh bucket, for as
    long as the caller (a module-scoped fixture) needs them."""
    emulator = start_emulator(workdir / "emulator", crd_dirs=[REPO_CRDS])
    bucket = S3Bucket(name=fresh_bucket_name(), server=moto)
    moto.create_bucket(bucket.name)
    try:
        with FakeHub(corpus) as hub:
            yield emulator, hub, bucket
    finally:
        emulator.close()


def node_cache_stack(
    emulator: RunningEmulator,
    hub: FakeHub,
    bucket: S3Bucket,
    workdir: Path,
    *,
    nodes: Sequence[str] = NODES,
    cache_size: str = CACHE_SIZE,
    node_selector: Mapping[str, str] | None = None,
    controller_env: Mapping[str, str] | None = None,
) -> Iterator[NodeCacheStack]:
    """The stack with the api, the controller in NodeCache mode and a ready plugin on every node."""
    require_bind_mounts(workdir)
    # The plugin sockets live under a short directory: a unix socket path has at most 107 bytes.
    sockets = Path(tempfile.mkdtemp(prefix="nc-", dir="/tmp"))
    csi_nodes = [
        CsiNode(name=n, kubelet_dir=workdir / "nodes" / n / "kubelet", socket=sockets / n / "csi.sock")
        for n in nodes
    ]
    for node in csi_nodes:
        node.socket.parent.mkdir(parents=True)
    simulation = functools.partial(
        module_cluster_simulation, nodes=(), csi_nodes=csi_nodes, csi_retry_cap=KUBELET_RETRY_CAP_SECONDS
    )
    selector = dict(NODE_GROUP if node_selector is None else node_selector)
    settings = {
        "delivery": {"mode": "NodeCache", "nodeCache": {"size": cache_size, "nodeSelector": selector}}
    }
    try:
        for delivery in delivery_stack(
            emulator, hub, bucket, workdir, settings=settings, simulation=simulation
        ):
            accounts = delivery.models.module.service_accounts
            assert NODE_CACHE_ACCOUNT in accounts, (
                f"the chart rendered in NodeCache mode has no ServiceAccount {NODE_CACHE_ACCOUNT} "
                f"(it has {sorted(accounts)})"
            )
            for node in csi_nodes:
                label_node(emulator, node.name, NODE_GROUP)
            token_file = workdir / "node-cache-token"
            # The projected module-audience token kubelet would give the plugin (D159).
            token_file.write_text(module_token(emulator, accounts[NODE_CACHE_ACCOUNT]))
            delivery.api()
            internal_port = delivery.models.internal_api_port
            assert internal_port is not None
            # The api's internal TLS listener: a test CA's certificate for 127.0.0.1.
            with TcpProxy("127.0.0.1", internal_port) as api_proxy:
                stack = NodeCacheStack(
                    delivery=delivery,
                    nodes={n.name: n for n in csi_nodes},
                    plugins={},
                    api_proxy=api_proxy,
                    token_file=token_file,
                    workdir=workdir,
                    cache_size=cache_size,
                )
                delivery.controller(
                    AI_MODELS_DELIVERY_MODE="NodeCache",
                    AI_MODELS_DELIVERY_NODE_CACHE_SIZE=cache_size,
                    AI_MODELS_DELIVERY_NODE_CACHE_SELECTOR=json.dumps(selector),
                    **dict(controller_env or {}),
                )
                try:
                    for node in csi_nodes:
                        stack.start_plugin(node.name)
                    stack.wait_nodes_ready([n.name for n in csi_nodes])
                    yield stack
                finally:
                    # The plugins go first (the pods' volumes stay as a node's would), then what is
                    # still mounted under the stack's nodes is taken away.
                    for plugin in stack.plugins.values():
                        plugin.process.kill()
                    unmount_under(workdir / "nodes")
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


def on_node(manifest: dict[str, Any], node: str) -> dict[str, Any]:
    """The workload's pods pinned to `node` by the user's own nodeSelector."""
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return manifest


def digest_of(stack: NodeCacheStack, model: str, namespace: str = USER_NAMESPACE) -> str:
    return str(stack.delivery.models.status(model, namespace=namespace)["artifact"]["digest"])


def label_node(emulator: RunningEmulator, node: str, labels: Mapping[str, str]) -> None:
    status, _, body = emulator.request(
        "PATCH",
        f"/api/v1/nodes/{node}",
        body={"metadata": {"labels": dict(labels)}},
        content_type="application/merge-patch+json",
    )
    assert status == 200, (node, status, body)


def fetch(url: str, *, token: str, timeout: float = 10) -> bytes:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body: bytes = response.read()
        return body
