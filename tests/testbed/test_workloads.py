"""The test bed's workload controllers: Deployments roll out ReplicaSets by pod-template hash with
revision history, StatefulSets, DaemonSets and CronJobs make their Pods (see testbed.workloads)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from kubeemu.pytest_fixtures import RunningEmulator
from testbed.simulation import ClusterSimulation
from testbed.volumes import StorageClassBehaviour
from testbed.workloads import (
    HASH_LABEL,
    REVISION,
    REVISION_HISTORY,
    WorkloadControllers,
    is_ready,
    pod_template_hash,
    revision,
    without_hash,
)

NAMESPACE = "default"
GATE = "example.com/hold"
RUNNER_IMAGE = "registry.example/runner@sha256:" + "b" * 64


@pytest.fixture
def simulation(kube_emulator: RunningEmulator) -> Iterator[ClusterSimulation]:
    with ClusterSimulation(
        kube_emulator,
        classes=[StorageClassBehaviour("shared", default=True)],
        runner_image=lambda image: image == RUNNER_IMAGE,
    ) as started:
        yield started


def template(image: str = "nginx:1.27", *, gates: tuple[str, ...] = (), app: str = "web") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": image}]}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {"metadata": {"labels": {"app": app}}, "spec": spec}


def workload(kind: str, name: str, pod_template: dict[str, Any], **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "batch/v1" if kind == "CronJob" else "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }
    if kind == "CronJob":
        body["spec"] = {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": pod_template}}, **spec}
        body["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    else:
        labels = pod_template["metadata"]["labels"]
        body["spec"] = {"selector": {"matchLabels": dict(labels)}, "template": pod_template, **spec}
    return body


def deployment_status(simulation: ClusterSimulation, name: str) -> dict[str, Any]:
    return (simulation.workloads.get("deployments", NAMESPACE, name) or {}).get("status") or {}


def wait_rolled_out(simulation: ClusterSimulation, name: str, replicas: int = 1) -> dict[str, Any]:
    """The Deployment as it is once only its newest ReplicaSet has Pods and they are all Ready."""
    workloads = simulation.workloads

    def done(deployment: dict[str, Any]) -> bool:
        status = deployment.get("status") or {}
        progressing = [c for c in status.get("conditions") or [] if c["type"] == "Progressing"]
        return (
            status.get("observedGeneration") == deployment["metadata"]["generation"]
            and status.get("updatedReplicas") == replicas
            and status.get("availableReplicas") == replicas
            and status.get("replicas") == replicas
            and bool(progressing)
            and progressing[0]["reason"] == "NewReplicaSetAvailable"
        )

    return workloads.wait_for(
        lambda: workloads.get("deployments", NAMESPACE, name) or {},
        done,
        what=f"Deployment {name} rolled out",
    )


def set_template(
    emulator: RunningEmulator, workloads: WorkloadControllers, kind: str, name: str, new: Any
) -> None:
    plural = kind.lower() + "s"
    current = workloads.get(plural, NAMESPACE, name)
    assert current is not None
    current["spec"]["template"] = new
    emulator.cluster.update(workloads.rtype(plural), current, namespace=NAMESPACE, name=name)


def remove_gates(emulator: RunningEmulator, pod: dict[str, Any]) -> None:
    status, _, body = emulator.request(
        "PATCH",
        f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}",
        body=[{"op": "remove", "path": "/spec/schedulingGates"}],
        content_type="application/json-patch+json",
    )
    assert status == 200, body


def test_pod_template_hash_is_stable_safe_and_follows_the_template_and_collisions() -> None:
    first = template()
    assert pod_template_hash(first) == pod_template_hash(copy.deepcopy(first))
    assert pod_template_hash(first) != pod_template_hash(template("nginx:1.28"))
    assert pod_template_hash(first) != pod_template_hash(first, collision_count=1)
    assert pod_template_hash(first, collision_count=0) == pod_template_hash(first)
    digest = pod_template_hash(first)
    assert 1 <= len(digest) <= 10
    assert set(digest) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_a_template_compares_equal_to_its_replica_sets_whatever_empty_metadata_it_has() -> None:
    bare = {"spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}}
    hashed = {"metadata": {"labels": {HASH_LABEL: "abc"}}, **bare}
    assert without_hash(hashed) == without_hash(bare) == without_hash({"metadata": {}, **bare}) == bare
    assert without_hash(template()) == template()
    assert without_hash(template()) != without_hash(template(app="other"))


def test_a_deployment_gets_one_replica_set_named_by_its_template_hash_and_running_pods(
    simulation: ClusterSimulation, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(workload("Deployment", "web", template(), replicas=2))
    deployment = wait_rolled_out(simulation, "web", replicas=2)
    (replica_set,) = simulation.workloads.replica_sets("web")
    digest = pod_template_hash(template())
    assert replica_set["metadata"]["name"] == f"web-{digest}"
    assert replica_set["metadata"]["labels"] == {"app": "web", HASH_LABEL: digest}
    assert replica_set["spec"]["selector"]["matchLabels"] == {"app": "web", HASH_LABEL: digest}
    assert replica_set["metadata"]["annotations"][REVISION] == "1"
    assert replica_set["metadata"]["ownerReferences"][0]["uid"] == deployment["metadata"]["uid"]
    assert deployment["metadata"]["annotations"][REVISION] == "1"
    pods = simulation.workloads.pods_of("Deployment", "web")
    assert len(pods) == 2
    assert all(p["metadata"]["name"].startswith(f"web-{digest}-") for p in pods)
    assert all(p["metadata"]["labels"][HASH_LABEL] == digest and is_ready(p) for p in pods)
    conditions = {c["type"]: c for c in deployment["status"]["conditions"]}
    assert conditions["Available"]["reason"] == "MinimumReplicasAvailable"
    assert deployment["status"]["readyReplicas"] == 2
    listed = kube_emulator.kubectl("get", "replicasets", "-o", "name").stdout.split()
    assert listed == [f"replicaset.apps/web-{digest}"]


def test_a_template_change_makes_a_new_replica_set_and_the_old_one_scales_to_zero(
    simulation: ClusterSimulation, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(workload("Deployment", "web", template()))
    wait_rolled_out(simulation, "web")
    set_template(kube_emulator, simulation.workloads, "Deployment", "web", template("nginx:1.28"))
    deployment = wait_rolled_out(simulation, "web")
    old, new = simulation.workloads.replica_sets("web")
    assert (revision(old), revision(new)) == (1, 2)
    assert old["spec"]["replicas"] == 0
    assert new["metadata"]["name"] == f"web-{pod_template_hash(template('nginx:1.28'))}"
    assert deployment["metadata"]["annotations"][REVISION] == "2"
    (pod,) = simulation.workloads.pods_of("Deployment", "web")
    assert pod["spec"]["containers"][0]["image"] == "nginx:1.28"


def test_the_old_replica_set_keeps_its_pods_while_the_new_pods_are_not_ready(
    simulation: ClusterSimulation, kube_emulator: RunningEmulator
) -> None:
    workloads = simulation.workloads
    kube_emulator.cluster.apply(workload("Deployment", "web", template()))
    wait_rolled_out(simulation, "web")
    set_template(kube_emulator, workloads, "Deployment", "web", template(gates=(GATE,)))
    gated = workloads.wait_for(
        lambda: [p for p in workloads.pods_of("Deployment", "web") if p["spec"].get("schedulingGates")],
        bool,
        what="the new ReplicaSet's gated Pod",
    )
    status = workloads.wait_for(
        lambda: deployment_status(simulation, "web"),
        lambda s: s.get("replicas") == 2 and s.get("updatedReplicas") == 1,
        what="both ReplicaSets counted",
    )
    assert status["availableReplicas"] == 1
    progressing = next(c for c in status["conditions"] if c["type"] == "Progressing")
    assert progressing["reason"] in ("NewReplicaSetCreated", "ReplicaSetUpdated")
    old, _ = workloads.replica_sets("web")
    assert old["spec"]["replicas"] == 1
    remove_gates(kube_emulator, gated[0])
    wait_rolled_out(simulation, "web")
    old, new = workloads.replica_sets("web")
    assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (0, 1)


def test_revision_history_limit_deletes_the_oldest_idle_replica_sets(
    simulation: ClusterSimulation, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(workload("Deployment", "web", template(), revisionHistoryLimit=1))
    wait_rolled_out(simulation, "web")
    for image in ("nginx:1.28", "nginx:1.29"):
        set_template(kube_emulator, simulation.workloads, "Deployment", "web", template(image))
        wait_rolled_out(simulation, "web")
    sets = simulation.workloads.wait_for(
        lambda: simulation.workloads.replica_sets("web"),
        lambda found: len(found) == 2,
        what="one old ReplicaSet kept besides the current one",
    )
    assert [revision(rs) for rs in sets] == [2, 3]
    assert sets[1]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.29"


def test_going_back_to_an_old_template_reuses_its_replica_set_with_the_next_revision(
    simulation: ClusterSimulation, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(workload("Deployment", "web", template()))
    wait_rolled_out(simulation, "web")
    set_template(kube_emulator, simulation.workloads, "Deployment", "web", template("nginx:1.28"))
    wait_rolled_out(simulation, "web")
    set_template(kube_emulator, simulation.workloads, "Deployment", "web", template())
    deployment = wait_rolled_out(simulation, "web")
    sets = simulation.workloads.replica_sets("web")
    assert len(sets) == 2
    newest = sets[-1]
    assert newest["metadata"]["name"] == f"web-{pod_template_hash(template())}"
    assert revision(newest) == 3
    assert newest["metadata"]["annotations"][REVISION_HISTORY] == "1"
    assert deployment["metadata"]["annotations"][REVISION] == "3"


def test_a_stale_replica_set_deleted_by_someone_else_is_not_recreated(
    simulation: ClusterSimulation, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(workload("Deployment", "web", template()))
    wait_rolled_out(simulation, "web")
    set_template(kube_emulator, simulation.workloads, "Deployment", "web", template("nginx:1.28"))
    wait_rolled_out(simulation, "web")
    old, new = simulation.workloads.replica_sets("web")
    kube_emulator.kubectl("delete", "replicaset", old["metadata"]["name"])
    # Another change of the Deployment makes the controller look again; the deleted one stays gone.
    scaled = simulation.workloads.get("deployments", NAMESPACE, "web") or {}
    scaled["spec"]["replicas"] = 2
    kube_emulator.cluster.update(
        simulation.workloads.rtype("deployments"), scaled, namespace=NAMESPACE, name="web"
    )
    wait_rolled_out(simulation, "web", replicas=2)
    assert [rs["metadata"]["name"] for rs in simulation.workloads.replica_sets("web")] == [
        new["metadata"]["name"]
    ]


def test_a_statefulset_creates_ordinal_pods_one_after_the_other_with_their_claims(
    simulation: ClusterSimulation, kube_emulator: RunningEmulator
) -> None:
    workloads = simulation.workloads
    pod_template = template(app="db")
    pod_template["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/var/lib/db"}]
    claim_template = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    body = workload("StatefulSet", "db", pod_template, replicas=2, serviceName="db")
    body["spec"]["volumeClaimTemplates"] = [claim_template]
    kube_emulator.cluster.apply(body)
    status = workloads.wait_for(
        lambda: (workloads.get("statefulsets", NAMESPACE, "db") or {}).get("status") or {},
        lambda s: s.get("readyReplicas") == 2,
        what="both StatefulSet Pods Ready",
    )
    pods = workloads.pods_of("StatefulSet", "db")
    assert [p["metadata"]["name"] for p in pods] == ["db-0", "db-1"]
    assert pods[0]["metadata"]["creationTimestamp"] <= pods[1]["metadata"]["creationTimestamp"]
    assert pods[1]["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "db-1"
    assert pods[1]["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}}
    ]
    assert (pods[1]["spec"]["hostname"], pods[1]["spec"]["subdomain"]) == ("db-1", "db")
    assert status["currentRevision"] == status["updateRevision"]
    assert simulation.volumes.wait_for_claim("data-db-0")["spec"]["storageClassName"] == "shared"
    (mount,) = simulation.pod_mounts(pods[1])
    assert (mount.mount_path, mount.host_path) == (
        "/var/lib/db",
        simulation.volumes.volume_directory("data-db-1"),
    )


def test_a_gated_statefulset_pod_holds_back_the_next_ordinal_and_a_rolling_update(
    simulation: ClusterSimulation, kube_emulator: RunningEmulator
) -> None:
    workloads = simulation.workloads
    kube_emulator.cluster.apply(workload("StatefulSet", "db", template(app="db", gates=(GATE,)), replicas=2))
    (first,) = workloads.wait_for(lambda: workloads.pods_of("StatefulSet", "db"), bool, what="db-0")
    set_template(kube_emulator, workloads, "StatefulSet", "db", template("nginx:1.28", app="db"))
    status = workloads.wait_for(
        lambda: (workloads.get("statefulsets", NAMESPACE, "db") or {}).get("status") or {},
        lambda s: s.get("observedGeneration") == 2,
        what="the new revision observed",
    )
    assert status["updatedReplicas"] == 0
    assert [p["metadata"]["uid"] for p in workloads.pods_of("StatefulSet", "db")] == [
        first["metadata"]["uid"]
    ]
    remove_gates(kube_emulator, first)
    workloads.wait_for(
        lambda: workloads.pods_of("StatefulSet", "db"),
        lambda pods: (
            len(pods) == 2
            and all(is_ready(p) and p["spec"]["containers"][0]["image"] == "nginx:1.28" for p in pods)
        ),
        what="both Pods on the new template",
    )


def test_a_daemonset_runs_one_pod_per_node_and_follows_the_nodes(
    simulation: ClusterSimulation, kube_emulator: RunningEmulator
) -> None:
    workloads = simulation.workloads
    simulation.scheduler.add_node("node-b")
    kube_emulator.cluster.apply(workload("DaemonSet", "agent", template(app="agent")))

    def on_nodes() -> list[str]:
        return sorted(
            p["spec"].get("nodeName", "") for p in workloads.pods_of("DaemonSet", "agent") if is_ready(p)
        )

    workloads.wait_for(on_nodes, lambda nodes: nodes == ["kubeemu-node", "node-b"], what="a Pod on each node")
    simulation.scheduler.add_node("node-c")
    workloads.wait_for(on_nodes, lambda nodes: len(nodes) == 3, what="a Pod on the new node")
    kube_emulator.kubectl("delete", "node", "node-b")
    workloads.wait_for(on_nodes, lambda nodes: nodes == ["kubeemu-node", "node-c"], what="node-b's Pod gone")
    status = workloads.wait_for(
        lambda: (workloads.get("daemonsets", NAMESPACE, "agent") or {}).get("status") or {},
        lambda s: s.get("numberReady") == 2 and s.get("desiredNumberScheduled") == 2,
        what="the DaemonSet's status",
    )
    assert status["updatedNumberScheduled"] == 2


def test_a_triggered_cronjob_makes_a_job_whose_pod_runs(
    simulation: ClusterSimulation, kube_emulator: RunningEmulator
) -> None:
    workloads = simulation.workloads
    kube_emulator.cluster.apply(workload("CronJob", "report", template(app="report")))
    job_name = workloads.trigger("report")
    assert job_name.startswith("report-")
    job = workloads.get("jobs", NAMESPACE, job_name)
    assert job is not None
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    (pod,) = workloads.wait_for(
        lambda: [p for p in workloads.pods_of("Job", job_name) if is_ready(p)],
        bool,
        what="the Job's Pod running",
    )
    assert pod["metadata"]["labels"]["job-name"] == job_name
    cron_status = workloads.wait_for(
        lambda: (workloads.get("cronjobs", NAMESPACE, "report") or {}).get("status") or {},
        lambda s: bool(s.get("active")) and bool(s.get("lastScheduleTime")),
        what="the CronJob's active Job",
    )
    assert cron_status["active"][0]["name"] == job_name
    assert workloads.trigger("report") != job_name


def test_jobs_of_the_runner_image_get_no_pods_from_the_simulation(
    simulation: ClusterSimulation, kube_emulator: RunningEmulator
) -> None:
    workloads = simulation.workloads
    kube_emulator.cluster.apply(workload("CronJob", "module", template(RUNNER_IMAGE, app="module")))
    kube_emulator.cluster.apply(workload("CronJob", "other", template(app="other")))
    module_job, other_job = workloads.trigger("module"), workloads.trigger("other")
    workloads.wait_for(lambda: workloads.pods_of("Job", other_job), bool, what="the other Job's Pod")
    assert workloads.pods_of("Job", module_job) == []
