"""The scheduler and the kubelets of the test bed's nodes, for Pods that nothing else runs.

kubeemu stores Pods and nothing schedules or starts them. `PodScheduler` watches Pods, claims,
Nodes and StorageClasses in the emulator's store and does, for every Pod without `spec.nodeName`,
what kube-scheduler does, and for every Pod on one of the cluster's Nodes what a kubelet reports:

- the Nodes: `nodes` are created as Node objects (Ready, `kubernetes.io/hostname` label) unless
  they exist; `add_node()` adds one later (a DaemonSet gets a Pod per Node);
- a Pod with `spec.schedulingGates` stays Pending with condition PodScheduled False, reason
  `SchedulingGated`; the apiserver lets a client only remove gates, and once the list is empty the
  Pod is scheduled like any other;
- a Pod whose claim is missing, Lost, or Pending in a class that is not `WaitForFirstConsumer`
  (an "unbound immediate" claim) stays Pending with PodScheduled False `Unschedulable` and the
  scheduler's message (`pod has unbound immediate PersistentVolumeClaims`, ...); for a Pending
  claim of a `WaitForFirstConsumer` class the scheduler picks the node, writes
  `volume.kubernetes.io/selected-node` on the claim (the provisioner, `testbed.volumes`, reacts)
  and binds the Pod once every claim is Bound;
- placement honours `nodeSelector` and required node affinity (`matchExpressions` on labels,
  `matchFields` on `metadata.name`, the form the DaemonSet controller writes) and picks the
  feasible Node with the fewest Pods (ties by name); binding sets `spec.nodeName` with an update
  (kubeemu has no `pods/binding` subresource) and PodScheduled True;
- the kubelet: a scheduled Pod none of whose images `runs_elsewhere` (the Job runner's images:
  their Pods are the Job runner's business) becomes Running with every container running and
  Ready, without running any process; its claim mounts' subPath directories are created, as the
  kubelet does (`testbed.mounts.pod_mounts` tells a test which directory each mount would show);
  a Pod with inline CSI volumes stays Pending, its containers waiting `ContainerCreating`, while
  `volume_setup` says why (`testbed.csi_kubelet` publishes them; without it no driver is registered).
  Pods never end by themselves.

Deliberately not emulated: resources and capacity, taints and tolerations, affinity between Pods,
preemption, probes, restarts, image pulls, node failures, and Pods of the Job runner's images that
no Job runner owns (they are scheduled, then stay Pending: nothing here has that image).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from kubeemu.clock import rfc3339
from kubeemu.store import WatchEvent
from testbed.jobrunner import NODE_IP, NODE_NAME, Emulator
from testbed.mounts import ClaimNotReady, host_directories
from testbed.reactor import StoreReactor, key_of, meta
from testbed.volumes import SELECTED_NODE_ANNOTATION

GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
# Why a scheduled Pod's volumes are not set up yet (None: they are): the CSI kubelet answers it.
VolumeSetUp = Callable[[Mapping[str, Any]], str | None]


def unregistered_driver_message(volume: str, driver: str) -> str:
    """kubelet's FailedMount message for an inline CSI volume of a driver the node does not have."""
    return (
        f'MountVolume.SetUp failed for volume "{volume}" : kubernetes.io/csi: mounter.SetUpAt failed '
        f"to get CSI client: driver name {driver} not found in the list of registered CSI drivers"
    )


def no_csi_drivers(pod: Mapping[str, Any]) -> str | None:
    """A node without CSI plugins: kubelet finds no registered driver for an inline CSI volume."""
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        driver = (volume.get("csi") or {}).get("driver")
        if driver:
            return unregistered_driver_message(str(volume.get("name")), str(driver))
    return None


def _unbound_immediate(nodes: int) -> str:
    return (
        f"0/{nodes} nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: "
        f"0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling."
    )


def _no_fit(nodes: int, why: str) -> str:
    return (
        f"0/{nodes} nodes are available: {nodes} {why}. preemption: 0/{nodes} nodes are available: "
        f"{nodes} Preemption is not helpful for scheduling."
    )


def images(pod: Mapping[str, Any]) -> list[str]:
    spec = pod.get("spec") or {}
    return [
        str(c.get("image") or "")
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    ]


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    volumes = (pod.get("spec") or {}).get("volumes") or []
    return [
        str(v["persistentVolumeClaim"]["claimName"])
        for v in volumes
        if (v.get("persistentVolumeClaim") or {}).get("claimName")
    ]


def _expression_matches(expression: Mapping[str, Any], value: str | None) -> bool:
    operator, values = expression.get("operator"), [str(v) for v in expression.get("values") or []]
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    return False  # Gt/Lt: not emulated


def node_fits(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """`nodeSelector` and required node affinity of the Pod against the Node's labels and name."""
    spec = pod.get("spec") or {}
    labels = meta(dict(node)).get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    name = meta(dict(node)).get("name")
    return any(
        all(_expression_matches(e, labels.get(e.get("key"))) for e in term.get("matchExpressions") or [])
        and all(
            _expression_matches(e, name if e.get("key") == "metadata.name" else None)
            for e in term.get("matchFields") or []
        )
        for term in terms
    )


def _condition(kind: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    condition: dict[str, Any] = {
        "type": kind,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": rfc3339(),
    }
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


class PodScheduler(StoreReactor):
    """Schedules the emulator's Pods and starts (pretends to) those nobody else runs."""

    name = "scheduler"

    def __init__(
        self,
        emulator: Emulator,
        *,
        nodes: Sequence[str] = (NODE_NAME,),
        runs_elsewhere: Callable[[str], bool] = lambda image: False,
        volume_setup: VolumeSetUp = no_csi_drivers,
    ) -> None:
        self.volume_setup = volume_setup
        super().__init__(
            emulator.cluster,
            watched=[
                ("", "v1", "pods"),
                ("", "v1", "persistentvolumeclaims"),
                ("", "v1", "nodes"),
                ("storage.k8s.io", "v1", "storageclasses"),
            ],
        )
        self.runs_elsewhere = runs_elsewhere
        for node in nodes:
            if self.get("nodes", "", node) is None:
                self.add_node(node)
        self.start()

    # --- test controls ---------------------------------------------------------------------------

    def add_node(self, name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        moment = rfc3339()
        return self.cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        **(labels or {}),
                    },
                },
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": moment,
                            "lastTransitionTime": moment,
                        }
                    ],
                    "addresses": [
                        {"type": "InternalIP", "address": NODE_IP},
                        {"type": "Hostname", "address": name},
                    ],
                },
            }
        )

    def wait_for_pod(
        self,
        name: str,
        namespace: str = "default",
        check: Callable[[dict[str, Any]], bool] = lambda pod: pod.get("status", {}).get("phase") == "Running",
        timeout: float = 30,
    ) -> dict[str, Any]:
        return self.wait_for(
            lambda: self.get("pods", namespace, name) or {},
            check,
            timeout=timeout,
            what=f"pod {namespace}/{name}",
        )

    # --- the reactor -----------------------------------------------------------------------------

    def keys_for(self, kind: str, event: WatchEvent) -> Iterable[Hashable]:
        obj = event.obj
        if kind == "pods":
            return [] if event.type == "DELETED" else [("pod", *key_of(obj))]
        if kind == "persistentvolumeclaims":
            namespace, name = key_of(obj)
            return [
                ("pod", *key_of(pod))
                for pod in self.items("pods", namespace)
                if name in claim_names(pod) and (pod.get("status") or {}).get("phase") == "Pending"
            ]
        # A Node or a StorageClass changed: every Pod not scheduled yet may fit now.
        return [
            ("pod", *key_of(pod)) for pod in self.items("pods") if not (pod.get("spec") or {}).get("nodeName")
        ]

    def reconcile(self, key: Any) -> None:
        _, namespace, name = key
        pod = self.get("pods", namespace, name)
        if pod is None or meta(pod).get("deletionTimestamp"):
            return
        if (pod.get("spec") or {}).get("nodeName"):
            self._kubelet(pod)
        else:
            self._schedule(pod)

    # --- kube-scheduler --------------------------------------------------------------------------

    def _unschedulable(self, pod: dict[str, Any], reason: str, message: str) -> None:
        status = {
            **(pod.get("status") or {}),
            "phase": "Pending",
            "conditions": [_condition("PodScheduled", "False", reason, message)],
        }
        current = (pod.get("status") or {}).get("conditions") or []
        # Rewritten only when reason or message change: a retry must not churn the Pod.
        if [(c.get("reason"), c.get("message")) for c in current] != [(reason, message)]:
            self.write_status("pods", pod, status)

    def _schedule(self, pod: dict[str, Any]) -> None:
        spec = pod.get("spec") or {}
        if spec.get("schedulingGates"):
            self._unschedulable(pod, "SchedulingGated", GATED_MESSAGE)
            return
        nodes = [n for n in self.items("nodes") if not meta(n).get("deletionTimestamp")]
        nodes = [n for n in nodes if not (n.get("spec") or {}).get("unschedulable")]
        if not nodes:
            self._unschedulable(pod, "Unschedulable", "no nodes available to schedule pods")
            return
        feasible = [n for n in nodes if node_fits(pod, n)]
        if not feasible:
            why = "node(s) didn't match Pod's node affinity/selector"
            self._unschedulable(pod, "Unschedulable", _no_fit(len(nodes), why))
            return
        namespace = key_of(pod)[0]
        delayed: list[dict[str, Any]] = []
        for claim_name in claim_names(pod):
            claim = self.get("persistentvolumeclaims", namespace, claim_name)
            if claim is None:
                self._unschedulable(pod, "Unschedulable", f'persistentvolumeclaim "{claim_name}" not found')
                return
            if meta(claim).get("deletionTimestamp"):
                message = f'persistentvolumeclaim "{claim_name}" is being deleted'
                self._unschedulable(pod, "Unschedulable", message)
                return
            phase = (claim.get("status") or {}).get("phase")
            if phase == "Bound":
                continue
            if phase == "Lost":
                why = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
                self._unschedulable(pod, "Unschedulable", _no_fit(len(nodes), why))
                return
            class_name = (claim.get("spec") or {}).get("storageClassName") or ""
            storage_class = self.get("storageclasses", "", class_name) if class_name else None
            if (storage_class or {}).get("volumeBindingMode") != "WaitForFirstConsumer":
                self._unschedulable(pod, "Unschedulable", _unbound_immediate(len(nodes)))
                return
            delayed.append(claim)
        names = {meta(n)["name"] for n in feasible}
        chosen = ""
        for claim in delayed:
            selected = (meta(claim).get("annotations") or {}).get(SELECTED_NODE_ANNOTATION, "")
            if selected in names:
                chosen = selected
        if not chosen:
            load = dict.fromkeys(names, 0)
            for other in self.items("pods"):
                assigned = (other.get("spec") or {}).get("nodeName")
                if assigned in load:
                    load[assigned] += 1
            chosen = min(sorted(names), key=lambda name: load[name])
        if delayed:
            for claim in delayed:
                self._select_node(claim, chosen)
            return  # bound once the provisioner has bound every claim (their events bring it back)
        self._bind(pod, chosen)

    def _select_node(self, claim: dict[str, Any], node: str) -> None:
        namespace, name = key_of(claim)
        rtype = self.rtype("persistentvolumeclaims")
        with self.cluster.store.lock:
            current = self.get("persistentvolumeclaims", namespace, name)
            if current is None or meta(current).get("uid") != meta(claim).get("uid"):
                return
            annotations = current["metadata"].setdefault("annotations", {})
            if annotations.get(SELECTED_NODE_ANNOTATION):
                return
            annotations[SELECTED_NODE_ANNOTATION] = node
            self.cluster.update(rtype, current, namespace=namespace, name=name)

    def _bind(self, pod: dict[str, Any], node: str) -> None:
        namespace, name = key_of(pod)
        rtype = self.rtype("pods")
        with self.cluster.store.lock:
            current = self.get("pods", namespace, name)
            if current is None or meta(current).get("uid") != meta(pod).get("uid"):
                return
            spec = current.setdefault("spec", {})
            if spec.get("nodeName") or spec.get("schedulingGates"):
                return
            spec["nodeName"] = node
            bound = self.cluster.update(rtype, current, namespace=namespace, name=name).object
            status = {
                **(bound.get("status") or {}),
                "phase": "Pending",
                "conditions": [_condition("PodScheduled", "True")],
            }
            self.write_status("pods", bound, status)

    # --- the kubelet -----------------------------------------------------------------------------

    def _kubelet(self, pod: dict[str, Any]) -> None:
        spec = pod.get("spec") or {}
        if self.get("nodes", "", spec["nodeName"]) is None:
            return  # not one of this cluster's nodes
        if any(self.runs_elsewhere(image) for image in images(pod)):
            return
        status = pod.get("status") or {}
        if status.get("phase") != "Pending":
            return
        namespace = key_of(pod)[0]
        containers = list(spec.get("containers") or [])
        try:
            for container in [*(spec.get("initContainers") or []), *containers]:
                host_directories(self.cluster, namespace, spec, container)
        except ClaimNotReady as error:
            self._creating(pod, f"unable to mount volumes: {error}")
            return
        pending = self.volume_setup(pod)
        if pending is not None:
            self._creating(pod, pending)
            return
        self.write_status("pods", pod, self._status(pod, waiting=None))

    def _creating(self, pod: dict[str, Any], message: str) -> None:
        """Containers waiting `ContainerCreating` with `message`; written once per cause: a retry
        must not churn the Pod."""
        waiting = {"reason": "ContainerCreating", "message": message}
        status = pod.get("status") or {}
        shown = [c.get("state", {}).get("waiting") for c in status.get("containerStatuses") or []]
        if shown != [waiting] * len((pod.get("spec") or {}).get("containers") or []):
            self.write_status("pods", pod, self._status(pod, waiting=waiting))

    def _status(self, pod: dict[str, Any], *, waiting: dict[str, Any] | None) -> dict[str, Any]:
        spec = pod.get("spec") or {}
        moment = rfc3339()
        running = waiting is None
        ready = "True" if running else "False"

        def container_status(container: Mapping[str, Any], state: dict[str, Any]) -> dict[str, Any]:
            image = str(container.get("image") or "")
            return {
                "name": container["name"],
                "image": image,
                "imageID": image if running else "",
                "ready": running and "running" in state,
                "started": "running" in state,
                "restartCount": 0,
                "state": state,
            }

        state = {"running": {"startedAt": moment}} if running else {"waiting": waiting}
        init_state = (
            {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": moment, "finishedAt": moment}}
            if running
            else {"waiting": {"reason": "PodInitializing"}}
        )
        status: dict[str, Any] = {
            "phase": "Running" if running else "Pending",
            "conditions": [
                _condition("PodReadyToStartContainers", ready),
                _condition("Initialized", "True"),
                _condition("Ready", ready, "" if running else "ContainersNotReady"),
                _condition("ContainersReady", ready, "" if running else "ContainersNotReady"),
                _condition("PodScheduled", "True"),
            ],
            "hostIP": NODE_IP,
            "hostIPs": [{"ip": NODE_IP}],
            "podIP": NODE_IP,
            "podIPs": [{"ip": NODE_IP}],
            "startTime": (pod.get("status") or {}).get("startTime") or moment,
            "qosClass": "BestEffort",
            "containerStatuses": [container_status(c, state) for c in spec.get("containers") or []],
        }
        if spec.get("initContainers"):
            status["initContainerStatuses"] = [
                {**container_status(c, init_state), "ready": running} for c in spec["initContainers"]
            ]
        return status
