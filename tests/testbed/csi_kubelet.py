"""The kubelet's CSI volume manager for the test bed's nodes: ephemeral inline volumes of the drivers
it is given, set up and torn down over each node's plugin socket, as kubelet does it.

kubeemu stores Pods; `testbed.scheduler` binds them and reports them Running. For a Pod bound to one
of `nodes` whose volumes name a CSI driver of `drivers` (`spec.volumes[].csi.driver`), `CsiKubelet`
plays kubelet's part in between (kubernetes `pkg/volume/csi`, csi_mounter.go SetUpAt/TearDownAt):

- the node's kubelet directory is `CsiNode.kubelet_dir` (`<workdir>/<node>/kubelet`); a volume's
  target is `<kubelet dir>/pods/<pod uid>/volumes/kubernetes.io~csi/<volume name>/mount`; kubelet
  creates its parent (with `vol_data.json`, the record it reads at teardown) and the plugin the target;
- `csi.v1.Node/NodePublishVolume` on the node's socket with what kubelet sends for an ephemeral
  inline volume: `volume_id` = `csi-` + hex sha256 of pod uid + volume name (makeVolumeHandle), no
  staging path, a mount capability with the volume's `fsType` (default "") and access mode
  SINGLE_NODE_WRITER (kubelet's ReadWriteOnce default for inline volumes), `readonly` from the
  volume, `volume_context` = its `volumeAttributes` with the pod information of `podInfoOnMount`
  (`csi.storage.k8s.io/pod.name`, `pod.namespace`, `pod.uid`, `serviceAccount.name`) and
  `csi.storage.k8s.io/ephemeral: "true"` written over whatever the Pod's author put under those keys;
  each call has kubelet's 120 s deadline;
- a failed call is retried per volume with kubelet's exponential backoff (500 ms doubling, capped at
  2 min 2 s; `retry_cap` lets a test shorten the cap) and reported as kubelet's Warning Event
  `FailedMount` on the Pod, `MountVolume.SetUp failed for volume "<name>" : rpc error: code = <Code>
  desc = <message>` (an identical repeat counts up the same Event, as kubelet's recorder does); the
  Pod stays Pending with its containers waiting `ContainerCreating` (the scheduler's kubelet writes
  that status; `pending_message` tells it why) until every such volume is published;
- teardown: kubelet keeps a Pod object until its volumes are torn down (a Pod is removed only once its
  resources are reclaimed); kubeemu removes a Pod at once, so this kubelet puts a finalizer on every
  Pod it sets volumes up for and takes it off after `NodeUnpublishVolume` of each volume that is
  published or whose last SetUp failed with a non-final code (kubelet's "uncertain" mounts:
  Unavailable, ResourceExhausted, DeadlineExceeded, Aborted, Canceled); after a final code kubelet
  removes the target directory and never unpublishes. Unpublish failures are retried the same way.
- Pods with volumes of a CSI driver this kubelet does not have on the Pod's node stay
  ContainerCreating with kubelet's "driver name ... not found in the list of registered CSI drivers".

Deliberately not emulated: the plugin registration handshake (the socket path is configured, not
registered), persistent CSI volumes and staging, `tokenRequests`, fsGroup, SELinux mount options,
kubelet restarts (its state lives in this object), and the reconstruction of volumes from disk.
The plugin does the real mounts (as root); this kubelet never mounts anything.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import hashlib
import json
import re
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc

from ai_models import names
from ai_models.csi import csi_pb2, csi_pb2_grpc
from ai_models.nodecache.server import MAX_SOCKET_PATH_BYTES
from kubeemu.clock import rfc3339
from kubeemu.store import WatchEvent
from testbed.jobrunner import Emulator
from testbed.reactor import StoreReactor, key_of, meta
from testbed.scheduler import unregistered_driver_message

# kubelet's volume operation backoff (nestedpendingoperations: initialDurationBeforeRetry and
# maxDurationBeforeRetry) and its NodePublish/NodeUnpublish deadline (csiTimeout).
RETRY_INITIAL_SECONDS = 0.5
RETRY_CAP_SECONDS = 122.0
CALL_TIMEOUT_SECONDS = 120.0
# What this kubelet holds a Pod object with until its volumes are torn down (see the docstring).
VOLUMES_FINALIZER = "testbed.kubelet/csi-volumes"
CSI_PLUGIN_DIR = "kubernetes.io~csi"
# Codes after which kubelet considers the volume possibly mounted (csi_mounter isFinalError).
UNCERTAIN_CODES = frozenset(
    {
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
    }
)
# A plugin socket must live under a short path: the plugin refuses a longer one.
MAX_SOCKET_PATH = MAX_SOCKET_PATH_BYTES
_CHANNEL_OPTIONS = [
    # A restarted plugin is reached at once; grpc's default reconnect backoff grows to 2 minutes.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


@dataclasses.dataclass(frozen=True)
class CsiNode:
    """One node's kubelet directory and the unix socket its CSI plugin serves."""

    name: str
    kubelet_dir: Path
    socket: Path

    def __post_init__(self) -> None:
        if len(str(self.socket).encode()) > MAX_SOCKET_PATH:
            raise ValueError(f"the plugin socket {self.socket} is longer than a unix socket path may be")

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"


@dataclasses.dataclass(frozen=True)
class CsiMount:
    """One container's mount of a CSI volume, and the target directory the plugin publishes it at."""

    container: str
    mount_path: str
    volume: str
    driver: str
    read_only: bool
    target: Path


def volume_handle(pod_uid: str, volume: str) -> str:
    """kubelet's `volume_id` for an ephemeral inline volume (pkg/volume/csi makeVolumeHandle)."""
    return "csi-" + hashlib.sha256(f"{pod_uid}{volume}".encode()).hexdigest()


def target_path(kubelet_dir: Path, pod_uid: str, volume: str) -> Path:
    return kubelet_dir / "pods" / pod_uid / "volumes" / CSI_PLUGIN_DIR / volume / "mount"


def csi_volumes(pod: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Volume name -> its `csi` source, for the Pod's inline CSI volumes."""
    found: dict[str, dict[str, Any]] = {}
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        source = volume.get("csi")
        if isinstance(source, dict) and source.get("driver"):
            found[str(volume["name"])] = source
    return found


def go_code(code: grpc.StatusCode) -> str:
    """A gRPC code as Go's codes.Code.String() spells it in kubelet's messages (PermissionDenied)."""
    return "".join(part.capitalize() for part in code.name.split("_"))


def publish_context(pod: Mapping[str, Any], source: Mapping[str, Any]) -> dict[str, str]:
    """The `volume_context` kubelet sends: the volume's attributes, then the pod information
    (podInfoOnMount) and the ephemeral mark over whatever the Pod's author wrote under those keys."""
    metadata = meta(dict(pod))
    spec = pod.get("spec") or {}
    return {
        **{str(k): str(v) for k, v in (source.get("volumeAttributes") or {}).items()},
        names.KUBELET_POD_NAME: str(metadata.get("name") or ""),
        names.KUBELET_POD_NAMESPACE: str(metadata.get("namespace") or ""),
        names.KUBELET_POD_UID: str(metadata.get("uid") or ""),
        names.KUBELET_SERVICE_ACCOUNT: str(spec.get("serviceAccountName") or "default"),
        names.KUBELET_EPHEMERAL: "true",
    }


@dataclasses.dataclass
class _Volume:
    """kubelet's record of one volume of one Pod (its actual and desired state of the world)."""

    name: str
    driver: str
    request: csi_pb2.NodePublishVolumeRequest
    published: bool = False
    uncertain: bool = False  # the last SetUp failed with a code after which it may be mounted
    in_flight: bool = False
    failures: int = 0
    next_try: float = 0.0
    last_error: str = ""
    events: dict[str, str] = dataclasses.field(default_factory=dict)  # message -> Event name

    @property
    def target(self) -> Path:
        return Path(self.request.target_path)


@dataclasses.dataclass
class _PodVolumes:
    namespace: str
    name: str
    uid: str
    node: CsiNode
    volumes: dict[str, _Volume]
    deleting: bool = False


class CsiKubelet(StoreReactor):
    """Publishes and unpublishes the inline CSI volumes of `drivers` for Pods on `nodes`."""

    name = "csi-kubelet"

    def __init__(
        self,
        emulator: Emulator,
        *,
        nodes: Sequence[CsiNode],
        drivers: Collection[str],
        retry_initial: float = RETRY_INITIAL_SECONDS,
        retry_cap: float = RETRY_CAP_SECONDS,
        call_timeout: float = CALL_TIMEOUT_SECONDS,
    ) -> None:
        super().__init__(emulator.cluster, watched=[("", "v1", "pods"), ("", "v1", "events")])
        self.nodes = {node.name: node for node in nodes}
        self.drivers = frozenset(drivers)
        self.retry_initial = retry_initial
        self.retry_cap = retry_cap
        self.call_timeout = call_timeout
        # Called with (namespace, name) when a Pod's volumes changed state: the scheduler's kubelet
        # re-reads `pending_message` and writes the Pod's status.
        self.on_change: Callable[[str, str], None] = lambda namespace, name: None
        self._lock = threading.Lock()
        self._pods: dict[str, _PodVolumes] = {}
        self._channels: dict[str, grpc.Channel] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="csi-kubelet")
        for node in nodes:
            node.kubelet_dir.mkdir(parents=True, exist_ok=True)
        self.start()

    # --- what the scheduler's kubelet and tests read ---------------------------------------------

    def pending_message(self, pod: Mapping[str, Any]) -> str | None:
        """None when every CSI volume of the Pod is published; otherwise why its containers wait."""
        volumes = csi_volumes(pod)
        if not volumes:
            return None
        node = self.nodes.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        for name, source in volumes.items():
            if node is None or source["driver"] not in self.drivers:
                return unregistered_driver_message(name, str(source["driver"]))
        with self._lock:
            state = self._pods.get(str(meta(dict(pod)).get("uid") or ""))
            if state is None:
                return f"waiting for NodePublishVolume of {', '.join(sorted(volumes))}"
            waiting = [v for v in state.volumes.values() if not v.published]
            if not waiting:
                return None
            errors = [v.last_error for v in waiting if v.last_error]
            if errors:
                return errors[0]
            return f"waiting for NodePublishVolume of {', '.join(sorted(v.name for v in waiting))}"

    def mounts(self, pod: Mapping[str, Any]) -> list[CsiMount]:
        """Every CSI volume mount of the Pod's containers and init containers (spec order), with the
        target directory its volume is published at on the Pod's node."""
        spec = pod.get("spec") or {}
        node = self.nodes.get(str(spec.get("nodeName") or ""))
        if node is None:
            return []
        uid = str(meta(dict(pod)).get("uid") or "")
        volumes = csi_volumes(pod)
        found: list[CsiMount] = []
        for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            for mount in container.get("volumeMounts") or []:
                source = volumes.get(str(mount.get("name")))
                if source is None:
                    continue
                found.append(
                    CsiMount(
                        container=str(container.get("name")),
                        mount_path=str(mount["mountPath"]),
                        volume=str(mount["name"]),
                        driver=str(source["driver"]),
                        read_only=bool(mount.get("readOnly")) or bool(source.get("readOnly")),
                        target=target_path(node.kubelet_dir, uid, str(mount["name"])),
                    )
                )
        return found

    def published(self, pod_uid: str) -> set[str]:
        """Names of the Pod's volumes this kubelet has published and not torn down."""
        with self._lock:
            state = self._pods.get(pod_uid)
            return {v.name for v in state.volumes.values() if v.published} if state else set()

    def tracked_pods(self) -> set[str]:
        """Uids of the Pods whose volumes are not all torn down yet."""
        with self._lock:
            return set(self._pods)

    def wait_published(self, pod: Mapping[str, Any], *, timeout: float = 60) -> None:
        uid = str(meta(dict(pod)).get("uid") or "")
        wanted = set(csi_volumes(pod))
        self.wait_for(
            lambda: self.published(uid),
            lambda done: done == wanted,
            timeout=timeout,
            what=f"NodePublishVolume of {sorted(wanted)} for pod {'/'.join(key_of(dict(pod)))}: "
            f"{self.pending_message(pod)}",
        )

    def wait_torn_down(self, pod_uid: str, *, timeout: float = 60) -> None:
        self.wait_for(
            self.tracked_pods,
            lambda tracked: pod_uid not in tracked,
            timeout=timeout,
            what=f"the volumes of pod {pod_uid} torn down",
        )

    # --- the reactor -----------------------------------------------------------------------------

    def keys_for(self, kind: str, event: WatchEvent) -> Iterable[Hashable]:
        if kind == "events":
            return []  # watched so `wait_for` wakes when a FailedMount Event is written
        obj = event.obj
        if event.type == "DELETED":
            uid = str(meta(obj).get("uid") or "")
            with self._lock:
                known = uid in self._pods
            return [("gone", uid)] if known else []
        return [("pod", *key_of(obj))]

    def reconcile(self, key: Any) -> None:
        if key[0] == "gone":
            self._tear_down(str(key[1]), pod=None)
            return
        _, namespace, name = key
        pod = self.get("pods", namespace, name)
        if pod is None:
            return
        node = self.nodes.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        volumes = {n: s for n, s in csi_volumes(pod).items() if s["driver"] in self.drivers}
        uid = str(meta(pod).get("uid") or "")
        if node is None or not volumes:
            return
        if meta(pod).get("deletionTimestamp"):
            self._tear_down(uid, pod=pod)
            return
        if not self._hold(pod):
            return
        with self._lock:
            state = self._pods.get(uid)
            if state is None:
                state = _PodVolumes(
                    namespace=namespace,
                    name=name,
                    uid=uid,
                    node=node,
                    volumes={
                        volume: self._new_volume(pod, node, volume, source)
                        for volume, source in volumes.items()
                    },
                )
                self._pods[uid] = state
            due = self._due(state, lambda v: not v.published)
        for volume in due:
            self._pool.submit(self._publish, state, volume)

    def _due(self, state: _PodVolumes, wanted: Callable[[_Volume], bool]) -> list[_Volume]:
        """The volumes to call the plugin for now (marked in flight); schedules the next look for
        those still backing off. Called under `_lock`."""
        now = time.monotonic()
        due: list[_Volume] = []
        for volume in state.volumes.values():
            if not wanted(volume) or volume.in_flight:
                continue
            if volume.next_try > now:
                key = ("pod", state.namespace, state.name) if not state.deleting else ("gone", state.uid)
                self.kick_later(key, volume.next_try - now)
                continue
            volume.in_flight = True
            due.append(volume)
        return due

    def _new_volume(
        self, pod: dict[str, Any], node: CsiNode, volume: str, source: Mapping[str, Any]
    ) -> _Volume:
        uid = str(meta(pod).get("uid") or "")
        request = csi_pb2.NodePublishVolumeRequest(
            volume_id=volume_handle(uid, volume),
            target_path=str(target_path(node.kubelet_dir, uid, volume)),
            volume_capability=csi_pb2.VolumeCapability(
                mount=csi_pb2.VolumeCapability.MountVolume(fs_type=str(source.get("fsType") or "")),
                access_mode=csi_pb2.VolumeCapability.AccessMode(
                    mode=csi_pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
                ),
            ),
            readonly=bool(source.get("readOnly")),
            volume_context=publish_context(pod, source),
        )
        return _Volume(name=volume, driver=str(source["driver"]), request=request)

    def _hold(self, pod: dict[str, Any]) -> bool:
        """Put the finalizer on the Pod (kubelet's hold on it until teardown); False if it is gone."""
        if VOLUMES_FINALIZER in (meta(pod).get("finalizers") or []):
            return True
        namespace, name = key_of(pod)
        with self.cluster.store.lock:
            current = self.get("pods", namespace, name)
            if current is None or meta(current).get("uid") != meta(pod).get("uid"):
                return False
            if meta(current).get("deletionTimestamp"):
                return False
            current["metadata"]["finalizers"] = [*(meta(current).get("finalizers") or []), VOLUMES_FINALIZER]
            self.cluster.update(self.rtype("pods"), current, namespace=namespace, name=name)
        return True

    # --- calls to the plugin (pool threads) ------------------------------------------------------

    def _stub(self, node: CsiNode) -> csi_pb2_grpc.NodeStub:
        with self._lock:
            channel = self._channels.get(node.name)
            if channel is None:
                channel = grpc.insecure_channel(node.endpoint, options=_CHANNEL_OPTIONS)
                self._channels[node.name] = channel
        return csi_pb2_grpc.NodeStub(channel)

    def _publish(self, state: _PodVolumes, volume: _Volume) -> None:
        error: grpc.RpcError | None = None
        try:
            parent = volume.target.parent
            parent.mkdir(mode=0o750, parents=True, exist_ok=True)
            (parent / "vol_data.json").write_text(
                json.dumps(
                    {
                        "driverName": volume.driver,
                        "volumeHandle": volume.request.volume_id,
                        "specVolID": volume.name,
                        "volumeLifecycleMode": "Ephemeral",
                    }
                )
            )
            self._stub(state.node).NodePublishVolume(volume.request, timeout=self.call_timeout)
        except grpc.RpcError as failure:
            error = failure
        except Exception as failure:  # this kubelet's own fault: report it as the Pod's error
            self._log.exception("publishing %s of pod %s/%s", volume.name, state.namespace, state.name)
            error = _LocalError(str(failure))
        message = ""
        with self._lock:
            volume.in_flight = False
            if error is None:
                volume.published, volume.uncertain = True, False
                volume.failures, volume.next_try, volume.last_error = 0, 0.0, ""
            else:
                code = error.code()
                message = (
                    f'MountVolume.SetUp failed for volume "{volume.name}" : rpc error: '
                    f"code = {go_code(code)} desc = {error.details()}"
                )
                volume.uncertain = code in UNCERTAIN_CODES
                volume.last_error = message
                self._back_off(volume)
        if error is not None:
            if not volume.uncertain:
                _remove_mount_dir(volume.target)
            self._failed_mount_event(state, volume, message)
        self.kick(("gone", state.uid) if state.deleting else ("pod", state.namespace, state.name))
        self.on_change(state.namespace, state.name)

    def _back_off(self, volume: _Volume) -> None:
        volume.failures += 1
        delay = min(self.retry_initial * 2 ** (volume.failures - 1), self.retry_cap)
        volume.next_try = time.monotonic() + delay

    def _unpublish(self, state: _PodVolumes, volume: _Volume) -> None:
        request = csi_pb2.NodeUnpublishVolumeRequest(
            volume_id=volume.request.volume_id, target_path=volume.request.target_path
        )
        failed = ""
        try:
            self._stub(state.node).NodeUnpublishVolume(request, timeout=self.call_timeout)
        except grpc.RpcError as error:
            failed = f"rpc error: code = {go_code(error.code())} desc = {error.details()}"
        with self._lock:
            volume.in_flight = False
            if failed:
                volume.last_error = f'UnmountVolume.TearDown failed for volume "{volume.name}" : {failed}'
                self._log.warning("%s/%s: %s", state.namespace, state.name, volume.last_error)
                self._back_off(volume)
            else:
                volume.published = volume.uncertain = False
                volume.failures, volume.next_try = 0, 0.0
        if not failed:
            _remove_mount_dir(volume.target)
        self.kick(("gone", state.uid))

    # --- teardown --------------------------------------------------------------------------------

    def _tear_down(self, uid: str, *, pod: dict[str, Any] | None) -> None:
        """Unpublish what may be mounted; once nothing is, forget the Pod and let it go."""
        with self._lock:
            state = self._pods.get(uid)
            due: list[_Volume] = []
            finished = True
            if state is not None:
                state.deleting = True
                due = self._due(state, lambda v: v.published or v.uncertain)
                finished = not any(v.in_flight or v.published or v.uncertain for v in state.volumes.values())
                if finished:
                    del self._pods[uid]
        if state is not None:
            for volume in due:
                self._pool.submit(self._unpublish, state, volume)
        if not finished:
            return
        if state is not None:
            _remove_pod_dir(state.node.kubelet_dir / "pods" / uid)
            pod = pod or self.get("pods", state.namespace, state.name)
        if pod is not None and meta(pod).get("uid") == uid:
            self._release(pod)

    def _release(self, pod: dict[str, Any]) -> None:
        namespace, name = key_of(pod)
        with self.cluster.store.lock:
            current = self.get("pods", namespace, name)
            if current is None or meta(current).get("uid") != meta(pod).get("uid"):
                return
            finalizers = list(meta(current).get("finalizers") or [])
            if VOLUMES_FINALIZER not in finalizers:
                return
            current["metadata"]["finalizers"] = [f for f in finalizers if f != VOLUMES_FINALIZER]
            self.cluster.update(self.rtype("pods"), current, namespace=namespace, name=name)

    # --- events ----------------------------------------------------------------------------------

    def _failed_mount_event(self, state: _PodVolumes, volume: _Volume, message: str) -> None:
        """kubelet's Warning FailedMount; the same message again counts up the Event it wrote."""
        rtype = self.cluster.resource("", "v1", "events")
        assert rtype is not None
        moment = rfc3339()
        with self.cluster.store.lock:
            existing = volume.events.get(message)
            if existing is not None:
                with contextlib.suppress(Exception):
                    event = self.cluster.get(rtype, namespace=state.namespace, name=existing)
                    event["count"] = int(event.get("count") or 1) + 1
                    event["lastTimestamp"] = moment
                    self.cluster.update(rtype, event, namespace=state.namespace, name=existing)
                    return
            name = f"{state.name}.{time.time_ns():x}"
            self.cluster.create(
                rtype,
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": name, "namespace": state.namespace},
                    "involvedObject": {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "namespace": state.namespace,
                        "name": state.name,
                        "uid": state.uid,
                    },
                    "reason": "FailedMount",
                    "message": message,
                    "type": "Warning",
                    "source": {"component": "kubelet", "host": state.node.name},
                    "reportingComponent": "kubelet",
                    "reportingInstance": state.node.name,
                    "firstTimestamp": moment,
                    "lastTimestamp": moment,
                    "count": 1,
                },
                namespace=state.namespace,
            )
            volume.events[message] = name

    def failed_mounts(self, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The FailedMount Events of the Pod (by uid), oldest first."""
        namespace, _ = key_of(dict(pod))
        uid = meta(dict(pod)).get("uid")
        events = [
            e
            for e in self.items("events", namespace)
            if e.get("reason") == "FailedMount" and (e.get("involvedObject") or {}).get("uid") == uid
        ]
        return sorted(events, key=lambda e: str(e.get("firstTimestamp") or ""))

    # --- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        super().close()
        with self._lock:
            channels = list(self._channels.values())
            self._channels.clear()
        for channel in channels:
            channel.close()  # cancels the calls in flight
        self._pool.shutdown(wait=True, cancel_futures=True)


class _LocalError(grpc.RpcError):
    """A failure of this kubelet itself (e.g. its directory), reported like a call's error."""

    def __init__(self, details: str) -> None:
        super().__init__(details)
        self._details = details

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.INTERNAL

    def details(self) -> str:
        return self._details


def mount_points() -> set[Path]:
    """Every mount point of this mount namespace (/proc/self/mountinfo). `os.path.ismount` cannot
    tell a bind mount of a directory from the same filesystem: device and parent are the same."""
    found: set[Path] = set()
    with open("/proc/self/mountinfo", encoding="utf-8") as info:
        for line in info:
            fields = line.split(" ")
            if len(fields) > 4:
                # Octal escapes for space, tab, newline and backslash (\040 ...).
                found.add(Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])))
    return found


def is_mount_point(path: Path) -> bool:
    return path.absolute() in mount_points()


class MountsNotPermitted(RuntimeError):
    """This machine cannot make the bind mounts a node plugin makes (not root, no CAP_SYS_ADMIN)."""


def require_bind_mounts(directory: Path) -> None:
    """Make and undo a read-only bind mount under `directory`; `MountsNotPermitted` saying why and
    what to do when that fails. The NodeCache tests need real mounts: they fail, never skip."""
    source, target = directory / ".mount-check-source", directory / ".mount-check-target"
    source.mkdir(parents=True, exist_ok=True)
    target.mkdir(exist_ok=True)
    try:
        for command in (
            ["mount", "--bind", str(source), str(target)],
            ["mount", "-o", "remount,bind,ro,nosuid,nodev", str(target)],
        ):
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise MountsNotPermitted(
                    f"{' '.join(command)} failed: {done.stderr.strip()}. The node plugin bind-mounts "
                    "each model read-only into the pod's volume directory: run the NodeCache tests and "
                    "`make dev` in NodeCache mode as root (as in CI), or in a user and mount namespace "
                    "(unshare -rm)"
                )
    finally:
        if is_mount_point(target):
            subprocess.run(["umount", str(target)], capture_output=True, check=False)
        target.rmdir()
        source.rmdir()


def unmount_under(root: Path) -> None:
    """Lazily unmount every mount point under `root`, deepest first: what a node's plugin left
    mounted when a test or the dev stack ends (kubelet would tear it down; nothing here will)."""
    for point in sorted(mount_points(), key=lambda p: len(p.parts), reverse=True):
        if point.is_relative_to(root.absolute()):
            subprocess.run(["umount", "-l", str(point)], check=False, capture_output=True)


def _remove_mount_dir(target: Path) -> None:
    """kubelet's removeMountDir: the target (if it is no mount point any more) and its volume
    directory with vol_data.json; a target still mounted is left alone."""
    if target.exists() and is_mount_point(target):
        return
    with contextlib.suppress(OSError):
        target.rmdir()
    with contextlib.suppress(OSError):
        (target.parent / "vol_data.json").unlink()
    with contextlib.suppress(OSError):
        target.parent.rmdir()


def _remove_pod_dir(pod_dir: Path) -> None:
    """The Pod's volume directories and then its own, only where empty: what is still mounted (a
    plugin that answered OK without unmounting) stays in place for the test to see."""
    plugin_dir = pod_dir / "volumes" / CSI_PLUGIN_DIR
    if plugin_dir.is_dir():
        for volume_dir in plugin_dir.iterdir():
            _remove_mount_dir(volume_dir / "mount")
    for directory in (plugin_dir, plugin_dir.parent, pod_dir):
        with contextlib.suppress(OSError):
            directory.rmdir()
