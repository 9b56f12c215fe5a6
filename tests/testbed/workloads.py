"""The workload controllers of kube-controller-manager: Deployment, ReplicaSet, StatefulSet,
DaemonSet, CronJob, and the Job controller for Jobs the Job runner does not run.

kubeemu stores workloads and nothing turns them into Pods. `WorkloadControllers` watches them (and
their Pods and the Nodes) in the emulator's store and writes what the real controllers write; the
Pods it creates are Pending until `testbed.scheduler` schedules and "starts" them:

- Deployment: one ReplicaSet per pod template, named `<deployment>-<pod-template-hash>`, with the
  `pod-template-hash` label on the ReplicaSet, its selector and its template, the annotations
  `deployment.kubernetes.io/revision` (1, 2, ...; a template going back to an old ReplicaSet gives
  that one the next revision and `revision-history`), `desired-replicas` and `max-replicas`, and a
  controller ownerReference. The hash is the real controller's construction on another
  serialization: FNV-1a (32 bit) of the template as canonical JSON (sorted keys, then the
  `status.collisionCount` if any), its decimal digits mapped through the apiserver's
  `SafeEncodeString` alphabet - stable and of the same shape, not byte-equal to a real cluster's.
  Rollout, simplified RollingUpdate: the new ReplicaSet gets all replicas at once; once it has
  that many available (Ready) Pods, every old ReplicaSet is scaled to 0. Old ReplicaSets at 0
  beyond `revisionHistoryLimit` (default 10) are deleted, oldest revision first; one deleted by
  someone else is not recreated. Status: replicas, updatedReplicas, readyReplicas,
  availableReplicas, unavailableReplicas, observedGeneration, conditions Available
  (MinimumReplicasAvailable/MinimumReplicasUnavailable, against maxUnavailable, default 25% rounded
  down) and Progressing (NewReplicaSetCreated, ReplicaSetUpdated, NewReplicaSetAvailable). A paused
  Deployment gets no new ReplicaSet.
- ReplicaSet: Pods `generateName: <replicaset>-` with the template's labels and annotations and a
  controller ownerReference, created or deleted (unscheduled, then not Ready, then newest first)
  to `spec.replicas`; status replicas, fullyLabeledReplicas, readyReplicas, availableReplicas
  (Ready; minReadySeconds is not waited for), observedGeneration.
- StatefulSet: Pods `<name>-<ordinal>` (labels `controller-revision-hash: <name>-<hash>`,
  `statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index`; hostname and subdomain),
  claims `<template>-<name>-<ordinal>` from `volumeClaimTemplates` (kept when the set goes, the
  default retention), OrderedReady (the next ordinal only once the previous ones are Ready) unless
  `podManagementPolicy: Parallel`; a template change deletes the Pods of the old revision from the
  highest ordinal, one at a time while the rest are Ready (`OnDelete`: never); status replicas,
  readyReplicas, availableReplicas, currentReplicas, updatedReplicas, currentRevision,
  updateRevision, observedGeneration.
- DaemonSet: one Pod per Node that the template's nodeSelector/affinity admits, pinned with the
  required node affinity `matchFields metadata.name` as the real controller does (the scheduler
  binds it); labels `controller-revision-hash`, `pod-template-generation`; a template change
  replaces the old Pods; Pods of Nodes that are gone are deleted; status desiredNumberScheduled,
  currentNumberScheduled, updatedNumberScheduled, numberReady, numberAvailable,
  numberUnavailable, numberMisscheduled, observedGeneration.
- CronJob: no clock; `trigger(cronjob)` creates the Job a schedule would (`<name>-<minutes since
  the epoch>`, the job template's labels and annotations,
  `batch.kubernetes.io/cronjob-scheduled-timestamp`, a controller ownerReference) and status
  keeps `active` and `lastScheduleTime`/`lastSuccessfulTime`.
- Jobs: a Job the Job runner runs (`runner_runs_image`: exactly one container with such an image)
  is left to it; any other Job gets one Pod (`generateName: <job>-`, the `job-name` and
  `controller-uid` labels in both forms) and status active/ready/startTime. Its Pod "runs" for ever
  (the scheduler's kubelet runs no process), so such a Job never completes.

Deliberately not emulated: maxSurge/maxUnavailable arithmetic beyond the above, Recreate (treated
as RollingUpdate), minReadySeconds, progressDeadlineSeconds, ControllerRevision objects (kubeemu does
not serve them), StatefulSet partitions and PVC retention policies, DaemonSet surge, CronJob
schedules and concurrency policies, and Job completions, parallelism and retries.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from kubeemu.clock import rfc3339
from kubeemu.store import WatchEvent
from testbed.jobrunner import Emulator
from testbed.reactor import StoreReactor, controller_uid, key_of, meta, owner_reference
from testbed.scheduler import node_fits

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
REVISION_LABEL = "controller-revision-hash"
DEFAULT_HISTORY_LIMIT = 10
SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
# k8s.io/apimachinery/pkg/util/rand: no vowels, no 0/1/3 (no words, nothing ambiguous).
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_OWNED_KINDS = {"ReplicaSet", "StatefulSet", "DaemonSet", "Job"}


def pod_template_hash(template: Mapping[str, Any], collision_count: int | None = None) -> str:
    """The `pod-template-hash` of a pod template (see the module docstring for the construction)."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE_ALPHABET[ord(char) % len(_SAFE_ALPHABET)] for char in str(value))


def without_hash(template: Mapping[str, Any]) -> dict[str, Any]:
    """The template minus the `pod-template-hash` label (how a ReplicaSet's template is compared)."""
    copied = copy.deepcopy(dict(template))
    metadata = copied.get("metadata")
    if isinstance(metadata, dict):
        labels = metadata.get("labels")
        if isinstance(labels, dict):
            labels.pop(HASH_LABEL, None)
        # Empty labels or metadata are no template difference (the hash label may have been all).
        for key in [k for k, v in metadata.items() if v in ({}, None)]:
            metadata.pop(key)
        if not metadata:
            copied.pop("metadata")
    return copied


def is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def revision(obj: Mapping[str, Any]) -> int:
    try:
        return int((meta(dict(obj)).get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


def _replicas(obj: Mapping[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def _max_unavailable(deployment: Mapping[str, Any], replicas: int) -> int:
    strategy = ((deployment.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    value = strategy.get("maxUnavailable", "25%")
    if isinstance(value, str) and value.endswith("%"):
        return replicas * int(value[:-1]) // 100
    return int(value)


def _merge_conditions(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """New conditions keeping the old timestamps where nothing changed, so an unchanged status
    writes nothing (and a status write does not trigger another one)."""
    before = {c.get("type"): c for c in old}
    merged = []
    moment = rfc3339()
    for condition in new:
        previous = before.get(condition["type"])
        same = ("status", "reason", "message")
        if previous is not None and all(previous.get(k) == condition.get(k) for k in same):
            merged.append(previous)
            continue
        transition = (
            previous["lastTransitionTime"]
            if previous is not None and previous.get("status") == condition["status"]
            else moment
        )
        merged.append({**condition, "lastUpdateTime": moment, "lastTransitionTime": transition})
    return merged


def _target_node(pod: Mapping[str, Any]) -> str:
    """The node a DaemonSet Pod is pinned to (its affinity's `matchFields metadata.name`)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return str(field["values"][0])
    return ""


class WorkloadControllers(StoreReactor):
    """Plays the workload controllers on the emulator's store; see the module docstring.

    `runner_runs_image(image)` is True for the images whose single-container Jobs the Job runner
    runs (those Jobs are left to it)."""

    name = "workloads"

    def __init__(
        self, emulator: Emulator, *, runner_runs_image: Callable[[str], bool] = lambda image: False
    ) -> None:
        super().__init__(
            emulator.cluster,
            watched=[
                ("apps", "v1", "deployments"),
                ("apps", "v1", "replicasets"),
                ("apps", "v1", "statefulsets"),
                ("apps", "v1", "daemonsets"),
                ("batch", "v1", "cronjobs"),
                ("batch", "v1", "jobs"),
                ("", "v1", "pods"),
                ("", "v1", "nodes"),
                ("", "v1", "persistentvolumeclaims"),
            ],
        )
        self.runner_runs_image = runner_runs_image
        self.start()

    # --- test controls ---------------------------------------------------------------------------

    def trigger(self, cronjob: str, namespace: str = "default") -> str:
        """Create the CronJob's Job now, as its schedule would; returns the Job's name."""
        with self.cluster.store.lock:
            owner = self.get("cronjobs", namespace, cronjob)
            if owner is None:
                raise LookupError(f"no CronJob {namespace}/{cronjob}")
            template = (owner.get("spec") or {}).get("jobTemplate") or {}
            minutes = int(time.time() // 60)
            while self.get("jobs", namespace, f"{cronjob}-{minutes}") is not None:
                minutes += 1
            name = f"{cronjob}-{minutes}"
            template_meta = template.get("metadata") or {}
            body = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": dict(template_meta.get("labels") or {}),
                    "annotations": {
                        **(template_meta.get("annotations") or {}),
                        SCHEDULED_TIMESTAMP: rfc3339(),
                    },
                    "ownerReferences": [owner_reference(owner)],
                },
                "spec": copy.deepcopy(template.get("spec") or {}),
            }
            self.cluster.create(self.rtype("jobs"), body, namespace=namespace)
            status = {**(owner.get("status") or {}), "lastScheduleTime": rfc3339()}
            self.write_status("cronjobs", owner, status)
        self.kick(("CronJob", namespace, cronjob))
        return name

    def replica_sets(self, deployment: str, namespace: str = "default") -> list[dict[str, Any]]:
        """The Deployment's ReplicaSets (by its uid), oldest revision first."""
        owner = self.get("deployments", namespace, deployment)
        if owner is None:
            return []
        owned = [
            rs for rs in self.items("replicasets", namespace) if controller_uid(rs) == meta(owner)["uid"]
        ]
        return sorted(owned, key=revision)

    def pods_of(self, kind: str, name: str, namespace: str = "default") -> list[dict[str, Any]]:
        """The Pods a workload owns (through its ReplicaSets, for a Deployment), by name."""
        plural = {
            "Deployment": "deployments",
            "ReplicaSet": "replicasets",
            "StatefulSet": "statefulsets",
            "DaemonSet": "daemonsets",
            "Job": "jobs",
        }[kind]
        owner = self.get(plural, namespace, name)
        if owner is None:
            return []
        uids = {meta(owner)["uid"]}
        if kind == "Deployment":
            uids = {meta(rs)["uid"] for rs in self.replica_sets(name, namespace)}
        pods = [p for p in self.items("pods", namespace) if controller_uid(p) in uids]
        return sorted(pods, key=lambda p: meta(p)["name"])

    # --- the reactor -----------------------------------------------------------------------------

    def keys_for(self, kind: str, event: WatchEvent) -> Iterable[Hashable]:
        obj = event.obj
        namespace, name = key_of(obj)
        keys: list[Hashable] = []
        if kind == "nodes":
            return [("DaemonSet", *key_of(ds)) for ds in self.items("daemonsets")]
        if kind == "persistentvolumeclaims":
            return []  # watched only so that a test's wait sees claim templates' claims appear
        own = {
            "deployments": "Deployment",
            "replicasets": "ReplicaSet",
            "statefulsets": "StatefulSet",
            "daemonsets": "DaemonSet",
            "cronjobs": "CronJob",
            "jobs": "Job",
        }.get(kind)
        if own is not None and event.type != "DELETED":
            keys.append((own, namespace, name))
        for ref in meta(obj).get("ownerReferences") or []:
            if ref.get("controller") and (ref.get("kind") in _OWNED_KINDS | {"Deployment", "CronJob"}):
                keys.append((ref["kind"], namespace, ref.get("name", "")))
        return keys

    def reconcile(self, key: Any) -> None:
        kind, namespace, name = key
        handler = {
            "Deployment": self._deployment,
            "ReplicaSet": self._replica_set,
            "StatefulSet": self._stateful_set,
            "DaemonSet": self._daemon_set,
            "CronJob": self._cron_job,
            "Job": self._job,
        }[kind]
        handler(namespace, name)

    def _live(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        obj = self.get(plural, namespace, name)
        return None if obj is None or meta(obj).get("deletionTimestamp") else obj

    def _owned_pods(self, owner: dict[str, Any]) -> list[dict[str, Any]]:
        namespace = key_of(owner)[0]
        uid = meta(owner)["uid"]
        return [
            p
            for p in self.items("pods", namespace)
            if controller_uid(p) == uid and not meta(p).get("deletionTimestamp")
        ]

    def _create_pod(
        self,
        owner: dict[str, Any],
        template: Mapping[str, Any],
        *,
        name: str = "",
        labels: Mapping[str, str] | None = None,
        spec_changes: Mapping[str, Any] | None = None,
    ) -> None:
        namespace, owner_name = key_of(owner)
        template_meta = template.get("metadata") or {}
        metadata: dict[str, Any] = {
            "namespace": namespace,
            "labels": {**(template_meta.get("labels") or {}), **(labels or {})},
            "ownerReferences": [owner_reference(owner)],
        }
        if name:
            metadata["name"] = name
        else:
            metadata["generateName"] = f"{owner_name}-"
        if template_meta.get("annotations"):
            metadata["annotations"] = dict(template_meta["annotations"])
        spec = {**copy.deepcopy(template.get("spec") or {}), **(spec_changes or {})}
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
        with self.cluster.store.lock:
            if self._live(owner["kind"].lower() + "s", namespace, owner_name) is None:
                return
            self.cluster.create(self.rtype("pods"), body, namespace=namespace)

    def _update(self, plural: str, obj: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> None:
        """Read-modify-write of the object (not its status) under the store lock."""
        namespace, name = key_of(obj)
        with self.cluster.store.lock:
            current = self.get(plural, namespace, name)
            if current is None or meta(current).get("uid") != meta(obj).get("uid"):
                return
            before = copy.deepcopy(current)
            change(current)
            if current != before:
                self.cluster.update(self.rtype(plural), current, namespace=namespace, name=name)

    # --- Deployment ------------------------------------------------------------------------------

    def _deployment(self, namespace: str, name: str) -> None:
        deployment = self._live("deployments", namespace, name)
        if deployment is None:
            return
        spec = deployment.get("spec") or {}
        template = spec.get("template") or {}
        replicas = _replicas(deployment)
        owned = self.replica_sets(name, namespace)
        wanted = without_hash(template)
        current = next((rs for rs in owned if without_hash(rs["spec"]["template"]) == wanted), None)
        newest = max((revision(rs) for rs in owned), default=0)
        created = False
        if current is None and not spec.get("paused"):
            current = self._new_replica_set(deployment, newest + 1)
            created = current is not None
            if current is None:
                return  # a name collision: collisionCount was bumped, the next pass retries
            owned.append(current)
        elif current is not None and revision(current) < newest:
            previous = revision(current)

            def promote(rs: dict[str, Any]) -> None:
                annotations = rs["metadata"].setdefault("annotations", {})
                history = [h for h in annotations.get(REVISION_HISTORY, "").split(",") if h]
                annotations[REVISION_HISTORY] = ",".join([*history, str(previous)])
                annotations[REVISION] = str(newest + 1)

            self._update("replicasets", current, promote)
        old = [rs for rs in owned if current is None or meta(rs)["uid"] != meta(current)["uid"]]
        if current is not None:
            self._scale(current, replicas)
            available = int((current.get("status") or {}).get("availableReplicas") or 0)
            if available >= replicas:
                for rs in old:
                    self._scale(rs, 0)
        self._clean_history(deployment, old)
        if current is not None:
            number = str(revision(self.get("replicasets", namespace, meta(current)["name"]) or current))

            def annotate(d: dict[str, Any]) -> None:
                d["metadata"].setdefault("annotations", {})[REVISION] = number

            self._update("deployments", deployment, annotate)
        self._deployment_status(deployment, current, old, created=created)

    def _new_replica_set(self, deployment: dict[str, Any], number: int) -> dict[str, Any] | None:
        namespace, name = key_of(deployment)
        spec = deployment["spec"]
        collisions = (deployment.get("status") or {}).get("collisionCount")
        digest = pod_template_hash(spec.get("template") or {}, collisions)
        template = copy.deepcopy(spec.get("template") or {})
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = digest
        selector = copy.deepcopy(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = digest
        replicas = _replicas(deployment)
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{name}-{digest}",
                "namespace": namespace,
                "labels": dict(template["metadata"]["labels"]),
                "annotations": {
                    REVISION: str(number),
                    DESIRED_REPLICAS: str(replicas),
                    MAX_REPLICAS: str(replicas + 1),
                },
                "ownerReferences": [owner_reference(deployment)],
            },
            "spec": {
                "replicas": replicas,
                "minReadySeconds": int(spec.get("minReadySeconds") or 0),
                "selector": selector,
                "template": template,
            },
        }
        with self.cluster.store.lock:
            if self._live("deployments", namespace, name) is None:
                return None
            if self.get("replicasets", namespace, f"{name}-{digest}") is not None:
                # Another template hashed to this name: the real controller bumps collisionCount.
                status = {**(deployment.get("status") or {}), "collisionCount": int(collisions or 0) + 1}
                self.write_status("deployments", deployment, status)
                return None
            return self.cluster.create(self.rtype("replicasets"), body, namespace=namespace).object

    def _scale(self, replica_set: dict[str, Any], replicas: int) -> None:
        def change(rs: dict[str, Any]) -> None:
            rs["spec"]["replicas"] = replicas
            if replicas:
                rs["metadata"].setdefault("annotations", {})[DESIRED_REPLICAS] = str(replicas)

        if _replicas(replica_set) != replicas:
            self._update("replicasets", replica_set, change)

    def _clean_history(self, deployment: dict[str, Any], old: list[dict[str, Any]]) -> None:
        limit = (deployment.get("spec") or {}).get("revisionHistoryLimit")
        limit = DEFAULT_HISTORY_LIMIT if limit is None else int(limit)
        idle = [
            rs for rs in old if _replicas(rs) == 0 and not int((rs.get("status") or {}).get("replicas") or 0)
        ]
        for rs in sorted(idle, key=revision)[: max(len(idle) - limit, 0)]:
            self.delete("replicasets", rs)

    def _deployment_status(
        self,
        deployment: dict[str, Any],
        current: dict[str, Any] | None,
        old: list[dict[str, Any]],
        *,
        created: bool,
    ) -> None:
        namespace, _ = key_of(deployment)
        replicas = _replicas(deployment)
        # Re-read: the scaling above changed their specs, the ReplicaSet controller their status.
        sets = [
            self.get("replicasets", namespace, meta(rs)["name"])
            for rs in [*old, *([current] if current else [])]
        ]
        live = [rs for rs in sets if rs is not None]

        def total(field: str, among: list[dict[str, Any]]) -> int:
            return sum(int((rs.get("status") or {}).get(field) or 0) for rs in among)

        new_set = [rs for rs in live if current is not None and meta(rs)["uid"] == meta(current)["uid"]]
        old_sets = [rs for rs in live if rs not in new_set]
        available = total("availableReplicas", live)
        updated = total("replicas", new_set)
        status: dict[str, Any] = {
            "observedGeneration": meta(deployment).get("generation", 1),
            "replicas": total("replicas", live),
            "updatedReplicas": updated,
            "readyReplicas": total("readyReplicas", live),
            "availableReplicas": available,
        }
        unavailable = max(sum(_replicas(rs) for rs in live) - available, 0)
        if unavailable:
            status["unavailableReplicas"] = unavailable
        status = {k: v for k, v in status.items() if v or k == "observedGeneration"}
        old_status = deployment.get("status") or {}
        if "collisionCount" in old_status:
            status["collisionCount"] = old_status["collisionCount"]
        if available >= replicas - _max_unavailable(deployment, replicas):
            availability = {
                "type": "Available",
                "status": "True",
                "reason": "MinimumReplicasAvailable",
                "message": "Deployment has minimum availability.",
            }
        else:
            availability = {
                "type": "Available",
                "status": "False",
                "reason": "MinimumReplicasUnavailable",
                "message": "Deployment does not have minimum availability.",
            }
        conditions = [availability]
        if current is not None:
            rs_name = meta(current)["name"]
            complete = (
                updated == replicas
                and total("availableReplicas", new_set) >= replicas
                and not total("replicas", old_sets)
            )
            if complete:
                progress = ("NewReplicaSetAvailable", f'ReplicaSet "{rs_name}" has successfully progressed.')
            elif created:
                progress = ("NewReplicaSetCreated", f'Created new replica set "{rs_name}"')
            else:
                progress = ("ReplicaSetUpdated", f'ReplicaSet "{rs_name}" is progressing.')
            conditions.append(
                {"type": "Progressing", "status": "True", "reason": progress[0], "message": progress[1]}
            )
        status["conditions"] = _merge_conditions(old_status.get("conditions") or [], conditions)
        self.write_status("deployments", deployment, status)

    # --- ReplicaSet ------------------------------------------------------------------------------

    def _replica_set(self, namespace: str, name: str) -> None:
        replica_set = self._live("replicasets", namespace, name)
        if replica_set is None:
            return
        pods = self._owned_pods(replica_set)
        wanted = _replicas(replica_set)
        template = replica_set["spec"].get("template") or {}
        for _ in range(wanted - len(pods)):
            self._create_pod(replica_set, template)
        if len(pods) > wanted:
            # The real controller's order: unscheduled first, then not Ready, then the newest.
            ranked = sorted(
                pods,
                key=lambda p: (
                    bool((p.get("spec") or {}).get("nodeName")),
                    is_ready(p),
                    meta(p).get("creationTimestamp", ""),
                ),
            )
            for pod in ranked[: len(pods) - wanted]:
                self.delete("pods", pod)
        pods = self._owned_pods(replica_set)
        ready = sum(1 for p in pods if is_ready(p))
        status = {
            "replicas": len(pods),
            "fullyLabeledReplicas": len(pods),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": meta(replica_set).get("generation", 1),
        }
        self.write_status(
            "replicasets", replica_set, {k: v for k, v in status.items() if v or k == "replicas"}
        )

    # --- StatefulSet -----------------------------------------------------------------------------

    def _stateful_set(self, namespace: str, name: str) -> None:
        stateful_set = self._live("statefulsets", namespace, name)
        if stateful_set is None:
            return
        spec = stateful_set.get("spec") or {}
        template = spec.get("template") or {}
        update_revision = f"{name}-{pod_template_hash(template)}"
        replicas = _replicas(stateful_set)
        ordered = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        pods = {meta(p)["name"]: p for p in self._owned_pods(stateful_set)}
        for ordinal in range(replicas):
            pod_name = f"{name}-{ordinal}"
            pod = pods.get(pod_name)
            if pod is None:
                self._create_ordinal(stateful_set, ordinal, update_revision)
                if ordered:
                    break
            elif ordered and not is_ready(pod):
                break
        extra = sorted(
            (p for n, p in pods.items() if int(n.rsplit("-", 1)[1]) >= replicas),
            key=lambda p: -int(meta(p)["name"].rsplit("-", 1)[1]),
        )
        for pod in extra[:1] if ordered else extra:
            self.delete("pods", pod)
        in_range = [pods[n] for n in (f"{name}-{i}" for i in range(replicas)) if n in pods]
        stale = [p for p in in_range if (meta(p).get("labels") or {}).get(REVISION_LABEL) != update_revision]
        strategy = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate")
        # OrderedReady is monotonic: a Pod that is not Ready (e.g. a gated one) stops the update, as
        # in the real controller; only Parallel replaces a stale Pod whatever the others do.
        healthy = len(in_range) == replicas and not extra and all(is_ready(p) for p in in_range)
        if stale and strategy == "RollingUpdate" and (healthy or not ordered):
            self.delete("pods", stale[-1])
        pods_now = self._owned_pods(stateful_set)
        old_status = stateful_set.get("status") or {}
        updated = sum(
            1 for p in pods_now if (meta(p).get("labels") or {}).get(REVISION_LABEL) == update_revision
        )
        current_revision = old_status.get("currentRevision") or update_revision
        if updated == replicas and len(pods_now) == replicas:
            current_revision = update_revision
        current = sum(
            1 for p in pods_now if (meta(p).get("labels") or {}).get(REVISION_LABEL) == current_revision
        )
        ready = sum(1 for p in pods_now if is_ready(p))
        status = {
            "observedGeneration": meta(stateful_set).get("generation", 1),
            "replicas": len(pods_now),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": current,
            "updatedReplicas": updated,
            "currentRevision": current_revision,
            "updateRevision": update_revision,
            "collisionCount": 0,
        }
        self.write_status("statefulsets", stateful_set, status)

    def _create_ordinal(self, stateful_set: dict[str, Any], ordinal: int, update_revision: str) -> None:
        namespace, name = key_of(stateful_set)
        spec = stateful_set.get("spec") or {}
        pod_name = f"{name}-{ordinal}"
        volumes = list(((spec.get("template") or {}).get("spec") or {}).get("volumes") or [])
        for claim_template in spec.get("volumeClaimTemplates") or []:
            template_name = meta(claim_template)["name"]
            claim_name = f"{template_name}-{pod_name}"
            if self.get("persistentvolumeclaims", namespace, claim_name) is None:
                labels = dict(meta(claim_template).get("labels") or {})
                labels.update(((spec.get("selector") or {}).get("matchLabels")) or {})
                self.cluster.create(
                    self.rtype("persistentvolumeclaims"),
                    {
                        "apiVersion": "v1",
                        "kind": "PersistentVolumeClaim",
                        "metadata": {"name": claim_name, "namespace": namespace, "labels": labels},
                        "spec": copy.deepcopy(claim_template.get("spec") or {}),
                    },
                    namespace=namespace,
                )
            volumes = [v for v in volumes if v.get("name") != template_name]
            volumes.append({"name": template_name, "persistentVolumeClaim": {"claimName": claim_name}})
        changes: dict[str, Any] = {"hostname": pod_name}
        if spec.get("serviceName"):
            changes["subdomain"] = spec["serviceName"]
        if volumes:
            changes["volumes"] = volumes
        self._create_pod(
            stateful_set,
            spec.get("template") or {},
            name=pod_name,
            labels={
                REVISION_LABEL: update_revision,
                "statefulset.kubernetes.io/pod-name": pod_name,
                "apps.kubernetes.io/pod-index": str(ordinal),
            },
            spec_changes=changes,
        )

    # --- DaemonSet -------------------------------------------------------------------------------

    def _daemon_set(self, namespace: str, name: str) -> None:
        daemon_set = self._live("daemonsets", namespace, name)
        if daemon_set is None:
            return
        template = (daemon_set.get("spec") or {}).get("template") or {}
        digest = pod_template_hash(template)
        generation = str(meta(daemon_set).get("generation", 1))
        nodes = [n for n in self.items("nodes") if not meta(n).get("deletionTimestamp")]
        wanted = sorted(meta(n)["name"] for n in nodes if node_fits(template, n))
        by_node: dict[str, list[dict[str, Any]]] = {}
        for pod in self._owned_pods(daemon_set):
            by_node.setdefault(_target_node(pod), []).append(pod)
        for node, pods in by_node.items():
            stale = [p for p in pods if (meta(p).get("labels") or {}).get(REVISION_LABEL) != digest]
            surplus = [p for p in pods if p not in stale][1:]
            if node not in wanted:
                stale, surplus = pods, []
            for pod in [*stale, *surplus]:
                self.delete("pods", pod)
        for node in wanted:
            if any(
                (meta(p).get("labels") or {}).get(REVISION_LABEL) == digest for p in by_node.get(node, [])
            ):
                continue
            pod_spec = template.get("spec") or {}
            affinity = copy.deepcopy(pod_spec.get("affinity") or {})
            affinity.setdefault("nodeAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            }
            self._create_pod(
                daemon_set,
                template,
                labels={REVISION_LABEL: digest, "pod-template-generation": generation},
                spec_changes={"affinity": affinity},
            )
        pods = self._owned_pods(daemon_set)
        on_wanted = [p for p in pods if _target_node(p) in wanted]
        scheduled = [p for p in on_wanted if (p.get("spec") or {}).get("nodeName")]
        ready = sum(1 for p in on_wanted if is_ready(p))
        status = {
            "observedGeneration": meta(daemon_set).get("generation", 1),
            "desiredNumberScheduled": len(wanted),
            "currentNumberScheduled": len(scheduled),
            "updatedNumberScheduled": sum(
                1 for p in scheduled if (meta(p).get("labels") or {}).get(REVISION_LABEL) == digest
            ),
            "numberReady": ready,
            "numberAvailable": ready,
            "numberMisscheduled": len([p for p in pods if p not in on_wanted]),
        }
        if len(wanted) - ready:
            status["numberUnavailable"] = len(wanted) - ready
        self.write_status("daemonsets", daemon_set, status)

    # --- CronJob and Job -------------------------------------------------------------------------

    def _cron_job(self, namespace: str, name: str) -> None:
        cron_job = self._live("cronjobs", namespace, name)
        if cron_job is None:
            return
        uid = meta(cron_job)["uid"]
        jobs = [j for j in self.items("jobs", namespace) if controller_uid(j) == uid]
        status = dict(cron_job.get("status") or {})
        active = []
        for job in sorted(jobs, key=lambda j: meta(j)["name"]):
            conditions = (job.get("status") or {}).get("conditions") or []
            done = {c.get("type") for c in conditions if c.get("status") == "True"}
            if "Complete" in done:
                finished_at = (job.get("status") or {}).get("completionTime") or ""
                status["lastSuccessfulTime"] = max(status.get("lastSuccessfulTime") or "", finished_at)
            elif "Failed" not in done:
                active.append(
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": meta(job)["name"],
                        "namespace": namespace,
                        "uid": meta(job)["uid"],
                        "resourceVersion": meta(job).get("resourceVersion", ""),
                    }
                )
        if active:
            status["active"] = [{k: v for k, v in ref.items() if k != "resourceVersion"} for ref in active]
        else:
            status.pop("active", None)
        if not status.get("lastSuccessfulTime"):
            status.pop("lastSuccessfulTime", None)
        self.write_status("cronjobs", cron_job, status)

    def runner_runs(self, job: Mapping[str, Any]) -> bool:
        containers = (((job.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
            "containers"
        ) or []
        return len(containers) == 1 and self.runner_runs_image(str(containers[0].get("image") or ""))

    def _job(self, namespace: str, name: str) -> None:
        job = self._live("jobs", namespace, name)
        if job is None or self.runner_runs(job) or (job.get("spec") or {}).get("suspend"):
            return
        uid = meta(job)["uid"]
        pods = self._owned_pods(job)
        template = (job.get("spec") or {}).get("template") or {}
        if not pods:
            self._create_pod(
                job,
                template,
                labels={
                    "batch.kubernetes.io/controller-uid": uid,
                    "batch.kubernetes.io/job-name": name,
                    "controller-uid": uid,
                    "job-name": name,
                },
            )
            pods = self._owned_pods(job)
        old = job.get("status") or {}
        running = [p for p in pods if (p.get("status") or {}).get("phase") in ("Pending", "Running", None)]
        status = {
            **old,
            "active": len(running),
            "ready": sum(1 for p in running if is_ready(p)),
            "startTime": old.get("startTime") or rfc3339(),
            "terminating": 0,
            "uncountedTerminatedPods": {},
        }
        self.write_status("jobs", job, status)
