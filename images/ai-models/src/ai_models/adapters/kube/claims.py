"""Typed writes of workload delivery's own objects in a workload's namespace: shared claims, the
materialize Job and its token Secret.

A create that finds the object there already (an earlier pass made it) is not an error; the
caller's next pass reads it from its cache. A refused write raises `jobs.ObjectRefused`, which keeps
the status, the Status reason and the invalid fields, never the server's text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from ai_models.adapters.kube.jobs import ObjectRefused

PAGE_SIZE: Final = 500
# What can mount a claim in its namespace (the stale rule's users): (kind, API class, method suffix).
_MOUNTING: Final = (
    ("Pod", k8s.CoreV1Api, "pod"),
    ("Job", k8s.BatchV1Api, "job"),
    ("Deployment", k8s.AppsV1Api, "deployment"),
    ("StatefulSet", k8s.AppsV1Api, "stateful_set"),
    ("DaemonSet", k8s.AppsV1Api, "daemon_set"),
    ("CronJob", k8s.BatchV1Api, "cron_job"),
)


class DeliveryObjects:
    def __init__(self, api_client: Any, *, timeout: tuple[float, float] = (3, 30)) -> None:
        self._api_client = api_client
        self._core = k8s.CoreV1Api(api_client)
        self._batch = k8s.BatchV1Api(api_client)
        self._timeout = timeout

    def create_claim(self, claim: Mapping[str, Any]) -> None:
        meta = claim["metadata"]
        try:
            self._core.create_namespaced_persistent_volume_claim(
                meta["namespace"], dict(claim), _request_timeout=self._timeout, _preload_content=False
            ).release_conn()
        except ApiException as error:
            if error.status != 409:
                raise ObjectRefused.of(
                    "create", "PersistentVolumeClaim", meta["name"], meta["namespace"], error
                ) from error

    def patch_claim(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """A merge of `patch` (metadata only) into the claim."""
        try:
            self._core.patch_namespaced_persistent_volume_claim(
                name, namespace, dict(patch), _request_timeout=self._timeout, _preload_content=False
            ).release_conn()
        except ApiException as error:
            raise ObjectRefused.of("patch", "PersistentVolumeClaim", name, namespace, error) from error

    def delete_claim(self, namespace: str, name: str, *, uid: str) -> bool:
        """Delete the claim if it is still the object with `uid`; False when it is gone or another
        object has the name now (a claim made since under the same name is not the one judged)."""
        try:
            self._core.delete_namespaced_persistent_volume_claim(
                name,
                namespace,
                body={"preconditions": {"uid": uid}},
                _request_timeout=self._timeout,
                _preload_content=False,
            ).release_conn()
        except ApiException as error:
            if error.status in (404, 409):
                return False
            raise ObjectRefused.of("delete", "PersistentVolumeClaim", name, namespace, error) from error
        return True

    def mounting_objects(self, namespace: str) -> Iterator[dict[str, Any]]:
        """Every Pod, Job, Deployment, StatefulSet, DaemonSet and CronJob of `namespace`, each with its
        `kind` set, page by page (500 a page); raises `ApiException` on any failure: a partial list
        must not make a claim look unused."""
        for kind, api, method in _MOUNTING:
            list_page = getattr(api(self._api_client), f"list_namespaced_{method}")
            token: str | None = None
            while True:
                kwargs: dict[str, Any] = {"limit": PAGE_SIZE, "_request_timeout": self._timeout}
                if token:
                    kwargs["_continue"] = token
                response = list_page(namespace, _preload_content=False, **kwargs)
                try:
                    page = json.loads(response.data)
                finally:
                    response.release_conn()
                for item in page.get("items") or ():
                    if isinstance(item, dict):
                        yield {**item, "kind": kind}
                token = (page.get("metadata") or {}).get("continue")
                if not token:
                    break

    def create_job(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """Create the Job; the Job as stored (with its uid), also when it existed already."""
        meta = job["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        try:
            response = self._batch.create_namespaced_job(
                namespace, dict(job), _request_timeout=self._timeout, _preload_content=False
            )
        except ApiException as error:
            if error.status != 409:
                raise ObjectRefused.of("create", "Job", name, namespace, error) from error
            response = self._batch.read_namespaced_job(
                name, namespace, _request_timeout=self._timeout, _preload_content=False
            )
        try:
            created: dict[str, Any] = json.loads(response.data)
        finally:
            response.release_conn()
        return created

    def put_secret(self, secret: Mapping[str, Any]) -> None:
        """Create the Secret, or replace one of that name."""
        meta = secret["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        try:
            self._core.create_namespaced_secret(
                namespace, dict(secret), _request_timeout=self._timeout, _preload_content=False
            ).release_conn()
        except ApiException as error:
            if error.status != 409:
                raise ObjectRefused.of("create", "Secret", name, namespace, error) from error
            try:
                self._core.replace_namespaced_secret(
                    name, namespace, dict(secret), _request_timeout=self._timeout, _preload_content=False
                ).release_conn()
            except ApiException as replace_error:
                raise ObjectRefused.of("update", "Secret", name, namespace, replace_error) from error

    def delete_job(self, namespace: str, name: str) -> None:
        """Delete the Job, its Pods and (by ownership) its token Secret; gone already is fine."""
        try:
            self._batch.delete_namespaced_job(
                name,
                namespace,
                propagation_policy="Background",
                _request_timeout=self._timeout,
                _preload_content=False,
            ).release_conn()
        except ApiException as error:
            if error.status != 404:
                raise
