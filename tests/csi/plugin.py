"""The node plugin's gRPC server in the test process, over a real unix socket, and kubelet's requests.

    plugin = start_plugin(socket_dir=..., kubelet_dir=..., cache=cache, models=reader, ready=cache.usable)
    request = kubelet_publish(plugin.kubelet_dir, pod=Pod("team-a", "web-0"), volume="model",
                              attributes={VOLUME_MODEL_ATTRIBUTE: "qwen", VOLUME_DIGEST_ATTRIBUTE: digest})
    plugin.node.NodePublishVolume(request, timeout=10)

The requests are the test bed kubelet's (`testbed.csi_kubelet`: volume handle, target path, volume
context with podInfoOnMount keys written over the attributes); the server is the process's own
(`nodecache.server.CsiServer` with the real Identity and Node services).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

import grpc

from ai_models.csi import csi_pb2, csi_pb2_grpc
from ai_models.nodecache.identity import IdentityService
from ai_models.nodecache.node import Cache, Models, NodeService
from ai_models.nodecache.server import CsiServer
from testbed.csi_kubelet import publish_context, target_path, volume_handle

NODE_NAME = "node-a"


@dataclasses.dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str = dataclasses.field(default_factory=lambda: str(uuid.uuid4()))


@dataclasses.dataclass
class RunningPlugin:
    server: CsiServer
    channel: grpc.Channel
    node: csi_pb2_grpc.NodeStub
    identity: csi_pb2_grpc.IdentityStub
    kubelet_dir: Path

    def close(self) -> None:
        self.channel.close()
        self.server.stop(grace=1.0)


def start_plugin(
    *,
    socket_dir: Path,
    kubelet_dir: Path,
    cache: Cache,
    models: Models,
    ready: Callable[[], bool],
    publish_wait_seconds: float = 1.0,
) -> RunningPlugin:
    """`socket_dir` must be short: a unix socket path has at most 107 characters."""
    endpoint = f"unix://{socket_dir / 'csi.sock'}"
    node = NodeService(
        node_name=NODE_NAME,
        kubelet_dir=kubelet_dir,
        cache=cache,
        models=models,
        publish_wait_seconds=publish_wait_seconds,
    )
    server = CsiServer(endpoint=endpoint, identity=IdentityService(ready=ready), node=node).start()
    channel = grpc.insecure_channel(endpoint)
    return RunningPlugin(
        server=server,
        channel=channel,
        node=csi_pb2_grpc.NodeStub(channel),
        identity=csi_pb2_grpc.IdentityStub(channel),
        kubelet_dir=kubelet_dir,
    )


def mount_capability() -> csi_pb2.VolumeCapability:
    """What kubelet sends for an inline volume: mount access, fsType "", ReadWriteOnce's mode."""
    return csi_pb2.VolumeCapability(
        mount=csi_pb2.VolumeCapability.MountVolume(fs_type=""),
        access_mode=csi_pb2.VolumeCapability.AccessMode(
            mode=csi_pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
        ),
    )


def kubelet_publish(
    kubelet_dir: Path, *, pod: Pod, volume: str, attributes: Mapping[str, str]
) -> csi_pb2.NodePublishVolumeRequest:
    """The NodePublishVolume kubelet sends for the inline volume `volume` of `pod` with these
    `volumeAttributes`; the target's parent directory is made as kubelet makes it."""
    target = target_path(kubelet_dir, pod.uid, volume)
    target.parent.mkdir(parents=True, exist_ok=True)
    manifest = {"metadata": {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid}, "spec": {}}
    return csi_pb2.NodePublishVolumeRequest(
        volume_id=volume_handle(pod.uid, volume),
        target_path=str(target),
        volume_capability=mount_capability(),
        readonly=True,
        volume_context=publish_context(manifest, {"volumeAttributes": dict(attributes)}),
    )


def unpublish_of(request: csi_pb2.NodePublishVolumeRequest) -> csi_pb2.NodeUnpublishVolumeRequest:
    return csi_pb2.NodeUnpublishVolumeRequest(volume_id=request.volume_id, target_path=request.target_path)
