"""Can the module deliver models in this cluster at all? One pure evaluator
(docs/internal/ARCHITECTURE.md §7).

Inputs are plain facts read elsewhere (StorageClasses, Deckhouse's global storage class, the shared
claims already made, node labels); every controller replica runs it, the one producer of the
verdict and of the StorageClass a claim gets (D151).

SharedPVC needs a class resolved from `delivery.sharedPVCStorageClassName`, then Deckhouse's global
storage class, then the single default StorageClass; it must exist and bind at once
(`volumeBindingMode: Immediate`: delivery waits for the volume before creating its first consumer,
so a WaitForFirstConsumer volume never binds). ReadWriteMany cannot be read from a class; the first
shared claim of the class that binds confirms it; one whose provisioning failed for an access-mode
reason (`names_access_mode`), or that lost its volume, refutes it. Any other provisioning failure
(quota, a provisioner that is down) says nothing about ReadWriteMany: the verdict stays
unconfirmed, and the workload's delivery report names the failure. Only claims the module made
count; the readers filter them (`domain.delivery.read_write_many`). NodeCache needs the release to
run its node plugin (the chart says why it does not, D162), a cache size and a node selector that
matches at least one node.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence

from ai_models.domain.delivery.mode import DeliveryMode

IMMEDIATE = "Immediate"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


class StorageClassSource(enum.StrEnum):
    """Where the SharedPVC class came from (`PrerequisitesVerdict.storage_class_source`)."""

    MODULE_SETTING = "ModuleSetting"
    GLOBAL_STORAGE_CLASS = "GlobalStorageClass"
    DEFAULT_STORAGE_CLASS = "DefaultStorageClass"
    NOT_FOUND = "NotFound"


class PrerequisitesReason(enum.StrEnum):
    SATISFIED = "Satisfied"
    READ_WRITE_MANY_UNCONFIRMED = "ReadWriteManyUnconfirmed"
    STORAGE_CLASS_NOT_FOUND = "StorageClassNotFound"
    NO_DEFAULT_STORAGE_CLASS = "NoDefaultStorageClass"
    SEVERAL_DEFAULT_STORAGE_CLASSES = "SeveralDefaultStorageClasses"
    STORAGE_CLASS_WAIT_FOR_FIRST_CONSUMER = "StorageClassWaitForFirstConsumer"
    READ_WRITE_MANY_FAILED = "ReadWriteManyFailed"
    NODE_CACHE_PLUGIN_NOT_DEPLOYED = "NodeCachePluginNotDeployed"
    NODE_CACHE_SIZE_NOT_SET = "NodeCacheSizeNotSet"
    NODE_CACHE_SELECTS_NO_NODE = "NodeCacheSelectsNoNode"


# Reasons that still let delivery work (the metric reports 1).
SATISFYING_REASONS = frozenset(
    {PrerequisitesReason.SATISFIED, PrerequisitesReason.READ_WRITE_MANY_UNCONFIRMED}
)


class ClaimPhase(enum.StrEnum):
    PENDING = "Pending"
    BOUND = "Bound"
    LOST = "Lost"


@dataclasses.dataclass(frozen=True)
class StorageClassFacts:
    name: str
    volume_binding_mode: str = IMMEDIATE
    is_default: bool = False


@dataclasses.dataclass(frozen=True)
class SharedClaimFacts:
    """A claim labelled `ai.deckhouse.io/shared-pvc=true`."""

    namespace: str
    name: str
    storage_class: str | None
    phase: ClaimPhase
    # The provisioner's message when its latest ProvisioningFailed Event about this very claim (by
    # uid) names an access mode (`names_access_mode`); None otherwise.
    access_mode_refusal: str | None = None


# What a provisioner's refusal of a ReadWriteMany claim says, in the words of the common ones once
# case, spaces and punctuation are dropped: "ReadWriteMany", "access mode(s)" / "AccessModes",
# CSI's MULTI_NODE_MULTI_WRITER or "multi writer", "volume capabilities not supported" (CSI's access
# mode and access type; a shared claim asks for nothing unusual but the mode), and "only
# ReadWriteOnce". Not "RWX": class names carry it ("nfs-rwx").
ACCESS_MODE_WORDS = (
    "readwritemany",
    "accessmode",
    "multinodemultiwriter",
    "multiwriter",
    "volumecapabilit",
    "readwriteonce",
)


def names_access_mode(message: str, *, masked: Sequence[str] = ()) -> bool:
    """Whether a ProvisioningFailed message is about the access mode. `masked` are names the
    message may quote (the class, the claim, its namespace), left out first so that a class called
    "readwritemany-nfs" does not make every failure of it look like one."""
    text = message.lower()
    for name in masked:
        if name:
            text = text.replace(name.lower(), " ")
    folded = "".join(char for char in text if "a" <= char <= "z")
    return any(word in folded for word in ACCESS_MODE_WORDS)


@dataclasses.dataclass(frozen=True, kw_only=True)
class StorageInputs:
    mode: DeliveryMode
    shared_pvc_storage_class: str | None = None
    global_storage_class: str | None = None
    storage_classes: Sequence[StorageClassFacts] = ()
    shared_claims: Sequence[SharedClaimFacts] = ()
    node_cache_size: str | None = None
    node_cache_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    node_labels: Sequence[Mapping[str, str]] = ()
    # Why the release runs no node plugin (the chart's words), None when it runs one.
    node_cache_unavailable: str | None = None


@dataclasses.dataclass(frozen=True)
class PrerequisitesVerdict:
    mode: DeliveryMode
    reason: PrerequisitesReason
    message: str
    storage_class: str | None = None
    storage_class_source: StorageClassSource | None = None

    @property
    def satisfied(self) -> bool:
        return self.reason in SATISFYING_REASONS


@dataclasses.dataclass(frozen=True)
class _Resolution:
    name: str | None
    source: StorageClassSource
    failure: PrerequisitesReason | None
    message: str


def resolve_storage_class(inputs: StorageInputs) -> _Resolution:
    """The SharedPVC class through the fallback chain, or why there is none."""
    known = {item.name: item for item in inputs.storage_classes}
    for name, source, setting in (
        (
            inputs.shared_pvc_storage_class,
            StorageClassSource.MODULE_SETTING,
            "delivery.sharedPVCStorageClassName",
        ),
        (
            inputs.global_storage_class,
            StorageClassSource.GLOBAL_STORAGE_CLASS,
            "Deckhouse's global storage class",
        ),
    ):
        if name:
            if name in known:
                return _Resolution(name, source, None, f"StorageClass {name} from {setting}")
            return _Resolution(
                name,
                source,
                PrerequisitesReason.STORAGE_CLASS_NOT_FOUND,
                f"StorageClass {name} named by {setting} does not exist; create it or name another class",
            )
    defaults = sorted(item.name for item in inputs.storage_classes if item.is_default)
    if len(defaults) == 1:
        return _Resolution(
            defaults[0], StorageClassSource.DEFAULT_STORAGE_CLASS, None, f"default StorageClass {defaults[0]}"
        )
    if not defaults:
        return _Resolution(
            None,
            StorageClassSource.NOT_FOUND,
            PrerequisitesReason.NO_DEFAULT_STORAGE_CLASS,
            "no StorageClass is named by delivery.sharedPVCStorageClassName or the global storage class, "
            "and the cluster has no default StorageClass; set delivery.sharedPVCStorageClassName to a "
            "ReadWriteMany class with volumeBindingMode Immediate",
        )
    return _Resolution(
        None,
        StorageClassSource.NOT_FOUND,
        PrerequisitesReason.SEVERAL_DEFAULT_STORAGE_CLASSES,
        f"several default StorageClasses ({', '.join(defaults)}); set delivery.sharedPVCStorageClassName",
    )


def evaluate(inputs: StorageInputs) -> PrerequisitesVerdict:
    if inputs.mode is DeliveryMode.NODE_CACHE:
        return _node_cache(inputs)
    return _shared_pvc(inputs)


def _shared_pvc(inputs: StorageInputs) -> PrerequisitesVerdict:
    resolution = resolve_storage_class(inputs)
    if resolution.failure is not None:
        return PrerequisitesVerdict(
            inputs.mode, resolution.failure, resolution.message, resolution.name, resolution.source
        )
    assert resolution.name is not None
    storage_class = next(item for item in inputs.storage_classes if item.name == resolution.name)
    if storage_class.volume_binding_mode != IMMEDIATE:
        return PrerequisitesVerdict(
            inputs.mode,
            PrerequisitesReason.STORAGE_CLASS_WAIT_FOR_FIRST_CONSUMER,
            f"{resolution.message} binds volumes only for a first consumer (volumeBindingMode "
            f"{storage_class.volume_binding_mode}); shared volumes need Immediate binding",
            resolution.name,
            resolution.source,
        )
    claims = [claim for claim in inputs.shared_claims if claim.storage_class == resolution.name]
    if any(claim.phase is ClaimPhase.BOUND for claim in claims):
        reason, message = (
            PrerequisitesReason.SATISFIED,
            f"{resolution.message}; ReadWriteMany confirmed by a bound claim",
        )
    elif refused := [claim for claim in claims if claim.access_mode_refusal]:
        first = refused[0]
        reason = PrerequisitesReason.READ_WRITE_MANY_FAILED
        message = (
            f"{resolution.message}: the provisioner refused the shared claim {first.namespace}/{first.name} "
            f"for its access mode ReadWriteMany: {first.access_mode_refusal}; use a class whose "
            "provisioner supports ReadWriteMany"
        )
    elif lost := [claim for claim in claims if claim.phase is ClaimPhase.LOST]:
        first = lost[0]
        reason = PrerequisitesReason.READ_WRITE_MANY_FAILED
        message = (
            f"{resolution.message}: the shared claim {first.namespace}/{first.name} could not get a "
            "ReadWriteMany volume; use a class whose provisioner supports ReadWriteMany"
        )
    else:
        reason = PrerequisitesReason.READ_WRITE_MANY_UNCONFIRMED
        message = f"{resolution.message}; ReadWriteMany is confirmed by the first shared claim that binds"
    return PrerequisitesVerdict(inputs.mode, reason, message, resolution.name, resolution.source)


def _node_cache(inputs: StorageInputs) -> PrerequisitesVerdict:
    if inputs.node_cache_unavailable:
        return PrerequisitesVerdict(
            inputs.mode, PrerequisitesReason.NODE_CACHE_PLUGIN_NOT_DEPLOYED, inputs.node_cache_unavailable
        )
    if not inputs.node_cache_size:
        return PrerequisitesVerdict(
            inputs.mode, PrerequisitesReason.NODE_CACHE_SIZE_NOT_SET, "set delivery.nodeCache.size"
        )
    selector = dict(inputs.node_cache_selector)
    matching = [
        labels for labels in inputs.node_labels if all(labels.get(k) == v for k, v in selector.items())
    ]
    if not matching:
        wanted = ",".join(f"{key}={value}" for key, value in sorted(selector.items())) or "(empty)"
        return PrerequisitesVerdict(
            inputs.mode,
            PrerequisitesReason.NODE_CACHE_SELECTS_NO_NODE,
            f"no node matches delivery.nodeCache.nodeSelector {wanted}; "
            "label the cache nodes or change the selector",
        )
    return PrerequisitesVerdict(
        inputs.mode, PrerequisitesReason.SATISFIED, f"{len(matching)} node(s) keep a model cache"
    )
