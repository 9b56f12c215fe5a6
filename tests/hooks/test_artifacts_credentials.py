"""artifacts_credentials: copies of the object-store Secrets in the module namespace."""

from __future__ import annotations

import base64
from typing import Any

from deckhouse import hook

from support.values import MINIMAL_SETTINGS, module_values

SOURCES, COPIES, NAMESPACE = "source_secrets", "copies", "module_namespace"
ACCESS = base64.b64encode(b"AKIA-secret-access").decode()
SECRET = base64.b64encode(b"very-secret-key-value").decode()
CA_PEM = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()


def namespace(*, terminating: bool = False) -> list[dict[str, Any]]:
    """The snapshot of the Namespace binding once Helm has created d8-ai-models."""
    return [{"filterResult": {"name": "d8-ai-models", "terminating": terminating}}]


def source(name: str, **data: str) -> dict[str, Any]:
    return {"name": name, "data": data}


def creds(name: str = "ai-models-s3") -> dict[str, Any]:
    return source(name, accessKey=ACCESS, secretKey=SECRET)


def ca(name: str = "s3-ca") -> dict[str, Any]:
    return source(name, **{"ca.crt": CA_PEM})


def values(ca_secret: str | None = None) -> dict[str, Any]:
    artifacts = dict(MINIMAL_SETTINGS["artifacts"])
    if ca_secret:
        artifacts["caSecretName"] = ca_secret
    return module_values({"artifacts": artifacts})


def expected_copy(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "operation": "CreateOrUpdate",
        "object": {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": "d8-ai-models",
                "labels": {"heritage": "deckhouse", "module": "ai-models"},
            },
            "type": "Opaque",
            "data": data,
        },
    }


def deletion(name: str) -> dict[str, Any]:
    return {
        "operation": "Delete",
        "kind": "Secret",
        "namespace": "d8-ai-models",
        "name": name,
        "apiVersion": "v1",
    }


def run(kit: Any, contexts: list[dict[str, Any]], initial: dict[str, Any]) -> Any:
    return hook.testrun(
        kit.load("artifacts_credentials").main, binding_context=contexts, initial_values=initial
    )


def test_synchronization_copies_only_the_named_secret(kit: Any) -> None:
    snaps = {
        SOURCES: kit.snapshot(creds(), creds("someone-else"), source("unrelated", token="eA==")),
        COPIES: [],
        NAMESPACE: namespace(),
    }
    output = run(kit, [kit.synchronization(SOURCES, snaps)], values())
    assert kit.kube(output) == [
        expected_copy("ai-models-artifacts-credentials", {"accessKey": ACCESS, "secretKey": SECRET})
    ]
    assert output.values_patches.data == []


def test_ca_secret_is_copied_with_its_setting(kit: Any, capsys: Any) -> None:
    snaps = {SOURCES: kit.snapshot(creds(), ca()), COPIES: [], NAMESPACE: namespace()}
    output = run(kit, [kit.before_helm(snaps)], values("s3-ca"))
    assert kit.kube(output) == [
        expected_copy("ai-models-artifacts-credentials", {"accessKey": ACCESS, "secretKey": SECRET}),
        expected_copy("ai-models-artifacts-ca", {"ca.crt": CA_PEM}),
    ]
    captured = capsys.readouterr()
    assert ACCESS not in captured.out + captured.err


def test_copies_in_sync_are_not_rewritten(kit: Any) -> None:
    copies = kit.snapshot(
        {"name": "ai-models-artifacts-credentials", "data": {"accessKey": ACCESS, "secretKey": SECRET}},
        {"name": "ai-models-artifacts-ca", "data": {"ca.crt": CA_PEM}},
    )
    snaps = {SOURCES: kit.snapshot(creds(), ca()), COPIES: copies, NAMESPACE: namespace()}
    output = run(kit, [kit.event(SOURCES, "Modified", creds(), snaps)], values("s3-ca"))
    assert kit.kube(output) == []


def test_rotated_source_updates_the_copy(kit: Any) -> None:
    rotated = base64.b64encode(b"rotated").decode()
    copies = kit.snapshot(
        {"name": "ai-models-artifacts-credentials", "data": {"accessKey": ACCESS, "secretKey": SECRET}}
    )
    changed = source("ai-models-s3", accessKey=ACCESS, secretKey=rotated)
    snaps = {SOURCES: kit.snapshot(changed), COPIES: copies, NAMESPACE: namespace()}
    output = run(kit, [kit.event(SOURCES, "Modified", changed, snaps)], values())
    assert kit.kube(output) == [
        expected_copy("ai-models-artifacts-credentials", {"accessKey": ACCESS, "secretKey": rotated})
    ]


def test_removed_ca_setting_deletes_the_ca_copy(kit: Any) -> None:
    copies = kit.snapshot(
        {"name": "ai-models-artifacts-credentials", "data": {"accessKey": ACCESS, "secretKey": SECRET}},
        {"name": "ai-models-artifacts-ca", "data": {"ca.crt": CA_PEM}},
    )
    output = run(
        kit,
        [kit.before_helm({SOURCES: kit.snapshot(creds(), ca()), COPIES: copies, NAMESPACE: namespace()})],
        values(),
    )
    assert kit.kube(output) == [deletion("ai-models-artifacts-ca")]


def test_deleted_source_deletes_the_copy_and_logs_no_data(kit: Any, capsys: Any) -> None:
    copies = kit.snapshot(
        {"name": "ai-models-artifacts-credentials", "data": {"accessKey": ACCESS, "secretKey": SECRET}}
    )
    output = run(
        kit,
        [kit.event(SOURCES, "Deleted", creds(), {SOURCES: [], COPIES: copies, NAMESPACE: namespace()})],
        values(),
    )
    assert kit.kube(output) == [deletion("ai-models-artifacts-credentials")]
    captured = capsys.readouterr()
    assert "d8-system/ai-models-s3 not found" in captured.err
    assert ACCESS not in captured.out + captured.err
    assert SECRET not in captured.out + captured.err


def test_missing_source_without_copy_deletes_nothing(kit: Any) -> None:
    output = run(
        kit,
        [kit.synchronization(SOURCES, {SOURCES: [], COPIES: [], NAMESPACE: namespace()})],
        values("s3-ca"),
    )
    assert kit.kube(output) == []


def test_deleted_copy_is_recreated(kit: Any) -> None:
    gone = {"name": "ai-models-artifacts-credentials", "data": {"accessKey": ACCESS, "secretKey": SECRET}}
    output = run(
        kit,
        [
            kit.event(
                COPIES, "Deleted", gone, {SOURCES: kit.snapshot(creds()), COPIES: [], NAMESPACE: namespace()}
            )
        ],
        values(),
    )
    assert kit.kube(output) == [
        expected_copy("ai-models-artifacts-credentials", {"accessKey": ACCESS, "secretKey": SECRET})
    ]


def test_incomplete_source_leaves_the_copy(kit: Any, capsys: Any) -> None:
    copies = kit.snapshot(
        {"name": "ai-models-artifacts-credentials", "data": {"accessKey": ACCESS, "secretKey": SECRET}}
    )
    partial = source("ai-models-s3", accessKey=ACCESS)
    output = run(
        kit,
        [
            kit.event(
                SOURCES,
                "Modified",
                partial,
                {SOURCES: kit.snapshot(partial), COPIES: copies, NAMESPACE: namespace()},
            )
        ],
        values(),
    )
    assert kit.kube(output) == []
    captured = capsys.readouterr()
    assert "lacks secretKey" in captured.err
    assert ACCESS not in captured.err


# ----- the first install: the hook runs before Helm has created d8-ai-models (issue 14 item 2) -----


def test_first_install_writes_nothing_before_the_namespace_exists(kit: Any, capsys: Any) -> None:
    """Synchronization and beforeHelm of a first install: no d8-ai-models yet. A write there would
    fail with 404 and the module run would be retried before Helm ever created the namespace."""
    snaps = {SOURCES: kit.snapshot(creds(), ca()), COPIES: [], NAMESPACE: []}
    for context in (
        kit.synchronization(SOURCES, snaps),
        kit.synchronization(NAMESPACE, snaps),
        kit.before_helm(snaps),
    ):
        output = run(kit, [context], values("s3-ca"))
        assert kit.kube(output) == []
        assert output.values_patches.data == []
    captured = capsys.readouterr()
    assert "namespace d8-ai-models does not exist yet" in captured.err
    assert ACCESS not in captured.out + captured.err


def test_the_namespace_added_event_writes_the_copies(kit: Any) -> None:
    """Helm has created d8-ai-models: its Added event runs the hook, which writes both copies."""
    snaps = {SOURCES: kit.snapshot(creds(), ca()), COPIES: [], NAMESPACE: namespace()}
    added = {"name": "d8-ai-models", "terminating": False}
    output = run(kit, [kit.event(NAMESPACE, "Added", added, snaps)], values("s3-ca"))
    assert kit.kube(output) == [
        expected_copy("ai-models-artifacts-credentials", {"accessKey": ACCESS, "secretKey": SECRET}),
        expected_copy("ai-models-artifacts-ca", {"ca.crt": CA_PEM}),
    ]


def test_first_install_then_added_then_a_normal_run(kit: Any) -> None:
    """The whole first install in order: nothing before the namespace, the copies on Added, and a
    normal beforeHelm afterwards (the copies in the snapshot) writes nothing again."""
    sources = kit.snapshot(creds(), ca())
    before = run(kit, [kit.before_helm({SOURCES: sources, COPIES: [], NAMESPACE: []})], values("s3-ca"))
    assert kit.kube(before) == []
    added = run(
        kit,
        [
            kit.event(
                NAMESPACE,
                "Added",
                {"name": "d8-ai-models", "terminating": False},
                {SOURCES: sources, COPIES: [], NAMESPACE: namespace()},
            )
        ],
        values("s3-ca"),
    )
    written = [operation["object"] for operation in kit.kube(added)]
    assert [item["metadata"]["name"] for item in written] == [
        "ai-models-artifacts-credentials",
        "ai-models-artifacts-ca",
    ]
    copies = kit.snapshot(*({"name": item["metadata"]["name"], "data": item["data"]} for item in written))
    normal = run(
        kit, [kit.before_helm({SOURCES: sources, COPIES: copies, NAMESPACE: namespace()})], values("s3-ca")
    )
    assert kit.kube(normal) == []


def test_a_terminating_namespace_gets_no_writes(kit: Any) -> None:
    """A namespace being deleted refuses new objects (403): the hook waits instead of failing."""
    copies = kit.snapshot({"name": "ai-models-artifacts-ca", "data": {"ca.crt": CA_PEM}})
    snaps = {SOURCES: kit.snapshot(creds()), COPIES: copies, NAMESPACE: namespace(terminating=True)}
    output = run(kit, [kit.before_helm(snaps)], values())
    assert kit.kube(output) == []
