"""What a Deckhouse reviewer (and DMT) checks on rendered manifests, written once for every test.

`review(objects, expectations)` returns one message per finding; an empty list means the
manifests pass. The expectations come from the values the chart was rendered with
(`ClusterExpectations.from_values`), computed here independently of the templates, so a helper
that drifts from the platform's rules is caught rather than copied.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from support.manifest_schemas import describe, is_namespaced
from support.pod_security import exception_name, uncovered_violations

MODULE = "ai-models"
MODULE_VALUES_KEY = "aiModels"
MODULE_NAMESPACE = "d8-ai-models"
REGISTRY_SECRET = "ai-models-module-registry"
DEFAULT_CLUSTER_DOMAIN = "cluster.local"

PRIORITY_CLASSES = frozenset(
    {
        "system-node-critical",
        "system-cluster-critical",
        "cluster-critical",
        "cluster-medium",
        "cluster-low",
        "production-high",
        "production-medium",
        "production-low",
        "staging",
        "develop",
        "standby",
    }
)
VPA_UPDATE_MODES = frozenset({"Off", "Initial", "Recreate", "InPlaceOrRecreate"})
PROBE_HANDLERS = ("httpGet", "tcpSocket", "exec", "grpc")
DECKHOUSE_IDS = frozenset({(64535, 64535), (65534, 65534)})

WORKLOAD_KINDS = frozenset({"Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob"})
WEBHOOK_CONFIGURATION_KINDS = frozenset({"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"})
WERF_WEIGHT = "werf.io/weight"
DEPLOY_DEPENDENCY_PREFIX = "werf.io/deploy-dependency-"
LONG_RUNNING_KINDS = frozenset({"Deployment", "DaemonSet", "StatefulSet"})
NEEDS_PDB = frozenset({"Deployment", "StatefulSet"})
NEEDS_VPA = frozenset({"Deployment", "DaemonSet", "StatefulSet"})
# DaemonSets run where their own node selection puts them (the node cache follows
# aiModels.delivery.nodeCache.nodeSelector), so only these kinds go to system nodes.
SYSTEM_PLACED_KINDS = frozenset({"Deployment", "StatefulSet", "Job", "CronJob"})

# Namespaced objects allowed outside the module namespace: (kind, namespace) -> why.
FOREIGN_NAMESPACES: dict[tuple[str, str], str] = {
    ("ServiceMonitor", "d8-monitoring"): "Deckhouse Prometheus selects ServiceMonitors in d8-monitoring",
}
# Long-running containers exempt from the liveness/readiness rule: (kind, name, container) -> why.
PROBE_EXEMPT_CONTAINERS: dict[tuple[str, str, str], str] = {}

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class ClusterExpectations:
    """Facts the checks need, derived from the Helm values of one render."""

    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    vpa_enabled: bool
    cluster_domain: str
    module_image_base: str
    common_image_base: str
    # Digests of the module's own images: with the global registry base, module and common
    # images (kube-rbac-proxy) share one base, so the digest tells the module's processes apart.
    module_image_digests: frozenset[str] = frozenset()
    # delivery.materializer.imageRepository: a mirror of the module image for materialize Jobs (D162).
    materializer_image_base: str = ""

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> ClusterExpectations:
        module = values.get(MODULE_VALUES_KEY) or {}
        global_ = values.get("global") or {}
        discovery = global_.get("discovery") or {}
        counts = discovery.get("d8SpecificNodeCountByRole") or {}

        # lib-helm "system" strategy: the module setting wins, then dedicated module nodes, then
        # system nodes; without any, no selector at all.
        node_selector: Mapping[str, str]
        if module.get("nodeSelector"):
            node_selector = module["nodeSelector"]
        elif int(counts.get(MODULE_VALUES_KEY) or 0) > 0:
            node_selector = {f"node-role.deckhouse.io/{MODULE}": ""}
        elif int(counts.get("system") or 0) > 0:
            node_selector = {"node-role.deckhouse.io/system": ""}
        else:
            node_selector = {}
        tolerations = tuple(
            module.get("tolerations")
            or [
                {"key": "dedicated.deckhouse.io", "operator": "Equal", "value": MODULE},
                {"key": "dedicated.deckhouse.io", "operator": "Equal", "value": "system"},
            ]
        )

        images = global_.get("modulesImages") or {}
        global_base = str((images.get("registry") or {}).get("base") or "").rstrip("/")
        module_base = str((module.get("registry") or {}).get("base") or "").strip("/")
        module_digests = (images.get("digests") or {}).get(MODULE_VALUES_KEY) or {}
        return cls(
            node_selector=node_selector,
            tolerations=tolerations,
            # As templates/_helpers.tpl ai_models.platform_serves decides without discovery.
            vpa_enabled=bool(
                {"vertical-pod-autoscaler", "vertical-pod-autoscaler-crd"}
                & set(global_.get("enabledModules") or [])
            ),
            cluster_domain=str(discovery.get("clusterDomain") or DEFAULT_CLUSTER_DOMAIN),
            module_image_base=f"{module_base}/{MODULE}" if module_base else global_base,
            common_image_base=global_base,
            module_image_digests=frozenset(str(digest) for digest in module_digests.values()),
            materializer_image_base=str(
                ((module.get("delivery") or {}).get("materializer") or {}).get("imageRepository") or ""
            ),
        )


def review(objects: Iterable[dict[str, Any]], expectations: ClusterExpectations) -> list[str]:
    """Every finding on the rendered objects, prefixed with the object it is about."""
    objects = list(objects)
    exceptions = {
        (obj["metadata"].get("namespace"), obj["metadata"]["name"]): obj.get("spec") or {}
        for obj in objects
        if obj.get("kind") == "SecurityPolicyException"
    }
    findings: list[str] = []
    for obj in objects:
        messages = check_metadata(obj)
        kind = obj.get("kind")
        if kind == "Service":
            messages += check_service(obj)
        if kind == "VerticalPodAutoscaler":
            messages += check_vpa_mode(obj)
        if kind == "PodDisruptionBudget":
            messages += check_pdb(obj)
        if kind in WORKLOAD_KINDS:
            messages += check_workload(obj, objects, expectations, exceptions)
        if kind in WEBHOOK_CONFIGURATION_KINDS:
            messages += check_webhook_ordering(obj, objects)
        findings.extend(f"{describe(obj)}: {message}" for message in messages)
    return findings


def find_cluster_local(rendered_text: str) -> list[str]:
    """Lines that hard-code the default cluster domain (wrong in a cluster with another one)."""
    return [line.strip() for line in rendered_text.splitlines() if DEFAULT_CLUSTER_DOMAIN in line]


def check_metadata(obj: Mapping[str, Any]) -> list[str]:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    messages = [
        f"label {key}={expected!r} missing (found {labels.get(key)!r})"
        for key, expected in (("heritage", "deckhouse"), ("module", MODULE))
        if labels.get(key) != expected
    ]
    namespace = meta.get("namespace")
    if not is_namespaced(dict(obj)):
        if namespace:
            messages.append(f"cluster-scoped object must not set a namespace ({namespace})")
    elif namespace != MODULE_NAMESPACE and (obj.get("kind"), namespace) not in FOREIGN_NAMESPACES:
        messages.append(f"namespaced object must be in {MODULE_NAMESPACE}, not {namespace!r}")
    return messages


def check_webhook_ordering(
    configuration: Mapping[str, Any], objects: Iterable[Mapping[str, Any]]
) -> list[str]:
    """DMT's webhook-configuration-annotations: an order for werf (a weight, or a dependency), and
    (ours) a dependency only on an object the chart renders, in the module namespace by default."""
    annotations = (configuration.get("metadata") or {}).get("annotations") or {}
    dependencies = {
        key: value for key, value in annotations.items() if key.startswith(DEPLOY_DEPENDENCY_PREFIX)
    }
    if WERF_WEIGHT not in annotations and not dependencies:
        return [f"needs a {WERF_WEIGHT} annotation or one prefixed {DEPLOY_DEPENDENCY_PREFIX}"]
    rendered = {
        (
            obj.get("kind"),
            (obj.get("metadata") or {}).get("name"),
            (obj.get("metadata") or {}).get("namespace"),
        )
        for obj in objects
    }
    messages = []
    for key, value in sorted(dependencies.items()):
        fields = dict(item.partition("=")[::2] for item in str(value).split(","))
        wanted = (fields.get("kind"), fields.get("name"), fields.get("namespace") or MODULE_NAMESPACE)
        if wanted not in rendered:
            messages.append(f"{key} waits for {wanted[0]} {wanted[2]}/{wanted[1]}, which is not rendered")
    return messages


def check_service(service: Mapping[str, Any]) -> list[str]:
    return [
        f"port {port.get('name') or port.get('port')} must use a named targetPort, "
        f"not {port.get('targetPort')!r}"
        for port in (service.get("spec") or {}).get("ports") or []
        if not isinstance(port.get("targetPort"), str)
    ]


def check_vpa_mode(vpa: Mapping[str, Any]) -> list[str]:
    mode = ((vpa.get("spec") or {}).get("updatePolicy") or {}).get("updateMode")
    if mode not in VPA_UPDATE_MODES:
        return [f"updatePolicy.updateMode must be one of {sorted(VPA_UPDATE_MODES)}, not {mode!r}"]
    return []


def check_pdb(pdb: Mapping[str, Any]) -> list[str]:
    annotations = (pdb.get("metadata") or {}).get("annotations") or {}
    spec = pdb.get("spec") or {}
    messages = [
        f"must not carry the Helm hook annotation {key}"
        for key in annotations
        if key.startswith("helm.sh/hook")
    ]
    if "minAvailable" not in spec and "maxUnavailable" not in spec:
        messages.append("must set minAvailable or maxUnavailable")
    if not (spec.get("selector") or {}).get("matchLabels"):
        messages.append("selector.matchLabels must not be empty")
    return messages


def pod_template(workload: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = workload.get("spec") or {}
    if workload.get("kind") == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    return spec.get("template") or {}


def _same_namespace(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return bool((a.get("metadata") or {}).get("namespace") == (b.get("metadata") or {}).get("namespace"))


def find_vpa(workload: Mapping[str, Any], objects: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    for obj in objects:
        target = (obj.get("spec") or {}).get("targetRef") or {}
        if (
            obj.get("kind") == "VerticalPodAutoscaler"
            and _same_namespace(obj, workload)
            and target.get("kind") == workload.get("kind")
            and target.get("name") == workload["metadata"]["name"]
        ):
            return obj
    return None


def find_pdb(workload: Mapping[str, Any], objects: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    labels = (pod_template(workload).get("metadata") or {}).get("labels") or {}
    for obj in objects:
        match = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        if (
            obj.get("kind") == "PodDisruptionBudget"
            and _same_namespace(obj, workload)
            and match
            and all(labels.get(key) == value for key, value in match.items())
        ):
            return obj
    return None


def _vpa_containers(vpa: Mapping[str, Any] | None) -> set[str]:
    if vpa is None:
        return set()
    policies = ((vpa.get("spec") or {}).get("resourcePolicy") or {}).get("containerPolicies") or []
    return {str(policy.get("containerName")) for policy in policies} - {"*"}


def check_workload(
    workload: Mapping[str, Any],
    objects: list[dict[str, Any]],
    expectations: ClusterExpectations,
    exceptions: Mapping[tuple[str | None, str], Mapping[str, Any]],
) -> list[str]:
    kind = str(workload.get("kind"))
    name = str(workload["metadata"]["name"])
    namespace = workload["metadata"].get("namespace")
    template = pod_template(workload)
    pod_meta = template.get("metadata") or {}
    pod_labels = pod_meta.get("labels") or {}
    spec = template.get("spec") or {}
    containers = list(spec.get("containers") or [])
    all_containers = list(spec.get("initContainers") or []) + containers
    messages: list[str] = []

    # Pod security: PSS restricted unless a rendered SecurityPolicyException waives the control.
    namespace_exceptions = {spe: body for (ns, spe), body in exceptions.items() if ns == namespace}
    messages += uncovered_violations(spec, pod_labels, pod_meta.get("annotations"), namespace_exceptions)
    pod_sc = spec.get("securityContext") or {}
    ids = (pod_sc.get("runAsUser"), pod_sc.get("runAsGroup"))
    root_by_exception = ids == (0, 0) and pod_sc.get("runAsNonRoot") is False
    if ids not in DECKHOUSE_IDS and not root_by_exception:
        messages.append(f"pod runAsUser/runAsGroup must be 64535:64535 or 65534:65534, not {ids[0]}:{ids[1]}")
    for container in all_containers:
        cname = str(container.get("name"))
        sc = container.get("securityContext")
        spe = namespace_exceptions.get(exception_name(pod_labels, cname) or "") or {}
        writable_allowed = ((spe.get("securityContext") or {}).get("readOnlyRootFilesystem") or {}).get(
            "allowedValue"
        ) is False
        if not sc:
            messages.append(f"container {cname} has no securityContext")
        elif sc.get("readOnlyRootFilesystem") is not True and not writable_allowed:
            messages.append(f"container {cname} must set readOnlyRootFilesystem: true")

    # Probes: liveness and readiness everywhere long-running; startupProbe on /healthz for the
    # module's own processes, so slow starts never trip liveness.
    if kind in LONG_RUNNING_KINDS:
        for container in containers:
            cname = str(container.get("name"))
            if (kind, name, cname) in PROBE_EXEMPT_CONTAINERS:
                continue
            for probe_name in ("livenessProbe", "readinessProbe"):
                probe = container.get(probe_name)
                handlers = [handler for handler in PROBE_HANDLERS if handler in (probe or {})]
                if len(handlers) != 1:
                    messages.append(f"container {cname} needs a {probe_name} with exactly one handler")
            base, _, digest = str(container.get("image", "")).partition("@")
            if base == expectations.module_image_base and digest in expectations.module_image_digests:
                startup = container.get("startupProbe") or {}
                if (startup.get("httpGet") or {}).get("path") != "/healthz":
                    messages.append(f"container {cname} needs a startupProbe on httpGet /healthz")

    # Resources: ephemeral storage always; CPU and memory unless a VPA manages the container.
    vpa = find_vpa(workload, objects) if expectations.vpa_enabled else None
    vpa_managed = _vpa_containers(vpa)
    for container in all_containers:
        cname = str(container.get("name"))
        requests = (container.get("resources") or {}).get("requests") or {}
        needed = ["ephemeral-storage"] + ([] if cname in vpa_managed else ["cpu", "memory"])
        missing = [resource for resource in needed if resource not in requests]
        if missing:
            messages.append(f"container {cname} has no resources.requests for {', '.join(missing)}")

    # Scheduling and images.
    if spec.get("priorityClassName") not in PRIORITY_CLASSES:
        messages.append(f"priorityClassName must be a Deckhouse class, not {spec.get('priorityClassName')!r}")
    if kind in SYSTEM_PLACED_KINDS:
        if dict(spec.get("nodeSelector") or {}) != dict(expectations.node_selector):
            messages.append(
                f"nodeSelector must be {dict(expectations.node_selector)} (system placement), "
                f"not {spec.get('nodeSelector')}"
            )
        tolerations = spec.get("tolerations") or []
        for toleration in expectations.tolerations:
            if dict(toleration) not in tolerations:
                messages.append(f"tolerations must include {dict(toleration)} (system placement)")
    pull_secrets = [secret.get("name") for secret in spec.get("imagePullSecrets") or []]
    if REGISTRY_SECRET not in pull_secrets:
        messages.append(f"imagePullSecrets must include {REGISTRY_SECRET}")
    bases = {expectations.module_image_base, expectations.common_image_base} | (
        {expectations.materializer_image_base} if expectations.materializer_image_base else set()
    )
    names: list[str] = []
    for container in all_containers:
        cname = str(container.get("name"))
        names.append(cname)
        image = str(container.get("image", ""))
        if not (DIGEST.search(image) and image.rsplit("@", 1)[0] in bases):
            messages.append(f"container {cname} image {image!r} must be a module or common image by digest")
        if container.get("imagePullPolicy") == "Always":
            messages.append(f"container {cname} must not use imagePullPolicy: Always")
        for port in container.get("ports") or []:
            if int(port.get("containerPort", 0)) <= 1024:
                messages.append(f"container {cname} port {port.get('containerPort')} must be above 1024")
        env_names = [str(env.get("name")) for env in container.get("env") or []]
        if len(env_names) != len(set(env_names)):
            messages.append(f"container {cname} has duplicate env names")
    if len(names) != len(set(names)):
        messages.append("duplicate container names")

    # Controller-level rules.
    if kind == "Deployment":
        limit = (workload.get("spec") or {}).get("revisionHistoryLimit")
        if not isinstance(limit, int) or limit > 2:
            messages.append(f"revisionHistoryLimit must be set to 2 or less, not {limit!r}")
    if kind in NEEDS_PDB and find_pdb(workload, objects) is None:
        messages.append("no PodDisruptionBudget selects its pods")
    if kind in NEEDS_VPA and expectations.vpa_enabled:
        if vpa is None:
            messages.append("no VerticalPodAutoscaler targets it")
        else:
            uncovered = sorted({str(c.get("name")) for c in containers} - vpa_managed)
            if uncovered:
                messages.append(f"VerticalPodAutoscaler has no containerPolicies for {', '.join(uncovered)}")
    return messages
