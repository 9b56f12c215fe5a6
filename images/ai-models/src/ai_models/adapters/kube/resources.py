"""Which API collections the controller follows, and how to list and watch any of them as plain dicts.

One `Resource` names a kind by its API version, kind and plural; `collection_lister` turns it into
the list function an `Informer` calls (and `kubernetes.watch.Watch` streams). Objects of every kind
come back as the API server's JSON, never as the client's generated models: the controller reads a
few fields of each, and building models for every object of a cluster-wide watch costs more than
the rest of the work.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s

from ai_models.names import API_GROUP, API_VERSION, ModelKind, Plural

Lister = Callable[..., Any]


@dataclasses.dataclass(frozen=True)
class Resource:
    api_version: str  # "v1", "batch/v1", "ai.deckhouse.io/v1alpha1"
    kind: str
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


MODELS = Resource(f"{API_GROUP}/{API_VERSION}", ModelKind.MODEL.value, Plural.MODELS.value, namespaced=True)
CLUSTER_MODELS = Resource(
    f"{API_GROUP}/{API_VERSION}", ModelKind.CLUSTER_MODEL.value, Plural.CLUSTER_MODELS.value, namespaced=False
)
MODEL_CATALOG_SOURCES = Resource(
    f"{API_GROUP}/{API_VERSION}", "ModelCatalogSource", Plural.MODEL_CATALOG_SOURCES.value, namespaced=False
)
JOBS = Resource("batch/v1", "Job", "jobs", namespaced=True)
SECRETS = Resource("v1", "Secret", "secrets", namespaced=True)
# Workload delivery: the four top-level workload kinds, shared claims and their volumes.
DEPLOYMENTS = Resource("apps/v1", "Deployment", "deployments", namespaced=True)
STATEFUL_SETS = Resource("apps/v1", "StatefulSet", "statefulsets", namespaced=True)
DAEMON_SETS = Resource("apps/v1", "DaemonSet", "daemonsets", namespaced=True)
CRON_JOBS = Resource("batch/v1", "CronJob", "cronjobs", namespaced=True)
PERSISTENT_VOLUME_CLAIMS = Resource("v1", "PersistentVolumeClaim", "persistentvolumeclaims", namespaced=True)
PERSISTENT_VOLUMES = Resource("v1", "PersistentVolume", "persistentvolumes", namespaced=False)
# NodeCache delivery: the Nodes of the cache (placement and their cache reports).
NODES = Resource("v1", "Node", "nodes", namespaced=False)
# NodeCache delivery: the node plugin follows the Pods bound to its node (prefetch).
PODS = Resource("v1", "Pod", "pods", namespaced=True)
# The api: who calls (TokenReview) and may they (SubjectAccessReview); both are created, never stored.
TOKEN_REVIEWS = Resource("authentication.k8s.io/v1", "TokenReview", "tokenreviews", namespaced=False)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io/v1", "SubjectAccessReview", "subjectaccessreviews", namespaced=False
)
# Workload delivery: a Deployment's ReplicaSets (the stale ones the delivery gate left behind).
REPLICA_SETS = Resource("apps/v1", "ReplicaSet", "replicasets", namespaced=True)
# The controller's Events, and the provisioner's Events of a shared claim.
EVENTS = Resource("v1", "Event", "events", namespaced=True)
# The storage prerequisites: the cluster's StorageClasses.
STORAGE_CLASSES = Resource("storage.k8s.io/v1", "StorageClass", "storageclasses", namespaced=False)


def _snake(kind: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


def collection_lister(api_client: Any, resource: Resource, namespace: str | None) -> Lister:
    """The list call of `resource` in `namespace` (None: every namespace, or a cluster-scoped kind).

    Core kinds go through the typed CoreV1Api (the custom-objects paths start with /apis), every
    other group through CustomObjectsApi, which builds /apis/<group>/<version>/... for any kind."""
    if namespace is not None and not resource.namespaced:
        raise ValueError(f"{resource} is cluster-scoped; it has no namespace {namespace!r}")
    if not resource.group:
        core = k8s.CoreV1Api(api_client)
        snake = _snake(resource.kind)
        if namespace is not None:
            return functools.partial(getattr(core, f"list_namespaced_{snake}"), namespace)
        if resource.namespaced:
            return getattr(core, f"list_{snake}_for_all_namespaces")  # type: ignore[no-any-return]
        return getattr(core, f"list_{snake}")  # type: ignore[no-any-return]
    custom = k8s.CustomObjectsApi(api_client)
    if namespace is not None:
        return functools.partial(
            custom.list_namespaced_custom_object, resource.group, resource.version, namespace, resource.plural
        )
    return functools.partial(
        custom.list_cluster_custom_object, resource.group, resource.version, resource.plural
    )
