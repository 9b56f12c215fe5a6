"""The built-in Kubernetes resources the emulator serves (storage only: no controllers behind them)."""

from __future__ import annotations

from kubeemu.resources import ResourceType

_STATUS = frozenset({"status"})
_CREATE_ONLY = ("create",)


def _rt(
    group_version: str,
    plural: str,
    kind: str,
    *,
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    status: bool = False,
    categories: tuple[str, ...] = (),
    extra_subresources: frozenset[str] = frozenset(),
) -> ResourceType:
    group, _, version = group_version.rpartition("/")
    return ResourceType(
        group=group,
        version=version,
        plural=plural,
        kind=kind,
        namespaced=namespaced,
        short_names=short,
        categories=categories,
        subresources=(_STATUS if status else frozenset()) | extra_subresources,
    )


def _review(group_version: str, plural: str, kind: str, *, namespaced: bool = False) -> ResourceType:
    group, _, version = group_version.rpartition("/")
    return ResourceType(
        group=group,
        version=version,
        plural=plural,
        kind=kind,
        namespaced=namespaced,
        verbs=_CREATE_ONLY,
        virtual=True,
    )


_ALL = ("all",)

BUILTIN_RESOURCES: tuple[ResourceType, ...] = (
    _rt("v1", "namespaces", "Namespace", namespaced=False, short=("ns",), status=True),
    _rt("v1", "configmaps", "ConfigMap", short=("cm",)),
    _rt("v1", "secrets", "Secret"),
    _rt("v1", "serviceaccounts", "ServiceAccount", short=("sa",), extra_subresources=frozenset({"token"})),
    _rt("v1", "services", "Service", short=("svc",), status=True, categories=_ALL),
    _rt("v1", "endpoints", "Endpoints", short=("ep",)),
    _rt(
        "v1",
        "pods",
        "Pod",
        short=("po",),
        status=True,
        categories=_ALL,
        extra_subresources=frozenset({"log"}),
    ),
    _rt("v1", "events", "Event", short=("ev",)),
    _rt("v1", "persistentvolumeclaims", "PersistentVolumeClaim", short=("pvc",), status=True),
    _rt("v1", "persistentvolumes", "PersistentVolume", namespaced=False, short=("pv",), status=True),
    _rt("v1", "nodes", "Node", namespaced=False, short=("no",), status=True),
    _rt("v1", "resourcequotas", "ResourceQuota", short=("quota",), status=True),
    _rt("v1", "limitranges", "LimitRange", short=("limits",)),
    _rt("apps/v1", "deployments", "Deployment", short=("deploy",), status=True, categories=_ALL),
    _rt("apps/v1", "statefulsets", "StatefulSet", short=("sts",), status=True, categories=_ALL),
    _rt("apps/v1", "daemonsets", "DaemonSet", short=("ds",), status=True, categories=_ALL),
    _rt("apps/v1", "replicasets", "ReplicaSet", short=("rs",), status=True, categories=_ALL),
    _rt("batch/v1", "jobs", "Job", status=True, categories=_ALL),
    _rt("batch/v1", "cronjobs", "CronJob", short=("cj",), status=True, categories=_ALL),
    _rt("coordination.k8s.io/v1", "leases", "Lease"),
    _rt("storage.k8s.io/v1", "storageclasses", "StorageClass", namespaced=False, short=("sc",)),
    _rt("storage.k8s.io/v1", "csidrivers", "CSIDriver", namespaced=False),
    _rt("networking.k8s.io/v1", "ingresses", "Ingress", short=("ing",), status=True),
    _rt("networking.k8s.io/v1", "networkpolicies", "NetworkPolicy", short=("netpol",)),
    _rt("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", short=("pdb",), status=True),
    _rt("rbac.authorization.k8s.io/v1", "roles", "Role"),
    _rt("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding"),
    _rt("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", namespaced=False),
    _rt("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    _rt(
        "apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short=("crd", "crds"),
        status=True,
        categories=("api-extensions",),
    ),
    _rt(
        "admissionregistration.k8s.io/v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        namespaced=False,
    ),
    _rt(
        "admissionregistration.k8s.io/v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        namespaced=False,
    ),
    _rt(
        "admissionregistration.k8s.io/v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        namespaced=False,
        status=True,
    ),
    _rt(
        "admissionregistration.k8s.io/v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        namespaced=False,
    ),
    ResourceType(
        group="events.k8s.io",
        version="v1",
        plural="events",
        kind="Event",
        namespaced=True,
        short_names=("ev",),
        storage_group="",
    ),
    _review("authentication.k8s.io/v1", "tokenreviews", "TokenReview"),
    _review("authentication.k8s.io/v1", "selfsubjectreviews", "SelfSubjectReview"),
    _review("authorization.k8s.io/v1", "subjectaccessreviews", "SubjectAccessReview"),
    _review("authorization.k8s.io/v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview"),
    _review("authorization.k8s.io/v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview"),
    _review(
        "authorization.k8s.io/v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", namespaced=True
    ),
)

# Namespaces every cluster (and so the emulator) starts with.
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
