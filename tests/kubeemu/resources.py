"""What the emulator serves: resource types (built-in and from CRDs) and their lookup tables."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubeemu.crdvalidation import CRDSchema

STANDARD_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
SUBRESOURCE_VERBS = {"status": ("get", "patch", "update"), "token": ("create",)}


@dataclass(frozen=True)
class PrinterColumn:
    """One `additionalPrinterColumns` entry (or a built-in column) for Table output."""

    name: str
    type: str
    json_path: str
    format: str = ""
    description: str = ""
    priority: int = 0


@dataclass(frozen=True)
class ResourceType:
    """One served group/version/resource, with everything the handlers need to know about it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    verbs: tuple[str, ...] = STANDARD_VERBS
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    printer_columns: tuple[PrinterColumn, ...] = ()
    # Field-selector paths beyond metadata.name/namespace (a CRD version's selectableFields).
    selectable_fields: tuple[str, ...] = ()
    # Several served versions (or events.k8s.io beside core events) can share one storage.
    storage_group: str | None = None
    storage_plural: str | None = None
    # Set for custom resources: the CRD's name and each served version's schema.
    crd_name: str = ""
    schema: CRDSchema | None = field(default=None, compare=False, repr=False)
    # Reviews (TokenReview, SubjectAccessReview, ...) are answered, never stored.
    virtual: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def storage_key(self) -> str:
        group = self.group if self.storage_group is None else self.storage_group
        return f"{group}/{self.storage_plural or self.plural}"

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def is_custom(self) -> bool:
        return bool(self.crd_name)


_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key putting versions in Kubernetes order: v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > others."""
    match = _VERSION_RE.match(version)
    if not match:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    stage_rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (stage_rank, -int(major), -int(minor or 0), "")


class Registry:
    """Thread-safe table of served resource types; changes bump `generation` (discovery caches key on it)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._group_order: list[str] = []
        self.generation = 0

    def add(self, rtype: ResourceType) -> None:
        with self._lock:
            self._types[(rtype.group, rtype.version, rtype.plural)] = rtype
            if rtype.group not in self._group_order:
                self._group_order.append(rtype.group)
            self.generation += 1

    def remove_crd(self, crd_name: str) -> list[ResourceType]:
        with self._lock:
            gone = [rt for rt in self._types.values() if rt.crd_name == crd_name]
            for rt in gone:
                del self._types[(rt.group, rt.version, rt.plural)]
            remaining_groups = {rt.group for rt in self._types.values()}
            self._group_order = [g for g in self._group_order if g in remaining_groups]
            self.generation += 1
            return gone

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        with self._lock:
            for rt in self._types.values():
                if rt.group == group and rt.version == version and rt.kind == kind:
                    return rt
        return None

    def all(self) -> list[ResourceType]:
        with self._lock:
            return list(self._types.values())

    def sharing_storage(self, storage_key: str) -> list[ResourceType]:
        with self._lock:
            return [rt for rt in self._types.values() if rt.storage_key == storage_key]

    def groups(self) -> list[tuple[str, list[str]]]:
        """(group, versions with the preferred one first), groups in registration order."""
        with self._lock:
            out: list[tuple[str, list[str]]] = []
            for group in self._group_order:
                versions = sorted(
                    {rt.version for rt in self._types.values() if rt.group == group}, key=version_priority
                )
                if versions:
                    out.append((group, versions))
            return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        with self._lock:
            return [rt for rt in self._types.values() if rt.group == group and rt.version == version]

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(self.all())
