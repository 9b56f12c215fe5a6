"""The PSS "restricted" checker and SecurityPolicyException waivers, on hand-written pod specs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from support.pod_security import restricted_violations, uncovered_violations

RESTRICTED_CONTAINER: dict[str, Any] = {
    "name": "main",
    "image": "x",
    "securityContext": {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    },
}
RESTRICTED_POD: dict[str, Any] = {
    "securityContext": {
        "runAsNonRoot": True,
        "runAsUser": 64535,
        "seccompProfile": {"type": "RuntimeDefault"},
    },
    "containers": [RESTRICTED_CONTAINER],
    "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "x"}}],
}


def pod(**changes: Any) -> dict[str, Any]:
    spec = copy.deepcopy(RESTRICTED_POD)
    spec.update(changes)
    return spec


def container(**security: Any) -> dict[str, Any]:
    result = copy.deepcopy(RESTRICTED_CONTAINER)
    result["securityContext"].update(security)
    return result


def controls(spec: dict[str, Any]) -> list[str]:
    return [violation.control for violation in restricted_violations(spec)]


def test_a_restricted_pod_has_no_violations() -> None:
    assert restricted_violations(RESTRICTED_POD) == []


@pytest.mark.parametrize(
    ("spec", "control"),
    [
        (pod(hostNetwork=True), "hostNetwork"),
        (pod(hostPID=True), "hostPID"),
        (pod(hostIPC=True), "hostIPC"),
        (pod(containers=[container(privileged=True)]), "privileged"),
        (pod(containers=[container(allowPrivilegeEscalation=True)]), "allowPrivilegeEscalation"),
        (pod(containers=[container(runAsNonRoot=False)]), "runAsNonRoot"),
        (pod(containers=[container(runAsUser=0)]), "runAsUser"),
        (pod(containers=[container(seccompProfile={"type": "Unconfined"})]), "seccompProfile"),
        (pod(containers=[container(capabilities={"drop": ["NET_RAW"]})]), "capabilities"),
        (pod(containers=[container(capabilities={"drop": ["ALL"], "add": ["NET_ADMIN"]})]), "capabilities"),
        (pod(containers=[container(procMount="Unmasked")]), "procMount"),
        (pod(containers=[container(seLinuxOptions={"type": "spc_t"})]), "seLinuxOptions"),
        (pod(containers=[container(appArmorProfile={"type": "Unconfined"})]), "appArmor"),
        (
            pod(containers=[{**container(), "ports": [{"containerPort": 8080, "hostPort": 8080}]}]),
            "hostPorts",
        ),
        (pod(volumes=[{"name": "h", "hostPath": {"path": "/etc"}}]), "hostPath"),
        (pod(volumes=[{"name": "n", "nfs": {"server": "s", "path": "/"}}]), "volumeTypes"),
        (
            pod(
                securityContext={
                    **RESTRICTED_POD["securityContext"],
                    "sysctls": [{"name": "kernel.msgmax", "value": "1"}],
                }
            ),
            "sysctls",
        ),
        (pod(initContainers=[container(allowPrivilegeEscalation=None)]), "allowPrivilegeEscalation"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_each_restricted_control_is_enforced(spec: dict[str, Any], control: str) -> None:
    assert controls(spec) == [control]


def test_pod_level_non_root_and_seccomp_cover_every_container() -> None:
    spec = pod(securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}})
    assert restricted_violations(spec) == []
    without_pod_level = pod(securityContext={})
    assert controls(without_pod_level) == ["runAsNonRoot", "seccompProfile"]
    container_level = pod(
        securityContext={}, containers=[container(runAsNonRoot=True, seccompProfile={"type": "Localhost"})]
    )
    assert restricted_violations(container_level) == []


def test_net_bind_service_is_the_only_capability_restricted_allows() -> None:
    spec = pod(containers=[container(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]})])
    assert restricted_violations(spec) == []


CSI_SPE: dict[str, Any] = {
    "securityContext": {
        "privileged": {"allowedValue": True, "metadata": {"description": "mount propagation"}},
        "allowPrivilegeEscalation": {"allowedValue": True, "metadata": {"description": "privileged"}},
    },
    "volumes": {
        "types": {"allowedValues": ["hostPath"], "metadata": {"description": "kubelet dirs"}},
        "hostPath": {
            "allowedValues": [
                {"path": "/var/lib/kubelet", "readOnly": False, "metadata": {"description": "x"}}
            ]
        },
    },
}


def csi_pod() -> dict[str, Any]:
    return pod(
        containers=[
            container(privileged=True, allowPrivilegeEscalation=True),
            {**container(), "name": "registrar"},
        ],
        volumes=[{"name": "kubelet", "hostPath": {"path": "/var/lib/kubelet"}}],
    )


def test_an_exception_waives_exactly_the_controls_it_allows() -> None:
    labels = {"security.deckhouse.io/security-policy-exception": "csi"}
    assert uncovered_violations(csi_pod(), labels, None, {"csi": CSI_SPE}) == []


def test_an_exception_does_not_waive_other_host_paths() -> None:
    spec = csi_pod()
    spec["volumes"].append({"name": "dev", "hostPath": {"path": "/dev"}})
    labels = {"security.deckhouse.io/security-policy-exception": "csi"}
    assert uncovered_violations(spec, labels, None, {"csi": CSI_SPE}) == [
        "PSS restricted: pod: volume dev has type hostPath"
    ]


def test_a_container_exception_label_scopes_the_waiver_to_that_container() -> None:
    spec = csi_pod()
    spec["containers"][1] = container(privileged=True)
    spec["containers"][1]["name"] = "registrar"
    labels = {
        "security.deckhouse.io/security-policy-exception.container.main": "csi",
        "security.deckhouse.io/security-policy-exception.container.registrar": "none",
    }
    found = uncovered_violations(spec, labels, None, {"csi": CSI_SPE, "none": {}})
    assert found == [
        "PSS restricted: pod: volume kubelet has type hostPath",
        "PSS restricted: container registrar: privileged must not be true",
    ]


def test_dropping_all_capabilities_is_never_waived() -> None:
    spe = {"securityContext": {"capabilities": {"allowedValues": {"add": ["SYS_ADMIN"], "drop": []}}}}
    spec = pod(containers=[container(capabilities={"drop": [], "add": ["SYS_ADMIN"]})])
    labels = {"security.deckhouse.io/security-policy-exception": "caps"}
    assert uncovered_violations(spec, labels, None, {"caps": spe}) == [
        "PSS restricted: container main: capabilities.drop must contain ALL"
    ]
