"""Which host directory a container would see at each PersistentVolumeClaim mount.

The test bed's provisioner (`testbed.volumes`) backs every PersistentVolume it makes with a fresh
directory recorded in `spec.hostPath.path`. A container's `volumeMounts` entry for a claim volume
at `mountPath` P with `subPath` S therefore sees `<PV hostPath>/S`. Nothing on this machine can
mount it at P; this module answers where it would be, for two uses:

- `pod_mounts(cluster, pod)`: tests check what a workload's pod would see (e.g. the delivered files
  under its subPath);
- `host_directories(...)` + `rewrite_path(...)`: the Job runner points a local process's variables
  and arguments that name P (or a path under it) at that directory instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubeemu import errors
from kubeemu.cluster import Cluster


@dataclass(frozen=True)
class ClaimMount:
    """One container's mount of a claim, and the directory it would see (None: not bound yet)."""

    container: str
    mount_path: str
    claim: str
    sub_path: str
    read_only: bool
    host_path: Path | None


class ClaimNotReady(Exception):
    """A mounted claim is missing, not Bound, or its volume has no hostPath: the message says which."""


def _claim_volumes(pod_spec: Mapping[str, Any]) -> dict[str, str]:
    """Volume name -> claim name, for the pod's `persistentVolumeClaim` volumes."""
    found: dict[str, str] = {}
    for volume in pod_spec.get("volumes") or []:
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim:
            found[str(volume["name"])] = str(claim)
    return found


def claim_directory(cluster: Cluster, namespace: str, claim: str) -> Path:
    """The host directory backing the claim's bound volume; `ClaimNotReady` when there is none."""
    claims = cluster.resource("", "v1", "persistentvolumeclaims")
    volumes = cluster.resource("", "v1", "persistentvolumes")
    assert claims is not None
    assert volumes is not None
    try:
        pvc = cluster.get(claims, namespace=namespace, name=claim)
    except errors.APIError as error:
        raise ClaimNotReady(f'persistentvolumeclaim "{claim}" not found') from error
    volume_name = (pvc.get("spec") or {}).get("volumeName")
    if (pvc.get("status") or {}).get("phase") != "Bound" or not volume_name:
        raise ClaimNotReady(f'persistentvolumeclaim "{claim}" is not bound')
    try:
        pv = cluster.get(volumes, namespace="", name=volume_name)
    except errors.APIError as error:
        raise ClaimNotReady(f'persistentvolume "{volume_name}" of claim "{claim}" not found') from error
    path = ((pv.get("spec") or {}).get("hostPath") or {}).get("path")
    if not path:
        raise ClaimNotReady(f'persistentvolume "{volume_name}" has no spec.hostPath.path')
    return Path(path)


def pod_mounts(cluster: Cluster, pod: Mapping[str, Any]) -> list[ClaimMount]:
    """Every claim mount of the pod's containers and init containers (in spec order)."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    spec = pod.get("spec") or {}
    claims = _claim_volumes(spec)
    found: list[ClaimMount] = []
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for mount in container.get("volumeMounts") or []:
            claim = claims.get(str(mount.get("name")))
            if claim is None:
                continue
            sub_path = str(mount.get("subPath") or "")
            try:
                base: Path | None = claim_directory(cluster, namespace, claim)
            except ClaimNotReady:
                base = None
            found.append(
                ClaimMount(
                    container=str(container.get("name")),
                    mount_path=str(mount["mountPath"]),
                    claim=claim,
                    sub_path=sub_path,
                    read_only=bool(mount.get("readOnly")),
                    host_path=None if base is None else (base / sub_path if sub_path else base),
                )
            )
    return found


def host_directories(
    cluster: Cluster, namespace: str, pod_spec: Mapping[str, Any], container: Mapping[str, Any]
) -> dict[str, Path]:
    """mountPath -> host directory for the container's claim mounts; `ClaimNotReady` while any of
    them cannot be resolved. Like the kubelet, creates a missing subPath directory."""
    claims = _claim_volumes(pod_spec)
    found: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or []:
        claim = claims.get(str(mount.get("name")))
        if claim is None:
            continue
        base = claim_directory(cluster, namespace, claim)
        sub_path = str(mount.get("subPath") or "")
        target = base / sub_path if sub_path else base
        target.mkdir(parents=True, exist_ok=True)
        found[str(mount["mountPath"]).rstrip("/") or "/"] = target
    return found


def rewrite_path(value: str, directories: Mapping[str, Path]) -> str:
    """`value` with a leading mount path P replaced by its host directory: `value == P` or `value`
    under `P/`; the longest matching P wins; anything else is returned unchanged."""
    for mount_path in sorted(directories, key=len, reverse=True):
        if value == mount_path:
            return str(directories[mount_path])
        prefix = mount_path if mount_path.endswith("/") else mount_path + "/"
        if value.startswith(prefix):
            return str(directories[mount_path] / value[len(prefix) :])
    return value
