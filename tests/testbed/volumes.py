"""The PersistentVolume controller and a CSI-style provisioner per StorageClass, as a test sets them up.

kubeemu stores PersistentVolumeClaims and nothing binds them. `VolumeProvisioner` watches claims,
volumes and StorageClasses in the emulator's store and plays what a cluster's PV controller and its
external provisioners do, with one `StorageClassBehaviour` per class name the test configures
(`configure()` adds or changes one later and re-examines the claims of that class):

- it creates each configured StorageClass object (`provisioner`, `volumeBindingMode`,
  `reclaimPolicy`, the default-class annotation when `default`);
- a claim without `spec.storageClassName` gets the default class written into it, as the PV
  controller's retroactive default assignment does (Kubernetes 1.28+; kubeemu runs no admission
  plugin that would set it at creation); `storageClassName: ""` asks for static binding: never bound;
- a class named by a claim that does not exist: Warning `ProvisioningFailed`
  `storageclass.storage.k8s.io "<name>" not found` from `persistentvolume-controller`; a class that
  exists but is not configured here: Normal `ExternalProvisioning` (nobody provisions it: a claim
  of it stays Pending, as with a provisioner that is not running);
- `WaitForFirstConsumer`: Normal `WaitForFirstConsumer` until the scheduler (`testbed.scheduler`)
  writes `volume.kubernetes.io/selected-node` on the claim for a pod it schedules, then provisioning;
- provisioning: Normal `Provisioning`; then, per behaviour: `never_binds` stops there (the claim
  stays Pending for ever); a requested access mode the class does not support (ReadWriteMany
  unless `read_write_many`) or a `failure` message gives a Warning `ProvisioningFailed` with that
  message (source component like a CSI provisioner's `<driver>_<pod>_<uuid>`, involvedObject the
  claim with its uid); otherwise a PersistentVolume `pvc-<claim uid>` backed by a fresh directory
  `<workdir>/pvc-<claim uid>` recorded in `spec.hostPath.path`, with the requested access modes and
  size, bound to the claim at once (claimRef, `spec.volumeName`, the bind annotations, both phases
  `Bound`), and Normal `ProvisioningSucceeded`;
- a Bound claim whose volume is deleted becomes `Lost` (Warning `ClaimLost`), as the PV controller
  does; a deleted claim's volume is deleted with its directory (`reclaimPolicy: Delete`) or becomes
  `Released` (`Retain`).

Each Event is written once per claim, reason and message (a real recorder would aggregate
retries into `count`; tests want the message, not the retry rate). Deliberately not emulated:
static binding of pre-created volumes, volume expansion, snapshots, node affinity of volumes, the
`kubernetes.io/pvc-protection` and `pv-protection` finalizers, and an access mode really enforced
(a directory can be written by anyone who has it). `testbed.mounts` says which directory a pod's
claim mount would see.
"""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kubeemu.clock import rfc3339
from kubeemu.store import WatchEvent
from testbed.jobrunner import Emulator
from testbed.reactor import StoreReactor, key_of, meta

DEFAULT_PROVISIONER = "csi.testbed.example"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
PROVISIONER_ANNOTATIONS = (
    "volume.kubernetes.io/storage-provisioner",
    "volume.beta.kubernetes.io/storage-provisioner",
)
PV_CONTROLLER = "persistentvolume-controller"
READ_WRITE_MANY = "ReadWriteMany"
BASIC_ACCESS_MODES = frozenset({"ReadWriteOnce", "ReadOnlyMany", "ReadWriteOncePod"})
DEFAULT_SIZE = "1Gi"


@dataclass(frozen=True)
class StorageClassBehaviour:
    """How the test bed's provisioner treats the claims of one StorageClass."""

    name: str
    binding_mode: str = "Immediate"  # | WaitForFirstConsumer
    read_write_many: bool = True
    # The ProvisioningFailed message for a claim asking for ReadWriteMany when the class has none.
    unsupported_access_mode_message: str = ""
    failure: str | None = None  # every provisioning fails with this message (verbatim)
    never_binds: bool = False  # provisioning starts and never ends
    default: bool = False
    provisioner: str = DEFAULT_PROVISIONER
    reclaim_policy: str = "Delete"

    def access_modes(self) -> frozenset[str]:
        return BASIC_ACCESS_MODES | ({READ_WRITE_MANY} if self.read_write_many else frozenset())

    def access_mode_message(self, modes: Iterable[str]) -> str:
        if self.unsupported_access_mode_message:
            return self.unsupported_access_mode_message
        wanted = ", ".join(sorted(modes))
        return (
            f'failed to provision volume with StorageClass "{self.name}": rpc error: code = '
            f"InvalidArgument desc = volume capabilities not supported: access modes [{wanted}]"
        )

    def storage_class(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name}
        if self.default:
            metadata["annotations"] = {DEFAULT_CLASS_ANNOTATION: "true"}
        return {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": metadata,
            "provisioner": self.provisioner,
            "reclaimPolicy": self.reclaim_policy,
            "volumeBindingMode": self.binding_mode,
        }


@dataclass
class _Recorded:
    """The Events already written, so each (claim uid, reason, message) appears once."""

    seen: set[tuple[str, str, str]] = field(default_factory=set)


class VolumeProvisioner(StoreReactor):
    """Binds the emulator's claims per configured StorageClass; see the module docstring.

    `classes` are the behaviours (their StorageClass objects are created); `workdir` holds the
    volumes' directories (default `<emulator workdir>/volumes`)."""

    name = "volumes"

    def __init__(
        self,
        emulator: Emulator,
        *,
        classes: Sequence[StorageClassBehaviour] = (),
        workdir: Path | None = None,
    ) -> None:
        super().__init__(
            emulator.cluster,
            watched=[
                ("", "v1", "persistentvolumeclaims"),
                ("", "v1", "persistentvolumes"),
                ("storage.k8s.io", "v1", "storageclasses"),
            ],
        )
        self.workdir = (workdir or emulator.workdir / "volumes").resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._events_type = self.cluster.resource("", "v1", "events")
        assert self._events_type is not None
        self._lock = threading.Lock()
        self._classes: dict[str, StorageClassBehaviour] = {}
        self._recorded = _Recorded()
        # Like a CSI provisioner's Event source: <driver>_<provisioner pod>_<leader identity>.
        self._instance = f"csi-provisioner-{uuid.uuid4().hex[:10]}_{uuid.uuid4()}"
        for behaviour in classes:
            self._install(behaviour)
        self.start()

    # --- test controls ---------------------------------------------------------------------------

    def configure(self, behaviour: StorageClassBehaviour) -> None:
        """Add or change a class's behaviour (and its StorageClass object); its Pending claims are
        examined again, e.g. a failing class that is fixed now provisions."""
        self._install(behaviour)
        for claim in self.items("persistentvolumeclaims"):
            if (claim.get("spec") or {}).get("storageClassName") == behaviour.name:
                self.kick(("claim", *key_of(claim)))

    def behaviour(self, name: str) -> StorageClassBehaviour:
        with self._lock:
            return self._classes[name]

    def fix(self, name: str) -> None:
        """The class's provisioner works again: no `failure`, binds, ReadWriteMany supported."""
        self.configure(replace(self.behaviour(name), failure=None, never_binds=False, read_write_many=True))

    def wait_for_claim(
        self, name: str, namespace: str = "default", phase: str = "Bound", timeout: float = 30
    ) -> dict[str, Any]:
        return self.wait_for(
            lambda: self.get("persistentvolumeclaims", namespace, name) or {},
            lambda claim: (claim.get("status") or {}).get("phase") == phase,
            timeout=timeout,
            what=f"claim {namespace}/{name} to be {phase}",
        )

    def volume_directory(self, claim: str, namespace: str = "default") -> Path:
        """The directory backing the claim's bound volume (AssertionError while unbound)."""
        pvc = self.get("persistentvolumeclaims", namespace, claim) or {}
        volume = self.get("persistentvolumes", "", (pvc.get("spec") or {}).get("volumeName") or "")
        path = ((volume or {}).get("spec") or {}).get("hostPath", {}).get("path")
        assert path, f"claim {namespace}/{claim} has no bound volume with a hostPath: {pvc}"
        return Path(path)

    # --- the reactor -----------------------------------------------------------------------------

    def _install(self, behaviour: StorageClassBehaviour) -> None:
        with self._lock:
            self._classes[behaviour.name] = behaviour
        self.cluster.apply(behaviour.storage_class())

    def keys_for(self, kind: str, event: WatchEvent) -> Iterable[Hashable]:
        obj = event.obj
        if kind == "persistentvolumeclaims":
            if event.type == "DELETED":
                volume = (obj.get("spec") or {}).get("volumeName")
                return [("volume", volume)] if volume else []
            return [("claim", *key_of(obj))]
        if kind == "persistentvolumes":
            ref = (obj.get("spec") or {}).get("claimRef") or {}
            if event.type == "DELETED":
                return [("claim", ref.get("namespace", ""), ref.get("name", ""))] if ref else []
            return [("volume", meta(obj)["name"])]
        # A StorageClass appeared, changed or went: every claim still waiting may be affected.
        return [
            ("claim", *key_of(claim))
            for claim in self.items("persistentvolumeclaims")
            if (claim.get("status") or {}).get("phase") == "Pending"
        ]

    def reconcile(self, key: Any) -> None:
        if key[0] == "claim":
            self._reconcile_claim(key[1], key[2])
        else:
            self._reconcile_volume(key[1])

    def _reconcile_claim(self, namespace: str, name: str) -> None:
        claim = self.get("persistentvolumeclaims", namespace, name)
        if claim is None or meta(claim).get("deletionTimestamp"):
            return
        spec, phase = claim.get("spec") or {}, (claim.get("status") or {}).get("phase")
        if phase == "Bound":
            if self.get("persistentvolumes", "", spec.get("volumeName") or "") is None:
                self._lose(claim)
            return
        if phase != "Pending" or spec.get("volumeName"):
            return
        if "storageClassName" not in spec or spec["storageClassName"] is None:
            self._assign_default_class(claim)
            return
        class_name = str(spec["storageClassName"])
        if not class_name:
            return  # static binding only: no volume here matches
        storage_class = self.get("storageclasses", "", class_name)
        if storage_class is None:
            message = f'storageclass.storage.k8s.io "{class_name}" not found'
            self._event(claim, "Warning", "ProvisioningFailed", message, PV_CONTROLLER)
            return
        provisioner = str(storage_class.get("provisioner") or "")
        wait = storage_class.get("volumeBindingMode") == "WaitForFirstConsumer"
        if wait and not (meta(claim).get("annotations") or {}).get(SELECTED_NODE_ANNOTATION):
            message = "waiting for first consumer to be created before binding"
            self._event(claim, "Normal", "WaitForFirstConsumer", message, PV_CONTROLLER)
            return
        with self._lock:
            behaviour = self._classes.get(class_name)
        if behaviour is None:
            message = (
                f"Waiting for a volume to be created either by the external provisioner '{provisioner}' or "
                "manually by the system administrator. If volume creation is delayed, please verify that "
                "the provisioner is running and correctly registered."
            )
            self._event(claim, "Normal", "ExternalProvisioning", message, PV_CONTROLLER)
            return
        source = f"{behaviour.provisioner}_{self._instance}"
        self._event(
            claim,
            "Normal",
            "Provisioning",
            f'External provisioner is provisioning volume for claim "{namespace}/{name}"',
            source,
        )
        if behaviour.never_binds:
            return
        modes = [str(m) for m in spec.get("accessModes") or ["ReadWriteOnce"]]
        if not set(modes) <= behaviour.access_modes():
            message = behaviour.access_mode_message(modes)
            self._event(claim, "Warning", "ProvisioningFailed", message, source)
            return
        if behaviour.failure is not None:
            self._event(claim, "Warning", "ProvisioningFailed", behaviour.failure, source)
            return
        self._provision(claim, behaviour, modes, source)

    def _assign_default_class(self, claim: dict[str, Any]) -> None:
        defaults = sorted(
            (meta(sc).get("creationTimestamp", ""), meta(sc)["name"])
            for sc in self.items("storageclasses")
            if (meta(sc).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"
        )
        if not defaults:
            return
        # Several defaults: the newest wins, as the apiserver's admission plugin decides.
        self._update_claim(claim, lambda body: body["spec"].__setitem__("storageClassName", defaults[-1][1]))

    def _update_claim(self, claim: dict[str, Any], change: Any) -> dict[str, Any] | None:
        namespace, name = key_of(claim)
        with self.cluster.store.lock:
            current = self.get("persistentvolumeclaims", namespace, name)
            if current is None or meta(current).get("uid") != meta(claim).get("uid"):
                return None
            current.setdefault("spec", {})
            change(current)
            return self.cluster.update(
                self.rtype("persistentvolumeclaims"), current, namespace=namespace, name=name
            ).object

    def _provision(
        self, claim: dict[str, Any], behaviour: StorageClassBehaviour, modes: list[str], source: str
    ) -> None:
        namespace, name = key_of(claim)
        uid = meta(claim)["uid"]
        volume_name = f"pvc-{uid}"
        size = str(
            ((claim.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage") or ""
        )
        size = size or DEFAULT_SIZE
        directory = self.workdir / volume_name
        directory.mkdir(parents=True, exist_ok=True)
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": volume_name,
                "annotations": {"pv.kubernetes.io/provisioned-by": behaviour.provisioner},
            },
            "spec": {
                "capacity": {"storage": size},
                "accessModes": modes,
                "persistentVolumeReclaimPolicy": behaviour.reclaim_policy,
                "storageClassName": behaviour.name,
                "volumeMode": "Filesystem",
                "hostPath": {"path": str(directory), "type": "DirectoryOrCreate"},
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": namespace,
                    "name": name,
                    "uid": uid,
                },
            },
        }
        pv_type, pvc_type = self.rtype("persistentvolumes"), self.rtype("persistentvolumeclaims")
        with self.cluster.store.lock:
            current = self.get("persistentvolumeclaims", namespace, name)
            if current is None or meta(current).get("uid") != uid:
                return
            if self.get("persistentvolumes", "", volume_name) is None:
                created = self.cluster.create(pv_type, volume).object
                self.write_status("persistentvolumes", created, {"phase": "Bound"})

            def bind(body: dict[str, Any]) -> None:
                body["spec"]["volumeName"] = volume_name
                annotations = body["metadata"].setdefault("annotations", {})
                annotations.update(
                    {
                        "pv.kubernetes.io/bind-completed": "yes",
                        "pv.kubernetes.io/bound-by-controller": "yes",
                        **dict.fromkeys(PROVISIONER_ANNOTATIONS, behaviour.provisioner),
                    }
                )

            bound = self._update_claim(current, bind)
            if bound is not None:
                status = {"phase": "Bound", "accessModes": modes, "capacity": {"storage": size}}
                self.cluster.update(
                    pvc_type,
                    {"metadata": {"name": name, "namespace": namespace}, "status": status},
                    namespace=namespace,
                    name=name,
                    subresource="status",
                )
        message = f"Successfully provisioned volume {volume_name}"
        self._event(claim, "Normal", "ProvisioningSucceeded", message, source)

    def _lose(self, claim: dict[str, Any]) -> None:
        status = {**(claim.get("status") or {}), "phase": "Lost"}
        self.write_status("persistentvolumeclaims", claim, status)
        message = "Bound claim has lost its PersistentVolume. Data on the volume is lost!"
        self._event(claim, "Warning", "ClaimLost", message, PV_CONTROLLER)

    def _reconcile_volume(self, name: str) -> None:
        volume = self.get("persistentvolumes", "", name)
        if volume is None:
            return
        spec = volume.get("spec") or {}
        ref = spec.get("claimRef") or {}
        ours = (meta(volume).get("annotations") or {}).get("pv.kubernetes.io/provisioned-by")
        if not ref or ours is None:
            return
        claim = self.get("persistentvolumeclaims", ref.get("namespace", ""), ref.get("name", ""))
        if claim is not None and meta(claim).get("uid") == ref.get("uid"):
            return
        if spec.get("persistentVolumeReclaimPolicy") == "Delete":
            self.delete("persistentvolumes", volume)
            path = Path((spec.get("hostPath") or {}).get("path") or "")
            if path.parent == self.workdir:
                shutil.rmtree(path, ignore_errors=True)
        else:
            self.write_status("persistentvolumes", volume, {"phase": "Released"})

    def _event(self, claim: dict[str, Any], kind: str, reason: str, message: str, component: str) -> None:
        namespace, name = key_of(claim)
        uid = meta(claim).get("uid", "")
        with self._lock:
            if (uid, reason, message) in self._recorded.seen:
                return
            self._recorded.seen.add((uid, reason, message))
        moment = rfc3339()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": namespace,
                "name": name,
                "uid": uid,
                "resourceVersion": meta(claim).get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": "",
            "firstTimestamp": moment,
            "lastTimestamp": moment,
            "count": 1,
        }
        assert self._events_type is not None
        self.cluster.create(self._events_type, event, namespace=namespace)

    def events(self, claim: str, namespace: str = "default") -> list[dict[str, Any]]:
        """The Events whose involvedObject is the claim (any uid), oldest first."""
        assert self._events_type is not None
        with self.cluster.store.lock:
            stored, _ = self.cluster.store.list_objects(self._events_type.storage_key, namespace)
        found = [e for e in stored if (e.get("involvedObject") or {}).get("name") == claim]
        return sorted(found, key=lambda e: (e.get("firstTimestamp") or "", meta(e).get("name", "")))
