"""Who may mount which artifact on this node: one pure decision, no I/O (D105).

A NodePublishVolume request carries two kinds of keys in its volume context. kubelet writes the pod's
namespace, name, uid and `ephemeral` (podInfoOnMount; it overwrites any a pod wrote), so those are
facts. The model, clustermodel and digest attributes come from the pod's template, which the
controller writes but any user who can create a pod can write too: they are hints. The decision
therefore reads the Model in the namespace kubelet names (a ClusterModel is readable by every
namespace) and grants the mount only when that object exists, is Ready and publishes exactly the
requested digest. The prefetcher uses the same rules with the Pod object's own namespace, which the
API server guarantees the same way.

Each step raises `Refused` with the gRPC-shaped code the Node service answers with: a request
kubelet could not have sent is INVALID_ARGUMENT, a well-formed request for something the pod may not
have is PERMISSION_DENIED. Messages name the pod, the model and what differs; they never echo more of
a hostile attribute than a bounded prefix.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping

from ai_models.domain.artifacts.layout import is_artifact_digest
from ai_models.domain.delivery.contract import is_object_name
from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    KUBELET_EPHEMERAL,
    KUBELET_POD_NAME,
    KUBELET_POD_NAMESPACE,
    KUBELET_POD_UID,
    NODE_CACHE_DRIVER,
    VOLUME_CLUSTER_MODEL_ATTRIBUTE,
    VOLUME_DIGEST_ATTRIBUTE,
    VOLUME_MODEL_ATTRIBUTE,
    ModelKind,
    ModelPhase,
)

# Object names are DNS-1123 subdomains (253 characters), namespaces DNS-1123 labels (63); a pod uid
# is a UUID. Anything else did not come from the API server.
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_UID = re.compile(r"[0-9a-fA-F-]{1,64}")
_SHOWN = 80  # characters of a hostile value a message may quote


class Refusal(enum.Enum):
    """The gRPC status a refusal maps to (names of `grpc.StatusCode`, kept free of grpc here)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    PERMISSION_DENIED = "PERMISSION_DENIED"


class Refused(Exception):
    def __init__(self, code: Refusal, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclasses.dataclass(frozen=True)
class PodIdentity:
    """The pod a volume is for, as kubelet (or the API server) states it."""

    namespace: str
    name: str
    uid: str

    def describe(self) -> str:
        return f"pod {self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True)
class ModelWanted:
    """What the volume attributes ask for, resolved against the trusted namespace."""

    key: ModelKey
    digest: str


@dataclasses.dataclass(frozen=True)
class Grant:
    """A mount this node may serve: the pod, the object that allowed it and the artifact's digest."""

    pod: PodIdentity
    key: ModelKey
    digest: str


def kubelet_pod(volume_context: Mapping[str, str]) -> PodIdentity:
    """The pod from the keys kubelet writes; a request without them did not come from kubelet for an
    inline volume of this driver (the CSIDriver sets podInfoOnMount)."""
    keys = (KUBELET_POD_NAMESPACE, KUBELET_POD_NAME, KUBELET_POD_UID)
    missing = [key for key in keys if not volume_context.get(key)]
    if missing:
        raise Refused(
            Refusal.INVALID_ARGUMENT,
            f"the volume context lacks {', '.join(missing)}, which kubelet writes for every inline volume "
            "of a CSIDriver with podInfoOnMount: only kubelet may call this plugin; check that the "
            f"CSIDriver {NODE_CACHE_DRIVER} has podInfoOnMount: true",
        )
    namespace = volume_context[KUBELET_POD_NAMESPACE]
    name = volume_context[KUBELET_POD_NAME]
    uid = volume_context[KUBELET_POD_UID]
    if not _is_label(namespace) or not is_object_name(name) or _UID.fullmatch(uid) is None:
        raise Refused(
            Refusal.INVALID_ARGUMENT,
            f"the kubelet keys name no valid pod (namespace {_shown(namespace)!r}, name {_shown(name)!r}, "
            f"uid {_shown(uid)!r}): only kubelet may call this plugin",
        )
    pod = PodIdentity(namespace=namespace, name=name, uid=uid)
    ephemeral = volume_context.get(KUBELET_EPHEMERAL, "")
    if ephemeral != "true":
        raise Refused(
            Refusal.PERMISSION_DENIED,
            f"{pod.describe()}: the volume is not an inline ephemeral volume ({KUBELET_EPHEMERAL}="
            f"{_shown(ephemeral)!r}); this driver serves only the inline volumes ai-models writes into "
            "pod templates, never a PersistentVolume",
        )
    return pod


def wanted_model(attributes: Mapping[str, str], *, namespace: str, pod: str) -> ModelWanted:
    """The model and digest the attributes name. `namespace` is the trusted one (kubelet's or the Pod
    object's): a Model is always looked up there, whatever else the attributes say. `pod` names the
    pod in messages."""
    model = attributes.get(VOLUME_MODEL_ATTRIBUTE, "")
    cluster_model = attributes.get(VOLUME_CLUSTER_MODEL_ATTRIBUTE, "")
    if bool(model) == bool(cluster_model):
        raise Refused(
            Refusal.INVALID_ARGUMENT,
            f"{pod}: the volume attributes must name exactly one of {VOLUME_MODEL_ATTRIBUTE} and "
            f"{VOLUME_CLUSTER_MODEL_ATTRIBUTE} ({'both are' if model else 'neither is'} set); "
            "ai-models writes these volumes itself: remove hand-written ones from the pod template",
        )
    name = model or cluster_model
    if not is_object_name(name):
        raise Refused(
            Refusal.INVALID_ARGUMENT,
            f"{pod}: {_shown(name)!r} is not a valid object name (a DNS-1123 subdomain)",
        )
    digest = attributes.get(VOLUME_DIGEST_ATTRIBUTE, "")
    if not is_artifact_digest(digest):
        raise Refused(
            Refusal.INVALID_ARGUMENT,
            f"{pod}: the volume attribute {VOLUME_DIGEST_ATTRIBUTE} must be sha256:<64 lowercase hex>, "
            f"got {_shown(digest)!r}",
        )
    key = ModelKey(ModelKind.MODEL, namespace, name) if model else ModelKey(ModelKind.CLUSTER_MODEL, "", name)
    return ModelWanted(key=key, digest=digest)


def authorize(*, pod: PodIdentity, wanted: ModelWanted, seen: ModelSeen) -> Grant:
    """Grants `wanted` to `pod` when the object as read (`seen`, read for `wanted.key`) exists, is
    Ready and publishes the requested digest."""
    if seen.key != wanted.key:
        raise ValueError(f"the object read ({seen.key.describe()}) is not the one asked for")
    what = wanted.key.describe()
    if seen.phase is None:
        where = (
            f"namespace {wanted.key.namespace} has no Model {wanted.key.name}"
            if wanted.key.kind is ModelKind.MODEL
            else f"there is no ClusterModel {wanted.key.name}"
        )
        raise Refused(
            Refusal.PERMISSION_DENIED,
            f"{pod.describe()}: {where}; a pod may mount only Models of its own namespace or "
            "ClusterModels: create the model there or use a ClusterModel",
        )
    if seen.phase is not ModelPhase.READY:
        raise Refused(
            Refusal.PERMISSION_DENIED,
            f"{pod.describe()}: {what} is {seen.phase.value}, not Ready; the mount is retried and "
            "succeeds once it is Ready",
        )
    if seen.digest != wanted.digest:
        raise Refused(
            Refusal.PERMISSION_DENIED,
            f"{pod.describe()}: {what} publishes {seen.digest or 'no artifact digest'}, the volume asks "
            f"for {wanted.digest}; ai-models rewrites the pod template when the model's artifact "
            "changes: let the workload roll out its new pods",
        )
    return Grant(pod=pod, key=wanted.key, digest=wanted.digest)


def _is_label(value: str) -> bool:
    return len(value) <= 63 and _LABEL.fullmatch(value) is not None


def _shown(value: str) -> str:
    return value if len(value) <= _SHOWN else value[:_SHOWN] + "..."
