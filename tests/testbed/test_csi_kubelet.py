"""The test bed's CSI kubelet against a CSI node plugin served over a unix socket: what it sends for
an ephemeral inline volume, how it retries and reports a failure, and how it tears a Pod's volumes
down before the Pod goes (see testbed.csi_kubelet).

The plugin here is a recording `csi.v1.Node` server that does what a node plugin does with a target
(a real read-only bind mount of a fixed directory, as root); `tests/cluster/test_node_cache_*.py`
run the same kubelet against the real `ai-models node-cache`.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from ai_models import names
from ai_models.csi import csi_pb2, csi_pb2_grpc
from kubeemu.pytest_fixtures import RunningEmulator
from support.eventually import eventually
from testbed.csi_kubelet import (
    VOLUMES_FINALIZER,
    CsiKubelet,
    CsiNode,
    is_mount_point,
    mount_points,
    require_bind_mounts,
    target_path,
    volume_handle,
)
from testbed.scheduler import PodScheduler

NAMESPACE = "default"
NODE = "csi-node-a"
OTHER_NODE = "plain-node"
DRIVER = names.NODE_CACHE_DRIVER


def mount(*args: str) -> None:
    """`mount`/`umount` as root; a machine where that is not permitted fails the test saying so."""
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(
            f"{' '.join(args)} failed: {done.stderr.strip()}. The CSI tests need real bind mounts: run "
            "them as root (as here and in CI), or in a user and mount namespace (unshare -rm)"
        )


@dataclasses.dataclass
class Answer:
    code: grpc.StatusCode
    message: str


class RecordingPlugin(csi_pb2_grpc.NodeServicer):
    """A node plugin that bind-mounts `content` read-only at each target, after answering the
    queued failures (one per call); records every request with its arrival time."""

    def __init__(self, content: Path) -> None:
        self.content = content
        self.publish_failures: list[Answer] = []
        self.refused_volumes: dict[str, Answer] = {}  # volume name -> the answer to every publish
        self.publishes: list[tuple[float, csi_pb2.NodePublishVolumeRequest]] = []
        self.unpublishes: list[csi_pb2.NodeUnpublishVolumeRequest] = []
        self.mounted: set[Path] = set()
        self._lock = threading.Lock()

    def NodePublishVolume(  # noqa: N802 (the gRPC method's name)
        self, request: csi_pb2.NodePublishVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodePublishVolumeResponse:
        with self._lock:
            self.publishes.append((time.monotonic(), request))
            failure = self.publish_failures.pop(0) if self.publish_failures else None
            failure = self.refused_volumes.get(Path(request.target_path).parent.name, failure)
        if failure is not None:
            context.abort(failure.code, failure.message)
        target = Path(request.target_path)
        target.mkdir(exist_ok=True)
        if not is_mount_point(target):
            mount("mount", "--bind", str(self.content), str(target))
            mount("mount", "-o", "remount,bind,ro,nosuid,nodev", str(target))
            with self._lock:
                self.mounted.add(target)
        return csi_pb2.NodePublishVolumeResponse()

    def NodeUnpublishVolume(  # noqa: N802 (the gRPC method's name)
        self, request: csi_pb2.NodeUnpublishVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodeUnpublishVolumeResponse:
        with self._lock:
            self.unpublishes.append(request)
        target = Path(request.target_path)
        if is_mount_point(target):
            mount("umount", str(target))
            with self._lock:
                self.mounted.discard(target)
        if target.exists():
            target.rmdir()
        return csi_pb2.NodeUnpublishVolumeResponse()


class PluginServer:
    """The recording plugin on a unix socket; `stop()` and `start()` again play a plugin restart."""

    def __init__(self, plugin: RecordingPlugin, socket: Path) -> None:
        self.plugin = plugin
        self.socket = socket
        self._server: grpc.Server | None = None

    def start(self) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        csi_pb2_grpc.add_NodeServicer_to_server(self.plugin, server)
        server.add_insecure_port(f"unix://{self.socket}")
        server.start()
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=0).wait()
            self._server = None
        self.socket.unlink(missing_ok=True)


@dataclasses.dataclass
class Bed:
    emulator: RunningEmulator
    kubelet: CsiKubelet
    scheduler: PodScheduler
    server: PluginServer
    node: CsiNode

    @property
    def plugin(self) -> RecordingPlugin:
        return self.server.plugin

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        rtype = self.emulator.cluster.resource("", "v1", "pods")
        assert rtype is not None
        return self.emulator.cluster.create(rtype, body, namespace=NAMESPACE).object

    def pod(self, name: str) -> dict[str, Any] | None:
        return self.scheduler.get("pods", NAMESPACE, name)

    def delete(self, name: str) -> None:
        rtype = self.emulator.cluster.resource("", "v1", "pods")
        assert rtype is not None
        self.emulator.cluster.delete(rtype, namespace=NAMESPACE, name=name)

    def waiting_message(self, name: str) -> str:
        statuses = (self.pod(name) or {}).get("status", {}).get("containerStatuses") or [{}]
        return str(statuses[0].get("state", {}).get("waiting", {}).get("message") or "")


@pytest.fixture
def bed(kube_emulator: RunningEmulator, tmp_path: Path) -> Iterator[Bed]:
    content = tmp_path / "content"
    content.mkdir()
    (content / "config.json").write_text('{"model_type": "llama"}')
    # A unix socket path is at most 107 bytes: pytest's tmp_path can be longer.
    sockets = Path(tempfile.mkdtemp(prefix="csi-", dir="/tmp"))
    node = CsiNode(name=NODE, kubelet_dir=tmp_path / NODE / "kubelet", socket=sockets / "csi.sock")
    server = PluginServer(RecordingPlugin(content), node.socket)
    server.start()
    kubelet = CsiKubelet(kube_emulator, nodes=[node], drivers=[DRIVER], retry_cap=2.0)
    scheduler = PodScheduler(kube_emulator, nodes=[NODE, OTHER_NODE], volume_setup=kubelet.pending_message)
    kubelet.on_change = lambda namespace, name: scheduler.kick(("pod", namespace, name))
    try:
        yield Bed(kube_emulator, kubelet, scheduler, server, node)
    finally:
        scheduler.close()
        kubelet.close()
        server.stop()
        for target in list(server.plugin.mounted):
            subprocess.run(["umount", "-l", str(target)], check=False)
        shutil.rmtree(sockets, ignore_errors=True)


def csi_pod(
    name: str,
    *,
    node: str = NODE,
    driver: str = DRIVER,
    attributes: dict[str, str] | None = None,
    account: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [
            {
                "name": "server",
                "image": "registry.example/inference:1",
                "volumeMounts": [
                    {"name": "model", "mountPath": "/data/modelcache/models/tiny", "readOnly": True}
                ],
            }
        ],
        "volumes": [
            {
                "name": "model",
                "csi": {"driver": driver, "readOnly": True, "volumeAttributes": attributes or {"a": "b"}},
            }
        ],
    }
    if account:
        spec["serviceAccountName"] = account
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


def shows(bed: Bed, name: str, message: str) -> bool:
    return bed.waiting_message(name) == message


def running(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def test_a_pod_runs_once_its_volume_is_published_with_what_kubelet_sends_and_reads_it_read_only(
    bed: Bed,
) -> None:
    forged = {
        names.VOLUME_MODEL_ATTRIBUTE: "tiny",
        names.KUBELET_POD_NAMESPACE: "kube-system",  # a Pod's author cannot speak for kubelet
        names.KUBELET_EPHEMERAL: "false",
    }
    created = bed.create(csi_pod("web", attributes=forged, account="inference"))
    uid = created["metadata"]["uid"]

    pod = bed.scheduler.wait_for_pod("web", NAMESPACE)

    [(_, request)] = bed.plugin.publishes
    target = bed.node.kubelet_dir / "pods" / uid / "volumes" / "kubernetes.io~csi" / "model" / "mount"
    assert request.volume_id == volume_handle(uid, "model")
    assert re.fullmatch("csi-[0-9a-f]{64}", request.volume_id)
    assert request.target_path == str(target) == str(target_path(bed.node.kubelet_dir, uid, "model"))
    assert request.staging_target_path == ""
    assert request.readonly is True
    assert request.volume_capability.WhichOneof("access_type") == "mount"
    assert request.volume_capability.mount.fs_type == ""
    assert (
        request.volume_capability.access_mode.mode == csi_pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
    )
    assert dict(request.volume_context) == {
        names.VOLUME_MODEL_ATTRIBUTE: "tiny",
        names.KUBELET_POD_NAME: "web",
        names.KUBELET_POD_NAMESPACE: NAMESPACE,
        names.KUBELET_POD_UID: uid,
        names.KUBELET_SERVICE_ACCOUNT: "inference",
        names.KUBELET_EPHEMERAL: "true",
    }
    assert VOLUMES_FINALIZER in pod["metadata"]["finalizers"]
    [seen] = bed.kubelet.mounts(pod)
    assert (seen.container, seen.mount_path, seen.target, seen.read_only) == (
        "server",
        "/data/modelcache/models/tiny",
        target,
        True,
    )
    assert (seen.target / "config.json").read_text() == '{"model_type": "llama"}'
    with pytest.raises(OSError, match="Read-only file system") as refused:
        (seen.target / "written-by-the-pod").write_text("x")
    assert refused.value.errno == errno.EROFS
    assert bed.kubelet.failed_mounts(pod) == []


def test_a_failed_publish_is_retried_with_backoff_and_shown_as_kubelet_shows_it(bed: Bed) -> None:
    waiting = "downloading sha256:abc: 3.1 of 16.0 GiB"
    bed.plugin.publish_failures = [Answer(grpc.StatusCode.UNAVAILABLE, waiting)] * 3
    bed.create(csi_pod("web"))
    expected = f'MountVolume.SetUp failed for volume "model" : rpc error: code = Unavailable desc = {waiting}'

    eventually(lambda: bed.waiting_message("web") == expected, timeout=10, message="ContainerCreating shown")
    pod = bed.scheduler.wait_for_pod("web", NAMESPACE, timeout=30)

    times = [moment for moment, _ in bed.plugin.publishes]
    assert len(times) == 4
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    # 500 ms doubling (the test's cap is 2 s): 0.5, 1, 2.
    for gap, least in zip(gaps, (0.5, 1.0, 2.0), strict=True):
        assert gap >= least * 0.95, gaps
    assert gaps[2] < 2.0 + 1.5, gaps  # capped, not 4 s
    [event] = bed.kubelet.failed_mounts(pod)
    assert (event["type"], event["reason"], event["message"], event["count"]) == (
        "Warning",
        "FailedMount",
        expected,
        3,
    )
    assert event["source"] == {"component": "kubelet", "host": NODE}
    assert event["involvedObject"]["uid"] == pod["metadata"]["uid"]


def test_a_deleted_pod_stays_until_its_volume_is_unpublished_then_goes(bed: Bed) -> None:
    created = bed.create(csi_pod("web"))
    uid = created["metadata"]["uid"]
    pod = bed.scheduler.wait_for_pod("web", NAMESPACE)
    [seen] = bed.kubelet.mounts(pod)
    assert is_mount_point(seen.target)

    bed.server.stop()  # the plugin is away: the Pod must wait for it, not leave a mount behind
    bed.delete("web")
    eventually(
        lambda: (bed.pod("web") or {}).get("metadata", {}).get("deletionTimestamp"),
        timeout=10,
        message="the Pod marked for deletion and kept",
    )
    assert bed.pod("web") is not None
    bed.server.start()

    bed.kubelet.wait_torn_down(uid, timeout=20)
    eventually(lambda: bed.pod("web") is None, timeout=10, message="the Pod gone after its teardown")
    [request] = bed.plugin.unpublishes
    assert (request.volume_id, request.target_path) == (volume_handle(uid, "model"), str(seen.target))
    assert not is_mount_point(seen.target)
    assert not (bed.node.kubelet_dir / "pods" / uid).exists()


def test_after_a_final_error_kubelet_removes_the_target_and_never_unpublishes(bed: Bed) -> None:
    denied = 'namespace "default" has no Model "tiny"'
    bed.plugin.publish_failures = [Answer(grpc.StatusCode.PERMISSION_DENIED, denied)] * 100
    created = bed.create(csi_pod("web"))
    expected = (
        f'MountVolume.SetUp failed for volume "model" : rpc error: code = PermissionDenied desc = {denied}'
    )
    eventually(lambda: bed.waiting_message("web") == expected, timeout=10, message="the denial shown")
    pod = bed.pod("web")
    assert pod is not None
    assert not running(pod)
    assert [e["message"] for e in bed.kubelet.failed_mounts(pod)] == [expected]

    bed.delete("web")

    eventually(lambda: bed.pod("web") is None, timeout=10, message="the Pod gone")
    assert bed.plugin.unpublishes == []
    assert not (bed.node.kubelet_dir / "pods" / created["metadata"]["uid"]).exists()


def test_a_plugin_that_starts_late_is_reached_by_the_retries(bed: Bed) -> None:
    bed.server.stop()
    bed.create(csi_pod("web"))
    eventually(
        lambda: "code = Unavailable" in bed.waiting_message("web"),
        timeout=10,
        message="the unreachable plugin shown",
    )

    bed.server.start()

    bed.scheduler.wait_for_pod("web", NAMESPACE, timeout=20)


def test_volumes_of_a_driver_the_node_does_not_have_keep_the_pod_creating(bed: Bed) -> None:
    bed.create(csi_pod("other-driver", driver="other.example.com"))
    bed.create(csi_pod("other-node", node=OTHER_NODE))
    for name, driver in (("other-driver", "other.example.com"), ("other-node", DRIVER)):
        expected = (
            'MountVolume.SetUp failed for volume "model" : kubernetes.io/csi: mounter.SetUpAt failed to '
            f"get CSI client: driver name {driver} not found in the list of registered CSI drivers"
        )
        eventually(functools.partial(shows, bed, name, expected), timeout=10, message=f"{name} waiting")
    assert bed.plugin.publishes == []
    for name in ("other-driver", "other-node"):
        assert VOLUMES_FINALIZER not in ((bed.pod(name) or {}).get("metadata", {}).get("finalizers") or [])


def test_the_mount_check_passes_here_and_fails_saying_so_without_the_right_to_mount(tmp_path: Path) -> None:
    require_bind_mounts(tmp_path / "here")  # root, as in CI: the NodeCache tests can run
    assert not mount_points() & {p.absolute() for p in tmp_path.rglob("*")}

    # The same check in a process without CAP_SYS_ADMIN (a container without it, an unprivileged
    # user): it fails, naming the failed mount and what to do.
    code = (
        "import pathlib, sys\n"
        "from testbed.csi_kubelet import MountsNotPermitted, require_bind_mounts\n"
        "try:\n"
        f"    require_bind_mounts(pathlib.Path({str(tmp_path / 'there')!r}))\n"
        "except MountsNotPermitted as refused:\n"
        "    print(refused)\n"
        "    sys.exit(3)\n"
    )
    done = subprocess.run(
        ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert done.returncode == 3, done.stderr
    assert "mount --bind" in done.stdout
    assert "run the NodeCache tests and `make dev` in NodeCache mode as root" in done.stdout


def test_a_pod_runs_only_with_every_volume_and_its_uncertain_volume_is_unpublished_too(bed: Bed) -> None:
    full = "Model default/big needs 16.0 GiB but the node cache has 1.0 GiB available"
    bed.plugin.refused_volumes["big"] = Answer(grpc.StatusCode.RESOURCE_EXHAUSTED, full)
    body = csi_pod("web")
    body["spec"]["volumes"].append({"name": "big", "csi": {"driver": DRIVER, "readOnly": True}})
    body["spec"]["initContainers"] = [
        {
            "name": "warm",
            "image": "registry.example/inference:1",
            "volumeMounts": [{"name": "big", "mountPath": "/big"}],
        }
    ]
    created = bed.create(body)
    uid = created["metadata"]["uid"]
    expected = (
        f'MountVolume.SetUp failed for volume "big" : rpc error: code = ResourceExhausted desc = {full}'
    )

    eventually(lambda: bed.waiting_message("web") == expected, timeout=10, message="the full cache shown")
    eventually(
        lambda: bed.kubelet.published(uid) == {"model"}, timeout=10, message="the other volume published"
    )
    pod = bed.pod("web")
    assert pod is not None
    assert pod["status"]["phase"] == "Pending"
    assert [(m.container, m.volume) for m in bed.kubelet.mounts(pod)] == [
        ("warm", "big"),
        ("server", "model"),
    ]

    bed.delete("web")

    eventually(lambda: bed.pod("web") is None, timeout=20, message="the Pod gone after its teardown")
    # ResourceExhausted is not final for kubelet: the volume may be mounted, so it is torn down too.
    assert sorted(Path(r.target_path).parent.name for r in bed.plugin.unpublishes) == ["big", "model"]
    assert not (bed.node.kubelet_dir / "pods" / uid).exists()
