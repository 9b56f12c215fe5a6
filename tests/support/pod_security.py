"""The Pod Security Standard "restricted" (Kubernetes 1.34), checked on a pod spec, and the
Deckhouse SecurityPolicyException that may waive individual controls for one pod or container.

Each control below follows the PSS definition (baseline controls included, since restricted
extends baseline). A violation carries the control name so an exception can be matched to it;
Deckhouse attaches exceptions with the pod label
`security.deckhouse.io/security-policy-exception: <name>` or, for one container,
`security.deckhouse.io/security-policy-exception.container.<container>: <name>`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

SPE_POD_LABEL = "security.deckhouse.io/security-policy-exception"
SPE_CONTAINER_LABEL_PREFIX = "security.deckhouse.io/security-policy-exception.container."

RESTRICTED_VOLUME_TYPES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
VOLUME_NON_TYPE_KEYS = frozenset({"name"})
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
SECCOMP_TYPES = frozenset({"RuntimeDefault", "Localhost"})
APPARMOR_TYPES = frozenset({"RuntimeDefault", "Localhost"})
ADDABLE_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})


@dataclass(frozen=True)
class Violation:
    control: str  # PSS control, e.g. "privileged", "hostPath", "runAsNonRoot"
    container: str | None  # None for pod-level fields
    detail: str
    value: Any = None  # what an exception has to allow (a capability, a path, a port, a UID...)

    def __str__(self) -> str:
        where = f"container {self.container}" if self.container else "pod"
        return f"{where}: {self.detail}"


def _containers(spec: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def restricted_violations(
    spec: Mapping[str, Any], annotations: Mapping[str, str] | None = None
) -> list[Violation]:
    """Every way the pod spec breaks PSS restricted, in a stable order."""
    found: list[Violation] = []
    pod_sc = spec.get("securityContext") or {}
    annotations = annotations or {}

    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            found.append(Violation(field, None, f"{field} must not be true"))
    if (pod_sc.get("windowsOptions") or {}).get("hostProcess"):
        found.append(Violation("hostProcess", None, "windowsOptions.hostProcess must not be true"))
    if pod_sc.get("runAsUser") == 0:
        found.append(Violation("runAsUser", None, "securityContext.runAsUser must not be 0", 0))
    for sysctl in pod_sc.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            found.append(
                Violation("sysctls", None, f"sysctl {sysctl.get('name')} is not safe", sysctl.get("name"))
            )
    found.extend(_selinux(pod_sc.get("seLinuxOptions"), None))
    found.extend(_apparmor(pod_sc.get("appArmorProfile"), None))
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - VOLUME_NON_TYPE_KEYS
        for volume_type in sorted(kinds - RESTRICTED_VOLUME_TYPES):
            value = (volume.get("hostPath") or {}).get("path") if volume_type == "hostPath" else volume_type
            found.append(
                Violation(
                    "hostPath" if volume_type == "hostPath" else "volumeTypes",
                    None,
                    f"volume {volume.get('name')} has type {volume_type}",
                    value,
                )
            )
    for key, value in annotations.items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
            value == "runtime/default" or value.startswith("localhost/")
        ):
            annotated = key.rsplit("/", 1)[-1]
            found.append(Violation("appArmor", annotated, f"AppArmor profile {value} is not allowed", value))

    pod_non_root = pod_sc.get("runAsNonRoot")
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    for container in _containers(spec):
        name = str(container.get("name"))
        sc = container.get("securityContext") or {}
        if sc.get("privileged"):
            found.append(Violation("privileged", name, "privileged must not be true", True))
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            found.append(Violation("hostProcess", name, "windowsOptions.hostProcess must not be true"))
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(
                Violation("allowPrivilegeEscalation", name, "allowPrivilegeEscalation must be false", True)
            )
        non_root = sc.get("runAsNonRoot", pod_non_root)
        if non_root is not True:
            found.append(
                Violation("runAsNonRoot", name, "runAsNonRoot must be true (pod or container)", False)
            )
        if sc.get("runAsUser") == 0:
            found.append(Violation("runAsUser", name, "runAsUser must not be 0", 0))
        seccomp = (sc.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in SECCOMP_TYPES:
            found.append(
                Violation(
                    "seccompProfile",
                    name,
                    f"seccompProfile.type must be RuntimeDefault or Localhost, not {seccomp}",
                    seccomp,
                )
            )
        capabilities = sc.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            found.append(Violation("capabilities", name, "capabilities.drop must contain ALL", "drop"))
        for capability in capabilities.get("add") or []:
            if capability not in ADDABLE_CAPABILITIES:
                found.append(
                    Violation("capabilities", name, f"capability {capability} must not be added", capability)
                )
        if sc.get("procMount", "Default") != "Default":
            found.append(
                Violation("procMount", name, f"procMount {sc['procMount']} is not allowed", sc["procMount"])
            )
        found.extend(_selinux(sc.get("seLinuxOptions"), name))
        found.extend(_apparmor(sc.get("appArmorProfile"), name))
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                found.append(
                    Violation(
                        "hostPorts", name, f"hostPort {port['hostPort']} is not allowed", port["hostPort"]
                    )
                )
    return found


def _selinux(options: Mapping[str, Any] | None, container: str | None) -> list[Violation]:
    if not options:
        return []
    found = []
    if options.get("type", "") not in SELINUX_TYPES:
        found.append(
            Violation("seLinuxOptions", container, f"SELinux type {options['type']} is not allowed", options)
        )
    for field in ("user", "role"):
        if options.get(field):
            found.append(Violation("seLinuxOptions", container, f"SELinux {field} must not be set", options))
    return found


def _apparmor(profile: Mapping[str, Any] | None, container: str | None) -> list[Violation]:
    if profile and profile.get("type") not in APPARMOR_TYPES:
        return [
            Violation(
                "appArmor", container, f"AppArmor profile {profile.get('type')} is not allowed", profile
            )
        ]
    return []


def exception_name(pod_labels: Mapping[str, str], container: str | None) -> str | None:
    """The SecurityPolicyException that applies to a container (its own label wins) or to the pod."""
    if container is not None and f"{SPE_CONTAINER_LABEL_PREFIX}{container}" in pod_labels:
        return pod_labels[f"{SPE_CONTAINER_LABEL_PREFIX}{container}"]
    return pod_labels.get(SPE_POD_LABEL)


def _allowed(spe_spec: Mapping[str, Any], *path: str) -> Any:
    node: Any = spe_spec
    for key in path:
        node = (node or {}).get(key) if isinstance(node, Mapping) else None
    return node


def exception_covers(spe_spec: Mapping[str, Any], violation: Violation) -> bool:
    """Whether a SecurityPolicyException spec explicitly allows what the violation needs."""
    sc = spe_spec.get("securityContext") or {}
    network = spe_spec.get("network") or {}
    volumes = spe_spec.get("volumes") or {}
    control, value = violation.control, violation.value
    if control in ("privileged", "allowPrivilegeEscalation"):
        return _allowed(sc, control, "allowedValue") is True
    if control == "runAsNonRoot":
        return _allowed(sc, "runAsNonRoot", "allowedValue") is False
    if control == "runAsUser":
        return value in (_allowed(sc, "runAsUser", "allowedValues") or [])
    if control == "capabilities":
        # Dropping ALL is never waived: an exception may only add capabilities on top of it.
        allowed = _allowed(sc, "capabilities", "allowedValues") or {}
        return value != "drop" and value in (allowed.get("add") or [])
    if control == "seccompProfile":
        return any(
            item.get("type") == value for item in _allowed(sc, "seccompProfile", "allowedValues") or []
        )
    if control == "procMount":
        return value in (_allowed(sc, "procMount", "allowedValues") or [])
    if control == "sysctls":
        return any(item.get("name") == value for item in _allowed(sc, "sysctls", "allowedValues") or [])
    if control == "seLinuxOptions":
        return value in (_allowed(sc, "seLinuxOptions", "allowedValues") or [])
    if control in ("hostNetwork", "hostPID", "hostIPC"):
        return _allowed(network, control, "allowedValue") is True
    if control == "hostPorts":
        return any(item.get("port") == value for item in network.get("hostPorts") or [])
    if control == "volumeTypes":
        return value in (_allowed(volumes, "types", "allowedValues") or [])
    if control == "hostPath":
        return "hostPath" in (_allowed(volumes, "types", "allowedValues") or []) and any(
            item.get("path") == value for item in _allowed(volumes, "hostPath", "allowedValues") or []
        )
    return False


def uncovered_violations(
    spec: Mapping[str, Any],
    pod_labels: Mapping[str, str],
    pod_annotations: Mapping[str, str] | None,
    exceptions: Mapping[str, Mapping[str, Any]],
) -> list[str]:
    """PSS restricted violations not waived by a rendered SecurityPolicyException, as messages.

    `exceptions` maps the names of the SecurityPolicyExceptions rendered in the pod's namespace
    to their specs. A label naming an exception that is not rendered is itself reported.
    """
    messages: list[str] = []
    referenced = {value for key, value in pod_labels.items() if key.startswith(SPE_POD_LABEL)}
    for name in sorted(referenced - set(exceptions)):
        messages.append(f"pod references SecurityPolicyException {name}, which is not rendered")
    for violation in restricted_violations(spec, pod_annotations):
        waiver = exception_name(pod_labels, violation.container)
        if waiver is not None and waiver in exceptions and exception_covers(exceptions[waiver], violation):
            continue
        messages.append(f"PSS restricted: {violation}")
    return messages
