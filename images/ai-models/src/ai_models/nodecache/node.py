"""The CSI Node service: publish a verified cached tree read-only into a pod, take it away again.

NodePublishVolume, in order (D104, D105):

1. The request is checked: volume id, target path under `<kubelet dir>/pods/`, a mount (not block)
   capability. Anything else is INVALID_ARGUMENT.
2. Authorization from kubelet's keys (`authorize`): the pod's namespace must hold the Model (or the
   name is a ClusterModel), Ready, publishing the requested digest; else PERMISSION_DENIED. A Model
   that cannot be read now is UNAVAILABLE.
3. The cache is asked (`wait`, bounded by the publish wait and by the call's own deadline). It never
   downloads in this call: it starts or joins the download in the background. Still downloading,
   or the last download failed: UNAVAILABLE, whose message says what it waits for (kubelet retries
   with its backoff). Does not fit the cache even after eviction: RESOURCE_EXHAUSTED.
4. Ready: the target's reference is recorded on disk (`hold`), then the tree is bind-mounted and
   remounted `ro,nosuid,nodev`. A target already showing that tree read-only is left as it is (the
   call is idempotent); a leftover writable mount or another tree's is unmounted and redone.

NodeUnpublishVolume needs only the target: whatever is mounted there is unmounted, the directory is
removed and the reference dropped, also for a target this process never mounted (kubelet also
unpublishes mounts it is unsure of, and a restarted plugin keeps no memory but the cache's records).
Calls for one target run one at a time; a second call while one is in progress is ABORTED, as the
CSI specification asks.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Final, NoReturn, Protocol, assert_never

import grpc

from ai_models.csi import csi_pb2, csi_pb2_grpc
from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.models.reference import ModelKey
from ai_models.nodecache.authorize import Grant, Refusal, Refused, authorize, kubelet_pod, wanted_model
from ai_models.nodecache.cache import CacheRequest, CacheState, Failed, Ready, Unfit, Waiting
from ai_models.nodecache.models import ModelsUnreadable
from ai_models.nodecache.mounts import MountError, bind_read_only, mount_at, same_tree, unmount
from ai_models.nodecache.settings import NodeCacheSettings

log = logging.getLogger(__name__)

MAX_VOLUME_ID: Final = 1024
MAX_PATH: Final = 4096
# A call for a target another call holds waits this long before it is ABORTED.
TARGET_LOCK_SECONDS: Final = 2.0
# What the call keeps of its deadline for the mount and the answer after the cache's wait.
ANSWER_MARGIN_SECONDS: Final = 2.0
_READ_ONLY_OPTIONS: Final = frozenset({"ro", "nosuid", "nodev"})


class Cache(Protocol):
    """What the Node service asks of the node cache (`nodecache.cache.NodeCache`)."""

    def wait(self, request: CacheRequest, *, timeout: float) -> CacheState: ...
    def hold(self, *, target: str, digest: str, pod_uid: str) -> None: ...
    def release(self, *, target: str) -> None: ...


class Models(Protocol):
    def seen(self, key: ModelKey) -> ModelSeen: ...


class _TargetLocks:
    """One lock per target path, kept only while a call uses it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def held(self, target: str, *, timeout: float) -> Iterator[bool]:
        with self._guard:
            lock, users = self._locks.get(target, (threading.Lock(), 0))
            self._locks[target] = (lock, users + 1)
        acquired = lock.acquire(timeout=timeout)
        try:
            yield acquired
        finally:
            if acquired:
                lock.release()
            with self._guard:
                lock, users = self._locks[target]
                if users == 1:
                    del self._locks[target]
                else:
                    self._locks[target] = (lock, users - 1)


class NodeService(csi_pb2_grpc.NodeServicer):
    def __init__(
        self,
        *,
        node_name: str,
        kubelet_dir: Path,
        cache: Cache,
        models: Models,
        publish_wait_seconds: float,
    ) -> None:
        self._node_name = node_name
        self._pods_dir = os.path.normpath(str(kubelet_dir / "pods"))
        self._cache = cache
        self._models = models
        self._publish_wait = publish_wait_seconds
        self._locks = _TargetLocks()

    # ----- NodePublishVolume -------------------------------------------------------------------

    def NodePublishVolume(  # noqa: N802  (the CSI method name)
        self, request: csi_pb2.NodePublishVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodePublishVolumeResponse:
        self._check_volume_id(request.volume_id, context)
        target = self._checked_target(request.target_path, context)
        if not request.HasField("volume_capability"):
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "volume_capability is required")
        capability = request.volume_capability
        if capability.HasField("block"):
            _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                "block access is not supported: the volume is a read-only directory of model files",
            )
        if not capability.HasField("mount"):
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "volume_capability needs the mount access type")
        grant = self._granted(request.volume_context, context)
        with self._locks.held(target, timeout=TARGET_LOCK_SECONDS) as acquired:
            if not acquired:
                _abort(context, grpc.StatusCode.ABORTED, f"another operation on {target} is in progress")
            tree = self._ready_tree(grant, context)
            self._publish(grant, tree, Path(target), context)
        return csi_pb2.NodePublishVolumeResponse()

    def _granted(self, volume_context: Mapping[str, str], context: grpc.ServicerContext) -> Grant:
        attributes = dict(volume_context)
        try:
            pod = kubelet_pod(attributes)
            wanted = wanted_model(attributes, namespace=pod.namespace, pod=pod.describe())
            return authorize(pod=pod, wanted=wanted, seen=self._models.seen(wanted.key))
        except Refused as refused:
            log.warning(
                "NodePublishVolume refused",
                extra={"code": refused.code.value, "reason": refused.message, "node": self._node_name},
            )
            code = (
                grpc.StatusCode.INVALID_ARGUMENT
                if refused.code is Refusal.INVALID_ARGUMENT
                else grpc.StatusCode.PERMISSION_DENIED
            )
            _abort(context, code, refused.message)
        except ModelsUnreadable as error:
            _abort(context, grpc.StatusCode.UNAVAILABLE, str(error))

    def _ready_tree(self, grant: Grant, context: grpc.ServicerContext) -> Path:
        remaining = context.time_remaining()
        budget = self._publish_wait
        if remaining is not None:
            budget = max(0.0, min(budget, remaining - ANSWER_MARGIN_SECONDS))
        state = self._cache.wait(CacheRequest(ref=grant.key, digest=grant.digest), timeout=budget)
        match state:
            case Ready(tree=tree):
                return tree
            case Waiting(message=message):
                _abort(
                    context,
                    grpc.StatusCode.UNAVAILABLE,
                    f"{_who(grant, message)}: {message}; the mount is retried",
                )
            case Failed(message=message):
                _abort(context, grpc.StatusCode.UNAVAILABLE, f"{_who(grant, message)}: {message}")
            case Unfit(message=message):
                _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, f"{_who(grant, message)}: {message}")
        assert_never(state)

    def _publish(self, grant: Grant, tree: Path, target: Path, context: grpc.ServicerContext) -> None:
        mounted_at = self._resolved(target, context)
        current = mount_at(mounted_at)
        if current is not None:
            if current.options >= _READ_ONLY_OPTIONS and same_tree(mounted_at, tree):
                # Published already (a kubelet retry, or a restarted plugin): keep the reference fresh.
                self._cache.hold(target=str(target), digest=grant.digest, pod_uid=grant.pod.uid)
                return
            log.warning(
                "a target with another mount is unmounted before it is published",
                extra={"target": str(target), "options": sorted(current.options)},
            )
            self._unmount(mounted_at, context)
        try:
            mounted_at.mkdir(mode=0o750, parents=True, exist_ok=True)
        except OSError as error:
            _abort(context, grpc.StatusCode.INTERNAL, f"cannot create the target {target}: {error.strerror}")
        # The reference is on disk before the mount: eviction never takes a tree that is being mounted.
        self._cache.hold(target=str(target), digest=grant.digest, pod_uid=grant.pod.uid)
        try:
            bind_read_only(tree, mounted_at)
        except MountError as error:
            self._cache.release(target=str(target))
            _abort(context, grpc.StatusCode.INTERNAL, f"{grant.pod.describe()}: {error.strerror}")
        log.info(
            "volume published",
            extra={
                "pod": f"{grant.pod.namespace}/{grant.pod.name}",
                "model": grant.key.describe(),
                "digest": grant.digest,
                "target": str(target),
            },
        )

    def _resolved(self, target: Path, context: grpc.ServicerContext) -> Path:
        """The target as /proc/self/mountinfo names its mount: symbolic links resolved (the kubelet
        directory itself may be one), and still inside kubelet's pods directory."""
        resolved = os.path.realpath(target)
        if not resolved.startswith(os.path.realpath(self._pods_dir) + os.sep):
            _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"target_path {str(target)!r} leads out of kubelet's pods directory through a symbolic link",
            )
        return Path(resolved)

    @staticmethod
    def _unmount(target: Path, context: grpc.ServicerContext) -> None:
        try:
            unmount(target)
        except MountError as error:
            _abort(context, grpc.StatusCode.INTERNAL, error.strerror or str(error))

    # ----- NodeUnpublishVolume -----------------------------------------------------------------

    def NodeUnpublishVolume(  # noqa: N802  (the CSI method name)
        self, request: csi_pb2.NodeUnpublishVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodeUnpublishVolumeResponse:
        self._check_volume_id(request.volume_id, context)
        target = self._checked_target(request.target_path, context)
        with self._locks.held(target, timeout=TARGET_LOCK_SECONDS) as acquired:
            if not acquired:
                _abort(context, grpc.StatusCode.ABORTED, f"another operation on {target} is in progress")
            path = self._resolved(Path(target), context)
            self._unmount(path, context)
            try:
                path.rmdir()
            except FileNotFoundError:
                pass  # never published, or removed by an earlier call: unpublished all the same
            except OSError as error:
                reason = (
                    "it holds files the plugin did not put there" if error.errno == errno.ENOTEMPTY else ""
                )
                _abort(
                    context,
                    grpc.StatusCode.INTERNAL,
                    f"cannot remove the target {target}: {error.strerror}{'; ' + reason if reason else ''}",
                )
            self._cache.release(target=target)
        log.info("volume unpublished", extra={"target": target})
        return csi_pb2.NodeUnpublishVolumeResponse()

    # ----- The rest ----------------------------------------------------------------------------

    def NodeGetCapabilities(  # noqa: N802  (the CSI method name)
        self, request: csi_pb2.NodeGetCapabilitiesRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodeGetCapabilitiesResponse:
        # No staging (nothing is shared between a node's pods but the cache itself), no stats or
        # expansion of a read-only tree: kubelet calls only NodePublish and NodeUnpublish.
        return csi_pb2.NodeGetCapabilitiesResponse()

    def NodeGetInfo(  # noqa: N802  (the CSI method name)
        self, request: csi_pb2.NodeGetInfoRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodeGetInfoResponse:
        # 0: no limit on volumes per node; no topology (placement is the readiness label's job).
        return csi_pb2.NodeGetInfoResponse(node_id=self._node_name, max_volumes_per_node=0)

    # ----- Checks ------------------------------------------------------------------------------

    @staticmethod
    def _check_volume_id(volume_id: str, context: grpc.ServicerContext) -> None:
        if not volume_id:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "volume_id is required")
        if len(volume_id) > MAX_VOLUME_ID:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"volume_id is longer than {MAX_VOLUME_ID}")

    def _checked_target(self, target: str, context: grpc.ServicerContext) -> str:
        if not target:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "target_path is required")
        if len(target) > MAX_PATH or "\0" in target:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "target_path is not a usable path")
        if not os.path.isabs(target) or os.path.normpath(target) != target:
            _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"target_path {target!r} is not a normalized absolute path",
            )
        if not target.startswith(self._pods_dir + os.sep):
            _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"target_path {target!r} is not under kubelet's pods directory {self._pods_dir}; "
                f"set {NodeCacheSettings.variable('node_cache_kubelet_dir')} to the node's kubelet directory",
            )
        return target


def _who(grant: Grant, message: str) -> str:
    """The pod, and the model and digest unless the cache's message names them already."""
    if grant.key.describe() in message:
        return grant.pod.describe()
    return f"{grant.pod.describe()}, {grant.key.describe()} ({grant.digest})"


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    context.abort(code, message)
    raise AssertionError("grpc's abort returned")  # it raises; this keeps the type checker honest
