"""Typed writes of workload delivery's own objects in a workload's namespace: shared claims, the
materialize Job and its token Secret.

A create that finds the object there already (an earlier pass made it) is not an error; the
caller's next pass reads it from its cache. A refused write raises `KubeError`, which keeps the
status, the Status reason and the invalid fields, never the server's text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import (
    CRON_JOBS,
    DAEMON_SETS,
    DEPLOYMENTS,
    JOBS,
    PERSISTENT_VOLUME_CLAIMS,
    PODS,
    STATEFUL_SETS,
    Resource,
)
from ai_models.adapters.kube.secrets import Secrets

# What can mount a claim in its namespace (the stale rule's users).
MOUNTING: Final[tuple[Resource, ...]] = (PODS, JOBS, DEPLOYMENTS, STATEFUL_SETS, DAEMON_SETS, CRON_JOBS)


class DeliveryObjects:
    def __init__(self, api_client: Any) -> None:
        self._claims = Objects(api_client, PERSISTENT_VOLUME_CLAIMS)
        self._jobs = Objects(api_client, JOBS)
        self._secrets = Secrets(api_client)
        self._mounting = tuple(Objects(api_client, resource) for resource in MOUNTING)

    def create_claim(self, claim: Mapping[str, Any]) -> None:
        self._claims.create(claim, exists_ok=True)

    def patch_claim(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """A merge of `patch` (metadata only) into the claim."""
        self._claims.patch(name, patch, namespace)

    def delete_claim(self, namespace: str, name: str, *, uid: str) -> bool:
        """Delete the claim if it is still the object with `uid`; False when it is gone or another
        object has the name now (a claim made since under the same name is not the one judged)."""
        return self._claims.delete(name, namespace, uid=uid)

    def mounting_objects(self, namespace: str) -> Iterator[dict[str, Any]]:
        """Every Pod, Job, Deployment, StatefulSet, DaemonSet and CronJob of `namespace`, each with its
        `kind` set, page by page; raises `KubeError` on any failure: a partial list must not make a
        claim look unused."""
        for objects in self._mounting:
            yield from objects.list_all(namespace)

    def create_job(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """Create the Job; the Job as stored (with its uid), also when it existed already."""
        meta = job["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        created = self._jobs.create(job, exists_ok=True) or self._jobs.get(name, namespace)
        if created is None:  # there a moment ago, gone now: as if the read had answered 404
            raise KubeError(verb="read", kind=JOBS.kind, name=name, namespace=namespace, status=404)
        return created

    def put_secret(self, secret: Mapping[str, Any]) -> None:
        """Create the Secret, or replace one of that name."""
        self._secrets.put(secret)

    def delete_job(self, namespace: str, name: str) -> None:
        """Delete the Job, its Pods and (by ownership) its token Secret; gone already is fine."""
        self._jobs.delete(name, namespace, propagation="Background")
