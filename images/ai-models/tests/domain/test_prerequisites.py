"""The storage-prerequisites verdict, one case per reason of the closed vocabulary."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.domain.storage.prerequisites import (
    ClaimPhase,
    PrerequisitesReason,
    SharedClaimFacts,
    StorageClassFacts,
    StorageClassSource,
    StorageInputs,
    evaluate,
    names_access_mode,
)

NFS = StorageClassFacts("nfs-rwx")
CEPH = StorageClassFacts("ceph-rwx", is_default=True)
LOCAL = StorageClassFacts("local-path", volume_binding_mode="WaitForFirstConsumer", is_default=True)
SHARED = StorageInputs(mode=DeliveryMode.SHARED_PVC, storage_classes=(NFS, CEPH))


REFUSAL = "failed to provision volume: volume capabilities not supported: access modes [ReadWriteMany]"


def claim(
    phase: ClaimPhase, *, storage_class: str = "ceph-rwx", refusal: str | None = None
) -> SharedClaimFacts:
    return SharedClaimFacts("team-a", "ai-models-llama", storage_class, phase, access_mode_refusal=refusal)


def with_(**changes: object) -> StorageInputs:
    return dataclasses.replace(SHARED, **changes)  # type: ignore[arg-type]


def test_module_setting_wins_over_the_global_class_and_the_default() -> None:
    verdict = evaluate(with_(shared_pvc_storage_class="nfs-rwx", global_storage_class="ceph-rwx"))
    assert (verdict.storage_class, verdict.storage_class_source) == (
        "nfs-rwx",
        StorageClassSource.MODULE_SETTING,
    )


def test_global_class_wins_over_the_default() -> None:
    verdict = evaluate(with_(global_storage_class="nfs-rwx"))
    assert (verdict.storage_class, verdict.storage_class_source) == (
        "nfs-rwx",
        StorageClassSource.GLOBAL_STORAGE_CLASS,
    )


def test_single_default_class_is_used_last() -> None:
    verdict = evaluate(SHARED)
    assert (verdict.storage_class, verdict.storage_class_source) == (
        "ceph-rwx",
        StorageClassSource.DEFAULT_STORAGE_CLASS,
    )


def test_before_any_claim_the_class_is_usable_but_read_write_many_unconfirmed() -> None:
    verdict = evaluate(SHARED)
    assert verdict.reason is PrerequisitesReason.READ_WRITE_MANY_UNCONFIRMED
    assert verdict.satisfied


def test_a_bound_shared_claim_confirms_read_write_many() -> None:
    verdict = evaluate(with_(shared_claims=(claim(ClaimPhase.PENDING), claim(ClaimPhase.BOUND))))
    assert verdict.reason is PrerequisitesReason.SATISFIED
    assert verdict.satisfied


@pytest.mark.parametrize("failed", [claim(ClaimPhase.PENDING, refusal=REFUSAL), claim(ClaimPhase.LOST)])
def test_a_failed_shared_claim_refutes_read_write_many(failed: SharedClaimFacts) -> None:
    verdict = evaluate(with_(shared_claims=(failed,)))
    assert verdict.reason is PrerequisitesReason.READ_WRITE_MANY_FAILED
    assert not verdict.satisfied
    assert "team-a/ai-models-llama" in verdict.message


def test_an_access_mode_refusal_is_named_with_the_provisioners_words() -> None:
    verdict = evaluate(with_(shared_claims=(claim(ClaimPhase.PENDING, refusal=REFUSAL),)))
    assert REFUSAL in verdict.message
    assert "ceph-rwx" in verdict.message


def test_a_pending_claim_without_an_access_mode_refusal_leaves_read_write_many_unconfirmed() -> None:
    verdict = evaluate(with_(shared_claims=(claim(ClaimPhase.PENDING),)))
    assert verdict.reason is PrerequisitesReason.READ_WRITE_MANY_UNCONFIRMED
    assert verdict.satisfied
    assert "confirmed by the first shared claim that binds" in verdict.message


def test_a_bound_claim_of_the_class_wins_over_a_refused_one() -> None:
    # The class did give a ReadWriteMany volume; the refusal was about something else after all.
    refused = claim(ClaimPhase.PENDING, refusal=REFUSAL)
    verdict = evaluate(with_(shared_claims=(refused, claim(ClaimPhase.BOUND))))
    assert verdict.reason is PrerequisitesReason.SATISFIED
    assert "confirmed by a bound claim" in verdict.message


def test_a_refusal_for_another_class_says_nothing_about_this_one() -> None:
    refused = claim(ClaimPhase.PENDING, storage_class="nfs-rwx", refusal=REFUSAL)
    assert evaluate(with_(shared_claims=(refused,))).reason is PrerequisitesReason.READ_WRITE_MANY_UNCONFIRMED


@pytest.mark.parametrize(
    "message",
    [
        # external-provisioner over the AWS EBS CSI driver
        'failed to provision volume with StorageClass "gp3": rpc error: code = InvalidArgument desc = '
        "Volume capabilities MULTI_NODE_MULTI_WRITER not supported. "
        "Only AccessModes[ReadWriteOnce] supported.",
        # the in-tree volume plugins
        "invalid AccessModes [ReadWriteMany]: only AccessModes [ReadWriteOnce] are supported",
        # ceph-csi RBD with a filesystem volume
        'failed to provision volume with StorageClass "ceph-rbd": rpc error: code = InvalidArgument desc = '
        "multi node access modes are only supported on rbd `block` type volumes",
        # rancher local-path-provisioner
        'failed to provision volume with StorageClass "local-path": '
        "NodePath only supports ReadWriteOnce and ReadWriteOncePod (1.22+) access modes",
        # GCE PD CSI
        "rpc error: code = InvalidArgument desc = VolumeCapabilities is invalid: specified multi writer with "
        "mount access type",
        # the test bed's provisioner
        'failed to provision volume with StorageClass "testbed-rwo": rpc error: code = InvalidArgument '
        "desc = volume capabilities not supported: access modes [ReadWriteMany]",
    ],
)
def test_provisioners_refusals_of_the_access_mode_are_recognised(message: str) -> None:
    assert names_access_mode(message)


@pytest.mark.parametrize(
    ("message", "masked"),
    [
        ('failed to provision volume with StorageClass "nfs-rwx": exceeded quota: compute-resources', ()),
        ("rpc error: code = Unavailable desc = connection refused", ()),
        ('storageclass.storage.k8s.io "gone" not found', ()),
        (
            'failed to provision volume with StorageClass "readwritemany-nfs": rpc error: code = '
            "ResourceExhausted desc = no space left",
            ("readwritemany-nfs",),
        ),
        (
            "claim team-a/ai-models-accessmode-demo-0123456789: timed out waiting for the volume",
            ("ai-models-accessmode-demo-0123456789", "team-a"),
        ),
    ],
)
def test_other_provisioning_failures_are_not_about_the_access_mode(
    message: str, masked: tuple[str, ...]
) -> None:
    assert not names_access_mode(message, masked=masked)


def test_claims_of_another_class_say_nothing_about_this_one() -> None:
    verdict = evaluate(with_(shared_claims=(claim(ClaimPhase.BOUND, storage_class="nfs-rwx"),)))
    assert verdict.reason is PrerequisitesReason.READ_WRITE_MANY_UNCONFIRMED


@pytest.mark.parametrize(
    ("inputs", "reason", "hint"),
    [
        (with_(shared_pvc_storage_class="missing"), PrerequisitesReason.STORAGE_CLASS_NOT_FOUND, "missing"),
        (
            with_(global_storage_class="missing"),
            PrerequisitesReason.STORAGE_CLASS_NOT_FOUND,
            "global storage class",
        ),
        (
            with_(storage_classes=(NFS,)),
            PrerequisitesReason.NO_DEFAULT_STORAGE_CLASS,
            "sharedPVCStorageClassName",
        ),
        (
            with_(storage_classes=(CEPH, dataclasses.replace(NFS, is_default=True))),
            PrerequisitesReason.SEVERAL_DEFAULT_STORAGE_CLASSES,
            "ceph-rwx, nfs-rwx",
        ),
        (
            with_(storage_classes=(LOCAL,)),
            PrerequisitesReason.STORAGE_CLASS_WAIT_FOR_FIRST_CONSUMER,
            "Immediate",
        ),
    ],
)
def test_unusable_shared_pvc_class_is_named_with_its_reason(
    inputs: StorageInputs, reason: PrerequisitesReason, hint: str
) -> None:
    verdict = evaluate(inputs)
    assert verdict.reason is reason
    assert not verdict.satisfied
    assert hint in verdict.message


NODE_CACHE = StorageInputs(
    mode=DeliveryMode.NODE_CACHE,
    node_cache_size="200Gi",
    node_cache_selector={"ai.deckhouse.io/model-cache": "true"},
    node_labels=(
        {"kubernetes.io/hostname": "gpu-1", "ai.deckhouse.io/model-cache": "true"},
        {"kubernetes.io/hostname": "cpu-1"},
    ),
)


def test_node_cache_is_satisfied_when_the_selector_matches_a_node() -> None:
    verdict = evaluate(NODE_CACHE)
    assert verdict.reason is PrerequisitesReason.SATISFIED
    assert "1 node(s)" in verdict.message


def test_node_cache_selecting_no_node_is_named() -> None:
    verdict = evaluate(dataclasses.replace(NODE_CACHE, node_cache_selector={"pool": "gpu"}))
    assert verdict.reason is PrerequisitesReason.NODE_CACHE_SELECTS_NO_NODE
    assert "pool=gpu" in verdict.message


def test_node_cache_without_a_size_is_named() -> None:
    verdict = evaluate(dataclasses.replace(NODE_CACHE, node_cache_size=None))
    assert verdict.reason is PrerequisitesReason.NODE_CACHE_SIZE_NOT_SET


UNAVAILABLE = (
    "node-driver-registrar image for Kubernetes 1.35 missing: neither the module nor Deckhouse ships one"
)


def test_node_cache_without_its_node_plugin_is_named_with_the_charts_words_before_anything_else() -> None:
    # Even with no size and no node selected, the missing plugin is the first thing to fix.
    inputs = dataclasses.replace(
        NODE_CACHE, node_cache_unavailable=UNAVAILABLE, node_cache_size=None, node_labels=()
    )
    verdict = evaluate(inputs)
    assert verdict.reason is PrerequisitesReason.NODE_CACHE_PLUGIN_NOT_DEPLOYED
    assert verdict.message == UNAVAILABLE
    assert not verdict.satisfied


def test_every_reason_is_reachable() -> None:
    reached = {
        evaluate(inputs).reason
        for inputs in (
            SHARED,
            with_(shared_claims=(claim(ClaimPhase.BOUND),)),
            with_(shared_claims=(claim(ClaimPhase.LOST),)),
            with_(shared_pvc_storage_class="missing"),
            with_(storage_classes=(NFS,)),
            with_(storage_classes=(CEPH, dataclasses.replace(NFS, is_default=True))),
            with_(storage_classes=(LOCAL,)),
            dataclasses.replace(NODE_CACHE, node_cache_selector={"pool": "gpu"}),
            dataclasses.replace(NODE_CACHE, node_cache_size=None),
            dataclasses.replace(NODE_CACHE, node_cache_unavailable=UNAVAILABLE),
        )
    }
    assert reached == set(PrerequisitesReason)


def test_the_evaluator_uses_only_the_standard_library() -> None:
    # Helm hooks import it with the ai_models package but without the runtime's dependencies: it
    # and the module's own modules it imports (transitively) use nothing else.
    from ai_models.domain.storage import prerequisites  # noqa: PLC0415

    package = Path(prerequisites.__file__).parents[2]
    pending, seen, imports = ["ai_models.domain.storage.prerequisites"], set(), set()
    while pending:
        module = pending.pop()
        seen.add(module)
        source = (package.parent / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8")
        for line in source.splitlines():
            if line.startswith(("import ", "from ")):
                name = line.split()[1]
                if name.startswith("ai_models."):
                    pending.extend([name] if name not in seen else [])
                else:
                    imports.add(name.split(".")[0])
    assert imports <= {"__future__", "dataclasses", "enum", "collections"}
    assert seen == {"ai_models.domain.storage.prerequisites", "ai_models.domain.delivery.mode"}
