"""The orphan pass (D152) against the API emulator: a shared claim the module made whose workload is
gone is marked, then deleted a grace period later; anything of its namespace that mounts it keeps
it; a claim the module did not make, or whose workload exists, is never touched."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from ai_models.adapters.kube.claims import DeliveryObjects
from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.resources import DEPLOYMENTS, PERSISTENT_VOLUME_CLAIMS
from ai_models.controller.delivery.informers import CLAIM_SELECTOR
from ai_models.controller.delivery.orphans import OrphanedClaims, OrphanPassResult
from ai_models.domain.conditions import timestamp
from ai_models.names import (
    MODULE,
    MODULE_LABEL,
    OWNER_UID_LABEL,
    SHARED_PVC_LABEL,
    SHARED_PVC_LABEL_VALUE,
    SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION,
)
from support.eventually import eventually

NAMESPACE = "team-a"
GONE = "0b8c3f3e-1111-4a5e-9d41-5c2f0e7f6a10"  # the uid of a workload deleted without its claim
GRACE = dt.timedelta(hours=1)
NOW = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.UTC)
LONG_AGO = timestamp(NOW - dt.timedelta(days=2))
MOMENTS_AGO = timestamp(NOW - dt.timedelta(minutes=10))
SINCE = SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION


class World:
    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self.core = k8s.CoreV1Api(api_client)
        self.apps = k8s.AppsV1Api(api_client)
        self.batch = k8s.BatchV1Api(api_client)
        for namespace in (NAMESPACE, "team-b"):
            self.core.create_namespace({"metadata": {"name": namespace}})
        self.informers: list[Informer] = []

    def claim(
        self,
        name: str,
        *,
        namespace: str = NAMESPACE,
        owner: str = GONE,
        since: str | None = None,
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        made = {SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE, MODULE_LABEL: MODULE, OWNER_UID_LABEL: owner}
        metadata: dict[str, Any] = {
            "name": name,
            "labels": made if labels is None else labels,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": "web",
                    "uid": owner,
                    "controller": True,
                }
            ],
        }
        if since is not None:
            metadata["annotations"] = {SINCE: since}
        body = {
            "metadata": metadata,
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        }
        created = self.core.create_namespaced_persistent_volume_claim(namespace, body)
        return dict(created.to_dict())

    def pod_spec(self, claim: str) -> dict[str, Any]:
        return {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}],
            "volumes": [{"name": "model", "persistentVolumeClaim": {"claimName": claim}}],
        }

    def mount_in(self, kind: str, claim: str, *, namespace: str = NAMESPACE, owner: Any = None) -> Any:
        """A `kind` of `namespace` whose pod template (or spec, for a Pod) mounts `claim`."""
        meta: dict[str, Any] = {"name": f"user-{kind.lower()}", "labels": {"app": "user"}}
        if owner is not None:
            meta["ownerReferences"] = [owner]
        template = {"metadata": {"labels": {"app": "user"}}, "spec": self.pod_spec(claim)}
        selector = {"matchLabels": {"app": "user"}}
        if kind == "Pod":
            return self.core.create_namespaced_pod(
                namespace, {"metadata": meta, "spec": self.pod_spec(claim)}
            )
        if kind == "Job":
            return self.batch.create_namespaced_job(
                namespace, {"metadata": meta, "spec": {"template": template}}
            )
        if kind == "CronJob":
            schedule = {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template}}}
            return self.batch.create_namespaced_cron_job(namespace, {"metadata": meta, "spec": schedule})
        create = {
            "Deployment": self.apps.create_namespaced_deployment,
            "StatefulSet": self.apps.create_namespaced_stateful_set,
            "DaemonSet": self.apps.create_namespaced_daemon_set,
        }[kind]
        spec: dict[str, Any] = {"selector": selector, "template": template}
        if kind == "StatefulSet":
            spec["serviceName"] = "user"
        return create(namespace, {"metadata": meta, "spec": spec})

    def informer(self, resource: Any, **kwargs: Any) -> Informer:
        informer = Informer(self.api_client, resource, **kwargs).start()
        self.informers.append(informer)
        assert informer.wait_synced(10)
        return informer

    def run(self, *, now: dt.datetime = NOW, workloads: list[Informer] | None = None) -> OrphanPassResult:
        claims = self.informer(PERSISTENT_VOLUME_CLAIMS, label_selector=CLAIM_SELECTOR)
        orphans = OrphanedClaims(
            objects=DeliveryObjects(self.api_client),
            claims=claims,
            workloads=workloads if workloads is not None else [self.informer(DEPLOYMENTS)],
            grace=GRACE,
            interval=dt.timedelta(minutes=15),
            clock=lambda: now,
        )
        return orphans.run()

    def claims(self, namespace: str = NAMESPACE) -> dict[str, str | None]:
        """name -> its unreferenced-since mark."""
        items = self.core.list_namespaced_persistent_volume_claim(namespace).items
        return {item.metadata.name: (item.metadata.annotations or {}).get(SINCE) for item in items}

    def close(self) -> None:
        for informer in self.informers:
            informer.stop()


@pytest.fixture
def world(kube_api_client: Any) -> Iterator[World]:
    made = World(kube_api_client)
    yield made
    made.close()


def test_a_first_pass_only_marks_a_claim_whose_workload_is_gone(world: World) -> None:
    world.claim("orphan")
    result = world.run()
    assert result.marked == [f"{NAMESPACE}/orphan"]
    assert result.deleted == []
    assert world.claims() == {"orphan": timestamp(NOW)}


def test_a_claim_marked_a_grace_period_ago_is_deleted_on_a_later_pass(world: World) -> None:
    world.claim("orphan", since=LONG_AGO)
    world.claim("recent", since=MOMENTS_AGO)
    result = world.run()
    assert result.deleted == [f"{NAMESPACE}/orphan"]
    assert world.claims() == {"recent": MOMENTS_AGO}
    # The next pass, a grace period after the mark: the recent one goes too.
    assert world.run(now=NOW + GRACE).deleted == [f"{NAMESPACE}/recent"]
    assert world.claims() == {}


@pytest.mark.parametrize("kind", ["Pod", "Job", "Deployment", "StatefulSet", "DaemonSet", "CronJob"])
def test_anything_of_the_namespace_that_mounts_the_claim_keeps_it_and_takes_the_mark_off(
    world: World, kind: str
) -> None:
    world.claim("orphan", since=LONG_AGO)
    world.mount_in(kind, "orphan")
    result = world.run()
    assert (result.deleted, result.unmarked) == ([], [f"{NAMESPACE}/orphan"])
    assert world.claims() == {"orphan": None}


def test_a_mount_in_another_namespace_does_not_count(world: World) -> None:
    world.claim("orphan", since=LONG_AGO)
    world.mount_in("Pod", "orphan", namespace="team-b")
    assert world.run().deleted == [f"{NAMESPACE}/orphan"]


def test_the_claims_own_materialize_job_and_its_pod_do_not_keep_it(world: World) -> None:
    claim = world.claim("orphan", since=LONG_AGO)
    owned_by_claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "name": "orphan",
        "uid": claim["metadata"]["uid"],
    }
    job = world.mount_in("Job", "orphan", owner=owned_by_claim)
    job_owner = {"apiVersion": "batch/v1", "kind": "Job", "name": job.metadata.name, "uid": job.metadata.uid}
    world.mount_in("Pod", "orphan", owner=job_owner)
    assert world.run().deleted == [f"{NAMESPACE}/orphan"]


def test_a_claim_the_module_did_not_make_is_never_touched(world: World) -> None:
    world.claim(
        "labelled", since=LONG_AGO, labels={SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE, MODULE_LABEL: MODULE}
    )
    world.claim(
        "other-owner",
        since=LONG_AGO,
        labels={
            SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE,
            MODULE_LABEL: MODULE,
            OWNER_UID_LABEL: "someone-else",
        },
    )
    result = world.run()
    assert (result.marked, result.unmarked, result.deleted) == ([], [], [])
    assert world.claims() == {"labelled": LONG_AGO, "other-owner": LONG_AGO}


def test_a_claim_whose_workload_exists_is_left_to_its_reconcile_even_when_the_cache_lags(
    world: World,
) -> None:
    web = world.mount_in("Deployment", "some-other-claim")
    world.claim("owned", owner=web.metadata.uid, since=LONG_AGO)
    # The workloads' cache is empty (not synced yet): the claim looks orphaned until the API's own
    # list of its namespace shows the owner. Its mark is the reconcile's (D100): kept as it is.
    result = world.run(workloads=[])
    assert (result.marked, result.unmarked, result.deleted) == ([], [], [])
    assert world.claims() == {"owned": LONG_AGO}


def test_a_mark_nobody_can_read_or_in_the_future_is_written_again_and_nothing_is_deleted(
    world: World,
) -> None:
    world.claim("garbled", since="yesterday")
    world.claim("future", since=timestamp(NOW + dt.timedelta(days=1)))
    result = world.run()
    assert sorted(result.marked) == [f"{NAMESPACE}/future", f"{NAMESPACE}/garbled"]
    assert result.deleted == []
    assert world.claims() == {"garbled": timestamp(NOW), "future": timestamp(NOW)}


def test_a_claim_being_deleted_is_left_to_its_deletion(world: World) -> None:
    world.claim("going", since=LONG_AGO)
    world.core.patch_namespaced_persistent_volume_claim(
        "going", NAMESPACE, {"metadata": {"finalizers": ["example.com/hold"]}}
    )
    world.core.delete_namespaced_persistent_volume_claim("going", NAMESPACE)
    result = world.run()
    assert (result.marked, result.unmarked, result.deleted) == ([], [], [])
    assert world.claims() == {"going": LONG_AGO}


def test_the_leaders_loop_runs_a_pass_each_interval_and_stops_when_told(world: World) -> None:
    world.claim("orphan")
    orphans = OrphanedClaims(
        objects=DeliveryObjects(world.api_client),
        claims=world.informer(PERSISTENT_VOLUME_CLAIMS, label_selector=CLAIM_SELECTOR),
        workloads=[world.informer(DEPLOYMENTS)],
        grace=GRACE,
        interval=dt.timedelta(seconds=0.05),
        clock=lambda: NOW,
    )
    stop = threading.Event()
    loop = threading.Thread(target=orphans.loop, args=(stop,))
    loop.start()
    try:
        eventually(lambda: world.claims() == {"orphan": timestamp(NOW)}, timeout=10, message="the mark")
    finally:
        stop.set()
        loop.join(timeout=5)
    assert not loop.is_alive()
