"""The node plugin's CSI contract over a real unix socket: every call and error path, with real
peers behind it (the API emulator for Models, the real serving API and NodeCache for the files, real
read-only bind mounts as root)."""

from __future__ import annotations

import dataclasses
import errno
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import grpc
import pytest

from ai_models import __version__
from ai_models.csi import csi_pb2
from ai_models.domain.delivery.claim_layout import object_dir
from ai_models.domain.delivery.node_cache import reference_record
from ai_models.names import (
    KUBELET_POD_NAMESPACE,
    KUBELET_POD_UID,
    VOLUME_CLUSTER_MODEL_ATTRIBUTE,
    VOLUME_DIGEST_ATTRIBUTE,
    VOLUME_MODEL_ATTRIBUTE,
)
from ai_models.nodecache import mounts
from ai_models.nodecache.cache import CacheRequest, NodeCache
from ai_models.nodecache.models import NodeModels
from ai_models.nodecache.mounts import mount_at, parse_mountinfo, unmount
from csi.plugin import NODE_NAME, Pod, RunningPlugin, kubelet_publish, start_plugin, unpublish_of
from kubeemu.authn import Identity
from support.node_cache_stack import CacheStack, cache_stack_fixture  # noqa: F401  (fixture)

MIB = 1024 * 1024
FILES = {"config.json": b'{"model_type": "llama"}', "weights/model.safetensors": bytes(range(256)) * 4096 * 3}
TEAM_A = Pod("team-a", "web-0")


@dataclasses.dataclass
class Bed:
    """The plugin as the DaemonSet runs it, on one node, and what it stands on."""

    stack: CacheStack
    kubelet_dir: Path
    socket_dir: Path
    reader: NodeModels
    cache: NodeCache
    plugin: RunningPlugin
    llama: CacheRequest

    def restart(self, *, publish_wait_seconds: float = 1.0, **cache_overrides: object) -> None:
        """The plugin process ends and a new one starts over the same cache root and socket."""
        self.plugin.close()
        self.cache.close()
        self.cache = self.stack.cache(**cache_overrides)
        self.plugin = serve(self, publish_wait_seconds=publish_wait_seconds)

    def attributes(self, request: CacheRequest | None = None) -> dict[str, str]:
        request = request or self.llama
        return {VOLUME_MODEL_ATTRIBUTE: request.ref.name, VOLUME_DIGEST_ATTRIBUTE: request.digest}

    def publish(
        self, pod: Pod = TEAM_A, *, volume: str = "model", attributes: dict[str, str] | None = None
    ) -> csi_pb2.NodePublishVolumeRequest:
        request = kubelet_publish(
            self.kubelet_dir, pod=pod, volume=volume, attributes=attributes or self.attributes()
        )
        self.plugin.node.NodePublishVolume(request, timeout=30)
        return request

    def tree(self, request: CacheRequest | None = None) -> Path:
        return self.stack.root / object_dir((request or self.llama).digest)


@pytest.fixture
def bed(cache_stack: CacheStack, tmp_path: Path) -> Iterator[Bed]:
    kubelet_dir = tmp_path / "kubelet"
    socket_dir = Path(tempfile.mkdtemp(prefix="csi-", dir="/tmp"))
    llama = cache_stack.publish("llama", FILES)
    # The plugin reads Models as its ServiceAccount, with the RBAC the chart renders for it.
    reader = NodeModels.of_cluster(cache_stack.emulator.api_client(cache_stack.plugin))
    cache = cache_stack.cache()
    plugin = start_plugin(
        socket_dir=socket_dir, kubelet_dir=kubelet_dir, cache=cache, models=reader, ready=cache.usable
    )
    bed = Bed(cache_stack, kubelet_dir, socket_dir, reader, cache, plugin, llama)
    try:
        yield bed
    finally:
        bed.plugin.close()
        for mount in parse_mountinfo(Path("/proc/self/mountinfo").read_text()):
            if mount.mount_point.startswith(str(kubelet_dir)):
                unmount(Path(mount.mount_point))
        shutil.rmtree(socket_dir, ignore_errors=True)


def serve(bed: Bed, *, publish_wait_seconds: float = 1.0) -> RunningPlugin:
    return start_plugin(
        socket_dir=bed.socket_dir,
        kubelet_dir=bed.kubelet_dir,
        cache=bed.cache,
        models=bed.reader,
        ready=bed.cache.usable,
        publish_wait_seconds=publish_wait_seconds,
    )


def mounts_at(target: Path | str) -> list[mounts.MountPoint]:
    return [
        m for m in parse_mountinfo(Path("/proc/self/mountinfo").read_text()) if m.mount_point == str(target)
    ]


def namespace(bed: Bed, name: str) -> None:
    bed.stack.emulator.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def refusal(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value


# A failed call's error is also its grpc.Call (code, details); grpc-stubs types them apart.
def code_of(error: grpc.RpcError) -> grpc.StatusCode:
    return cast(grpc.Call, error).code()


def details_of(error: grpc.RpcError) -> str:
    return cast(grpc.Call, error).details() or ""


# ----- Identity and node information ---------------------------------------------------------------


def test_identity_names_the_driver_and_has_no_controller(bed: Bed) -> None:
    info = bed.plugin.identity.GetPluginInfo(csi_pb2.GetPluginInfoRequest(), timeout=5)
    assert info.name == "node-cache.ai-models.deckhouse.io"
    assert info.vendor_version == __version__
    capabilities = bed.plugin.identity.GetPluginCapabilities(
        csi_pb2.GetPluginCapabilitiesRequest(), timeout=5
    )
    assert list(capabilities.capabilities) == []
    probe = bed.plugin.identity.Probe(csi_pb2.ProbeRequest(), timeout=5)
    assert probe.HasField("ready")
    assert probe.ready.value


def test_node_info_is_the_node_name_without_a_volume_limit(bed: Bed) -> None:
    info = bed.plugin.node.NodeGetInfo(csi_pb2.NodeGetInfoRequest(), timeout=5)
    assert info.node_id == NODE_NAME
    assert info.max_volumes_per_node == 0
    capabilities = bed.plugin.node.NodeGetCapabilities(csi_pb2.NodeGetCapabilitiesRequest(), timeout=5)
    assert list(capabilities.capabilities) == []  # no staging: kubelet calls publish and unpublish only


def test_calls_the_plugin_does_not_serve_are_unimplemented(bed: Bed) -> None:
    error = refusal(
        lambda: bed.plugin.node.NodeStageVolume(csi_pb2.NodeStageVolumeRequest(volume_id="v"), timeout=5)
    )
    assert code_of(error) is grpc.StatusCode.UNIMPLEMENTED


# ----- NodePublishVolume: requests kubelet would not send -------------------------------------------


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda request: request.ClearField("volume_id"), "volume_id is required"),
        (lambda request: request.ClearField("target_path"), "target_path is required"),
        (lambda request: request.ClearField("volume_capability"), "volume_capability is required"),
        (
            lambda request: request.volume_capability.CopyFrom(
                csi_pb2.VolumeCapability(block=csi_pb2.VolumeCapability.BlockVolume())
            ),
            "block access is not supported",
        ),
        (
            lambda request: setattr(request, "target_path", "/etc/cron.d/mount"),
            "not under kubelet's pods directory",
        ),
        (
            lambda request: setattr(request, "target_path", request.target_path + "/../../../../../../etc"),
            "not a normalized absolute path",
        ),
        (lambda request: request.volume_context.pop(KUBELET_POD_UID), "podInfoOnMount"),
    ],
    ids=["no-volume-id", "no-target", "no-capability", "block", "outside-kubelet", "dot-dot", "no-pod-uid"],
)
def test_a_malformed_publish_is_an_invalid_argument(
    bed: Bed, change: Callable[[csi_pb2.NodePublishVolumeRequest], object], says: str
) -> None:
    request = kubelet_publish(bed.kubelet_dir, pod=TEAM_A, volume="model", attributes=bed.attributes())
    change(request)
    error = refusal(lambda: bed.plugin.node.NodePublishVolume(request, timeout=10))
    assert code_of(error) is grpc.StatusCode.INVALID_ARGUMENT
    assert says in details_of(error)
    assert bed.stack.store.files_read() == 0  # refused before anything was fetched


# ----- NodePublishVolume: authorization (D105) ------------------------------------------------------


def test_a_pod_in_a_namespace_without_the_model_is_denied_even_with_hand_written_attributes(bed: Bed) -> None:
    # The attributes name team-a's Model and even a pod namespace; kubelet writes the real one over it.
    stranger = Pod("team-b", "thief-0")
    namespace(bed, "team-b")
    attributes = {**bed.attributes(), KUBELET_POD_NAMESPACE: "team-a", "namespace": "team-a"}
    error = refusal(lambda: bed.publish(stranger, attributes=attributes))
    assert code_of(error) is grpc.StatusCode.PERMISSION_DENIED
    assert details_of(error).startswith("pod team-b/thief-0: namespace team-b has no Model llama")
    assert bed.stack.store.files_read() == 0


def test_a_digest_the_model_does_not_publish_is_denied(bed: Bed) -> None:
    other = "sha256:" + "0" * 64
    error = refusal(lambda: bed.publish(attributes={**bed.attributes(), VOLUME_DIGEST_ATTRIBUTE: other}))
    assert code_of(error) is grpc.StatusCode.PERMISSION_DENIED
    assert f"Model team-a/llama publishes {bed.llama.digest}, the volume asks for {other}" in details_of(
        error
    )


def test_a_cluster_model_is_served_to_any_namespace(bed: Bed) -> None:
    shared = bed.stack.publish("shared", {"w.bin": b"weights"}, namespace=None)
    attributes = {VOLUME_CLUSTER_MODEL_ATTRIBUTE: "shared", VOLUME_DIGEST_ATTRIBUTE: shared.digest}
    namespace(bed, "team-c")
    request = bed.publish(Pod("team-c", "web-0"), attributes=attributes)
    assert (Path(request.target_path) / "w.bin").read_bytes() == b"weights"


def test_a_plugin_that_may_not_read_models_answers_unavailable_naming_its_rbac(bed: Bed) -> None:
    nobody = bed.stack.emulator.add_identity(
        Identity(name="system:serviceaccount:d8-ai-models:nobody", token="t-no")
    )
    bed.reader = NodeModels.of_cluster(bed.stack.emulator.api_client(nobody))
    bed.restart()
    error = refusal(bed.publish)
    assert code_of(error) is grpc.StatusCode.UNAVAILABLE
    assert "the API server answered 403" in details_of(error)
    assert "get on models and clustermodels" in details_of(error)


# ----- NodePublishVolume: the cache (D104) ----------------------------------------------------------


def test_a_model_not_yet_cached_is_unavailable_saying_what_it_waits_for_then_published(bed: Bed) -> None:
    bed.stack.store.pause("weights/model.safetensors", at=MIB)
    error = refusal(bed.publish)
    assert code_of(error) is grpc.StatusCode.UNAVAILABLE
    details = details_of(error)
    assert details.startswith("pod team-a/web-0: downloading Model team-a/llama")
    assert bed.llama.digest in details
    assert details.endswith("the mount is retried")
    assert bed.stack.store.paused.wait(timeout=30)
    assert (
        mount_at(
            Path(kubelet_publish(bed.kubelet_dir, pod=TEAM_A, volume="model", attributes={}).target_path)
        )
        is None
    )
    # kubelet retries; the download went on in the background meanwhile.
    bed.stack.store.release()
    request = bed.publish()
    assert (Path(request.target_path) / "config.json").read_bytes() == FILES["config.json"]
    assert bed.stack.store.files_read() == sum(len(content) for content in FILES.values())


def test_a_failed_download_is_unavailable_with_its_cause(bed: Bed) -> None:
    bed.stack.token_file.write_text("not-a-token")
    error = refusal(bed.publish)
    assert code_of(error) is grpc.StatusCode.UNAVAILABLE
    assert "ServiceAccount token was not accepted" in details_of(error)


def test_a_model_larger_than_the_cache_is_resource_exhausted(bed: Bed) -> None:
    bed.restart(limit_bytes=MIB // 2, publish_wait_seconds=10)
    error = refusal(bed.publish)
    assert code_of(error) is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert details_of(error).startswith("pod team-a/web-0")
    assert "Model team-a/llama" in details_of(error)


# ----- NodePublishVolume: the mount ------------------------------------------------------------------


def test_a_published_volume_is_the_verified_tree_read_only_with_its_reference_on_disk(bed: Bed) -> None:
    request = bed.publish()
    target = Path(request.target_path)
    assert (target / "weights/model.safetensors").read_bytes() == FILES["weights/model.safetensors"]
    mount = mount_at(target)
    assert mount is not None
    assert {"ro", "nosuid", "nodev"} <= mount.options
    with pytest.raises(OSError, match="Read-only file system") as raised:
        (target / "config.json").write_bytes(b"changed")
    assert raised.value.errno == errno.EROFS
    assert (bed.stack.root / reference_record(str(target))).is_file()


def test_publish_is_idempotent_per_target(bed: Bed) -> None:
    first = bed.publish()
    bed.plugin.node.NodePublishVolume(first, timeout=30)
    mounted = mounts_at(first.target_path)
    assert len(mounted) == 1


def test_a_writable_leftover_mount_is_replaced_by_the_read_only_tree(bed: Bed, tmp_path: Path) -> None:
    request = kubelet_publish(bed.kubelet_dir, pod=TEAM_A, volume="model", attributes=bed.attributes())
    target = Path(request.target_path)
    target.mkdir()
    leftover = tmp_path / "leftover"
    leftover.mkdir()
    (leftover / "planted").write_text("not the model")
    # A writable bind (what a broken earlier publish could leave): bind without the read-only remount.
    mounts._mount(leftover, target, mounts.MS_BIND, what="bind mount")
    bed.plugin.node.NodePublishVolume(request, timeout=30)
    assert not (target / "planted").exists()
    assert (target / "config.json").read_bytes() == FILES["config.json"]
    mounted = mounts_at(target)
    assert len(mounted) == 1
    assert mounted[0].read_only


def test_a_second_call_on_a_target_in_progress_is_aborted(bed: Bed) -> None:
    bed.plugin.close()
    bed.plugin = serve(bed, publish_wait_seconds=20)
    bed.stack.store.pause("weights/model.safetensors", at=MIB)
    request = kubelet_publish(bed.kubelet_dir, pod=TEAM_A, volume="model", attributes=bed.attributes())
    published = threading.Event()

    def first_call() -> None:
        bed.plugin.node.NodePublishVolume(request, timeout=30)
        published.set()

    waiting = threading.Thread(target=first_call)
    waiting.start()
    try:
        # The first call waits on the download (within the publish wait), holding the target.
        assert bed.stack.store.paused.wait(timeout=30)
        error = refusal(lambda: bed.plugin.node.NodeUnpublishVolume(unpublish_of(request), timeout=30))
        assert code_of(error) is grpc.StatusCode.ABORTED
        assert "in progress" in details_of(error)
    finally:
        bed.stack.store.release()
        waiting.join(timeout=30)
    # The download ended within its wait: the same call mounted it.
    assert published.is_set()
    assert (Path(request.target_path) / "config.json").read_bytes() == FILES["config.json"]


def test_a_kubelet_directory_behind_a_symbolic_link_is_served(bed: Bed) -> None:
    # Some distributions link /var/lib/kubelet elsewhere; mountinfo names the resolved path.
    real = bed.kubelet_dir / "real"
    real.mkdir(parents=True)
    linked = bed.kubelet_dir.parent / "linked-kubelet"
    linked.symlink_to(real)
    bed.kubelet_dir = linked
    bed.plugin.close()
    bed.plugin = serve(bed)
    request = bed.publish()
    resolved = real / Path(request.target_path).relative_to(linked)
    assert len(mounts_at(resolved)) == 1
    bed.plugin.node.NodePublishVolume(request, timeout=30)  # idempotent through the link too
    assert len(mounts_at(resolved)) == 1
    bed.plugin.node.NodeUnpublishVolume(unpublish_of(request), timeout=10)
    assert mounts_at(resolved) == []
    assert not resolved.exists()


def test_a_target_leading_out_of_the_pods_directory_through_a_link_is_refused(
    bed: Bed, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    request = kubelet_publish(bed.kubelet_dir, pod=TEAM_A, volume="model", attributes=bed.attributes())
    Path(request.target_path).parent.rmdir()
    Path(request.target_path).parent.symlink_to(outside)
    error = refusal(lambda: bed.plugin.node.NodePublishVolume(request, timeout=30))
    assert code_of(error) is grpc.StatusCode.INVALID_ARGUMENT
    assert "leads out of kubelet's pods directory" in details_of(error)
    assert list(outside.iterdir()) == []


# ----- NodeUnpublishVolume --------------------------------------------------------------------------


def test_unpublish_unmounts_removes_the_target_and_drops_the_reference(bed: Bed) -> None:
    request = bed.publish()
    target = Path(request.target_path)
    bed.plugin.node.NodeUnpublishVolume(unpublish_of(request), timeout=10)
    assert mount_at(target) is None
    assert not target.exists()
    assert not (bed.stack.root / reference_record(str(target))).exists()
    assert (bed.tree() / "config.json").is_file()  # the cache keeps the tree for the next pod


def test_unpublish_of_a_target_never_published_succeeds(bed: Bed) -> None:
    never = kubelet_publish(bed.kubelet_dir, pod=Pod("team-a", "web-1"), volume="model", attributes={})
    bed.plugin.node.NodeUnpublishVolume(unpublish_of(never), timeout=10)  # no directory at all
    Path(never.target_path).mkdir()
    bed.plugin.node.NodeUnpublishVolume(unpublish_of(never), timeout=10)  # an empty directory
    assert not Path(never.target_path).exists()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda request: request.ClearField("volume_id"), "volume_id is required"),
        (lambda request: request.ClearField("target_path"), "target_path is required"),
        (
            lambda request: setattr(request, "target_path", "/var/lib/docker"),
            "not under kubelet's pods directory",
        ),
    ],
    ids=["no-volume-id", "no-target", "outside-kubelet"],
)
def test_a_malformed_unpublish_is_an_invalid_argument(
    bed: Bed, change: Callable[[csi_pb2.NodeUnpublishVolumeRequest], object], says: str
) -> None:
    request = unpublish_of(kubelet_publish(bed.kubelet_dir, pod=TEAM_A, volume="model", attributes={}))
    change(request)
    error = refusal(lambda: bed.plugin.node.NodeUnpublishVolume(request, timeout=10))
    assert code_of(error) is grpc.StatusCode.INVALID_ARGUMENT
    assert says in details_of(error)


def test_a_restarted_plugin_keeps_running_mounts_and_unpublishes_them_later(bed: Bed) -> None:
    request = bed.publish()
    target = Path(request.target_path)
    bed.restart()
    # The mount needs no process: the pod keeps reading while the plugin is away and back.
    assert (target / "config.json").read_bytes() == FILES["config.json"]
    bed.plugin.node.NodePublishVolume(request, timeout=30)  # kubelet's periodic re-publish: a no-op
    assert len(mounts_at(target)) == 1
    bed.plugin.node.NodeUnpublishVolume(unpublish_of(request), timeout=10)
    assert mount_at(target) is None
    assert not target.exists()
    assert not (bed.stack.root / reference_record(str(target))).exists()


def test_the_probe_is_not_ready_once_the_cache_is_closed(bed: Bed) -> None:
    bed.cache.close()
    probe = bed.plugin.identity.Probe(csi_pb2.ProbeRequest(), timeout=5)
    assert probe.HasField("ready")
    assert not probe.ready.value
