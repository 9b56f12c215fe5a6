"""`ai-models node-cache` as the DaemonSet runs it: the console entry point, settings from the
environment, a kubeconfig for its ServiceAccount; /healthz, a publish over its socket, SIGTERM."""

from __future__ import annotations

import http.client
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from pydantic import ValidationError

from ai_models.csi import csi_pb2, csi_pb2_grpc
from ai_models.domain.delivery.claim_layout import object_dir
from ai_models.names import (
    API_INTERNAL_URL,
    NODE_CACHE_DRIVER,
    NODE_CACHE_MODULE_CA_FILE,
    NODE_CACHE_MODULE_TOKEN_FILE,
    NODE_CACHE_READY_LABEL,
    VOLUME_DIGEST_ATTRIBUTE,
    VOLUME_MODEL_ATTRIBUTE,
)
from ai_models.nodecache.health import HealthServer
from ai_models.nodecache.identity import IdentityService
from ai_models.nodecache.mounts import mount_at, unmount
from ai_models.nodecache.node import NodeService
from ai_models.nodecache.server import CsiServer
from ai_models.nodecache.settings import NodeCacheSettings
from csi.plugin import Pod, kubelet_publish
from support.node_cache_stack import CacheStack, cache_stack_fixture  # noqa: F401  (fixture)
from support.processes import ENTRY_POINT, ModuleProcess

HEALTH_LISTENING = "serving /healthz"
NODE = "node-a"


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # A unix socket path has at most 107 characters: pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="csi-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def plugin_environment(stack: CacheStack, kubelet_dir: Path) -> dict[str, str]:
    return {
        "KUBECONFIG": str(stack.kubeconfig(node=NODE)),
        "AI_MODELS_NODE_CACHE_SIZE": "1Gi",
        "AI_MODELS_NODE_CACHE_API_URL": stack.url,
        "AI_MODELS_NODE_CACHE_TOKEN_FILE": str(stack.token_file),
        "AI_MODELS_NODE_CACHE_API_CA_FILE": str(stack.ca_file),
        "AI_MODELS_NODE_CACHE_KUBELET_DIR": str(kubelet_dir),
        "AI_MODELS_NODE_CACHE_HEALTH_ADDRESS": "127.0.0.1",
        "AI_MODELS_NODE_CACHE_HEALTH_PORT": "0",
    }


def healthz(port: int) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status
    finally:
        connection.close()


def metrics(port: int) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        assert response.status == 200
        return response.read().decode()
    finally:
        connection.close()


def node_label(stack: CacheStack) -> str | None:
    cluster = stack.emulator.cluster
    node = cluster.get(cluster.resource_for("v1", "Node"), namespace="", name=NODE)
    labels = node["metadata"].get("labels") or {}
    value = labels.get(NODE_CACHE_READY_LABEL)
    return str(value) if value is not None else None


def test_the_process_serves_csi_and_healthz_and_leaves_mounts_when_it_stops(
    cache_stack: CacheStack, tmp_path: Path, socket_dir: Path
) -> None:
    llama = cache_stack.publish("llama", {"config.json": b"{}", "w.bin": b"weights" * 1000})
    attributes = {VOLUME_MODEL_ATTRIBUTE: "llama", VOLUME_DIGEST_ATTRIBUTE: llama.digest}
    emulator = cache_stack.emulator
    emulator.cluster.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    # A pod bound to the node before the plugin starts: the prefetch fetches its model unasked.
    emulator.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "team-a"},
            "spec": {
                "nodeName": NODE,
                "containers": [{"name": "server", "image": "server:1"}],
                "volumes": [
                    {
                        "name": "model",
                        "csi": {
                            "driver": NODE_CACHE_DRIVER,
                            "readOnly": True,
                            "volumeAttributes": attributes,
                        },
                    }
                ],
            },
        }
    )
    kubelet_dir = tmp_path / "kubelet"
    plugin_socket = socket_dir / "csi.sock"
    arguments = (
        "node-cache",
        f"--csi-endpoint=unix://{plugin_socket}",
        f"--node-name={NODE}",
        f"--cache-root={tmp_path / 'cache'}",
    )
    process = ModuleProcess(
        *arguments, env=plugin_environment(cache_stack, kubelet_dir), log_path=tmp_path / "plugin.log"
    )
    request = kubelet_publish(kubelet_dir, pod=Pod("team-a", "web-0"), volume="model", attributes=attributes)
    target = Path(request.target_path)
    try:
        with process:
            port = process.bound_port(HEALTH_LISTENING)
            process.wait_until(lambda: healthz(port) == 200, timeout=30, what="/healthz to answer 200")
            process.wait_until(
                lambda: node_label(cache_stack) == "true", timeout=30, what="the readiness label"
            )
            # Its requests to the API server, counted as the controller's are: the Node patch (the
            # label is in the Node a moment before the plugin has read the answer and counted it).
            patched = (
                'd8_ai_models_node_cache_kubernetes_requests_total{code="200",resource="nodes",verb="patch"}'
            )
            process.wait_until(lambda: patched in metrics(port), timeout=10, what="the patch to be counted")
            tree = tmp_path / "cache" / object_dir(llama.digest)
            process.wait_until(tree.is_dir, timeout=60, what="the prefetched tree")
            with grpc.insecure_channel(f"unix://{plugin_socket}") as channel:
                node = csi_pb2_grpc.NodeStub(channel)
                published = process.wait_until(
                    lambda: _published(node, request), timeout=60, what="the volume to be published"
                )
                assert published
            assert (target / "w.bin").read_bytes() == b"weights" * 1000
            assert process.terminate() == 0
        assert not plugin_socket.exists()  # removed at stop: the next plugin binds a fresh one
        mount = mount_at(target)
        assert mount is not None  # the pod keeps its files while no plugin runs
        assert mount.read_only
        assert "node cache plugin stopping" in process.log()
        assert node_label(cache_stack) == "false"  # no new pod is placed here while no plugin runs
    finally:
        unmount(target)


def _published(node: csi_pb2_grpc.NodeStub, request: csi_pb2.NodePublishVolumeRequest) -> bool:
    try:
        node.NodePublishVolume(request, timeout=30)
    except grpc.RpcError as error:
        # Still downloading: kubelet would retry, and so does this wait.
        if error.code() is grpc.StatusCode.UNAVAILABLE:
            return False
        raise
    return True


@pytest.mark.parametrize(
    ("arguments", "unset", "says"),
    [
        (("--csi-endpoint=unix:///tmp/csi.sock",), "AI_MODELS_NODE_CACHE_SIZE", "AI_MODELS_NODE_CACHE_SIZE"),
        (("--csi-endpoint=tcp://127.0.0.1:1",), "", "must be unix:///<absolute path of the socket>"),
        ((f"--csi-endpoint=unix:///tmp/{'s' * 100}.sock",), "", "at most 105 bytes, this one has 110"),
    ],
    ids=["no-size", "not-unix", "too-long"],
)
def test_bad_settings_exit_2_naming_what_to_fix(
    tmp_path: Path, arguments: tuple[str, ...], unset: str, says: str
) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "AI_MODELS_NODE_CACHE_SIZE": "1Gi",
        "AI_MODELS_NODE_CACHE_API_URL": "https://127.0.0.1:1",
    }
    env.pop(unset, None)
    result = subprocess.run(
        [str(ENTRY_POINT), "node-cache", *arguments, "--node-name=n", f"--cache-root={tmp_path}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert says in result.stderr


def test_settings_read_the_variables_the_chart_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AI_MODELS_NODE_CACHE_SIZE", "500Gi")
    monkeypatch.setenv("AI_MODELS_NODE_CACHE_API_URL", API_INTERNAL_URL)
    monkeypatch.setenv("AI_MODELS_NODE_CACHE_KUBELET_DIR", "/var/lib/k0s/kubelet")
    settings = NodeCacheSettings()  # type: ignore[call-arg]  # the required fields come from the environment
    assert settings.node_cache_size == 500 * 1024**3
    assert settings.node_cache_kubelet_dir == Path("/var/lib/k0s/kubelet")
    # The module-audience token and the module CA the chart mounts, not the API server's token.
    assert settings.node_cache_token_file == Path(NODE_CACHE_MODULE_TOKEN_FILE)
    assert settings.node_cache_api_ca_file == NODE_CACHE_MODULE_CA_FILE
    assert settings.node_cache_publish_wait_seconds == 30.0
    assert (settings.node_cache_health_address, settings.node_cache_health_port) == ("0.0.0.0", 9808)
    # A wait at kubelet's own deadline (120 s) would turn "retry later" into a timed-out call.
    monkeypatch.setenv("AI_MODELS_NODE_CACHE_PUBLISH_WAIT_SECONDS", "120")
    with pytest.raises(ValidationError, match="node_cache_publish_wait_seconds"):
        NodeCacheSettings()  # type: ignore[call-arg]


def test_the_plugin_refuses_to_start_on_a_plain_http_api(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "AI_MODELS_NODE_CACHE_SIZE": "1Gi",
        "AI_MODELS_NODE_CACHE_API_URL": "http://ai-models-api.d8-ai-models.svc",
    }
    result = subprocess.run(
        [
            str(ENTRY_POINT),
            "node-cache",
            "--csi-endpoint=unix:///tmp/csi.sock",
            "--node-name=n",
            f"--cache-root={tmp_path}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "AI_MODELS_NODE_CACHE_API_URL" in result.stderr
    assert "must be an https URL" in result.stderr


def test_healthz_is_503_while_unhealthy_metrics_are_served_and_other_paths_are_404() -> None:
    healthy = [False]
    server = HealthServer(healthy=lambda: healthy[0], address="127.0.0.1", port=0).start()
    try:
        assert healthz(server.port) == 503
        healthy[0] = True
        assert healthz(server.port) == 200
        assert "# HELP" not in metrics(server.port)  # an empty registry of its own
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        connection.request("GET", "/debug")
        assert connection.getresponse().status == 404
        connection.close()
    finally:
        server.stop()


def test_a_socket_left_by_a_killed_plugin_is_replaced_and_anything_else_is_refused(
    socket_dir: Path, tmp_path: Path
) -> None:
    path = socket_dir / "csi.sock"
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(path))
    left.close()  # the file stays, as after a SIGKILL
    node = NodeService(
        node_name="n", kubelet_dir=tmp_path, cache=_NO_CACHE, models=_NO_MODELS, publish_wait_seconds=1
    )
    server = CsiServer(endpoint=f"unix://{path}", identity=IdentityService(ready=lambda: True), node=node)
    server.start()
    try:
        with grpc.insecure_channel(f"unix://{path}") as channel:
            info = csi_pb2_grpc.IdentityStub(channel).GetPluginInfo(csi_pb2.GetPluginInfoRequest(), timeout=5)
            assert info.name == NODE_CACHE_DRIVER
        assert stat.S_IMODE(path.stat().st_mode) == 0o660
    finally:
        server.stop(grace=0.5)
    path.write_text("not a socket")
    with pytest.raises(ValueError, match="exists and is not a socket"):
        CsiServer(endpoint=f"unix://{path}", identity=IdentityService(ready=lambda: True), node=node).start()


class _Unused:
    """A peer these tests never reach: only Identity calls are made."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{name} was not expected to be called")


_NO_CACHE: Any = _Unused()
_NO_MODELS: Any = _Unused()
