"""The ledger Secret against the Kubernetes API emulator over HTTPS: read, create on first write,
usage unknown for an emptied or unreadable ledger, and no lost entries between concurrent writers
(every write is a compare-and-swap on the resourceVersion it read)."""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ai_models.adapters.kube.ledger_store import (
    LEDGER_LABELS,
    Change,
    LedgerStoreError,
    SecretLedgerStore,
    StoredLedger,
)
from ai_models.domain.storage.codec import LEDGER_SECRET_KEY, LEDGER_SECRET_NAME, ledger_to_json
from ai_models.domain.storage.ledger import EntryState, Ledger, LedgerEntry, Owner, Scope, commit, reserve
from kubeemu.authn import Identity
from kubeemu.pytest_fixtures import (  # noqa: F401  (fixtures used by this module's tests)
    RunningEmulator,
    kube_api_client,
    kube_emulator,
    kube_emulator_factory,
)

NAMESPACE = "d8-ai-models"
LLAMA = Owner(kind="Model", namespace="team-a", name="llama", uid="u1")
QWEN = Owner(kind="ClusterModel", namespace="", name="qwen", uid="u2")


@pytest.fixture
def core(kube_api_client: Any) -> Any:  # noqa: F811
    api = client.CoreV1Api(kube_api_client)
    api.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    return api


@pytest.fixture
def store(core: Any, kube_api_client: Any) -> SecretLedgerStore:  # noqa: F811
    return SecretLedgerStore(kube_api_client, namespace=NAMESPACE)


def another_store(emulator: RunningEmulator) -> SecretLedgerStore:
    """A second writer with its own connection, as another replica would have."""
    return SecretLedgerStore(emulator.api_client(), namespace=NAMESPACE)


def put_secret(core: Any, data: dict[str, str], labels: dict[str, str] | None = None) -> None:
    core.create_namespaced_secret(
        NAMESPACE,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": LEDGER_SECRET_NAME, "namespace": NAMESPACE, "labels": labels or {}},
            "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()},
        },
    )


def secret(core: Any) -> Any:
    return core.read_namespaced_secret(LEDGER_SECRET_NAME, NAMESPACE)


def secret_exists(core: Any) -> bool:
    try:
        secret(core)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def reservation_of(owner: Owner, size: int) -> Callable[[Ledger | None], Change]:
    def change(ledger: Ledger | None) -> Change:
        outcome = reserve(ledger, owner=owner, scope=Scope.NAMESPACED, size_bytes=size, capacity_bytes=None)
        return Change(outcome.ledger, result=outcome)

    return change


def test_a_missing_secret_reads_as_no_ledger_and_no_version(store: SecretLedgerStore) -> None:
    assert store.read() == StoredLedger(ledger=None, resource_version=None, readable=True)
    assert store.where == f"Secret {NAMESPACE}/{LEDGER_SECRET_NAME}"


def test_the_first_update_creates_the_secret_with_its_labels(store: SecretLedgerStore, core: Any) -> None:
    result = store.update(
        lambda ledger: Change(commit(ledger, owner=QWEN, scope=Scope.CLUSTER, size_bytes=7), "ok")
    )
    assert result == "ok"
    created = secret(core)
    assert created.metadata.labels == LEDGER_LABELS
    assert created.type == "Opaque"
    expected = Ledger(
        entries=(LedgerEntry(owner=QWEN, scope=Scope.CLUSTER, size_bytes=7, state=EntryState.PUBLISHED),),
        confirmed=False,
    )
    assert base64.b64decode(created.data[LEDGER_SECRET_KEY]) == ledger_to_json(expected)
    assert store.read() == StoredLedger(ledger=expected, resource_version=created.metadata.resource_version)


def test_updates_build_on_what_is_stored(store: SecretLedgerStore) -> None:
    store.update(lambda ledger: Change(Ledger(confirmed=True)))
    first = store.update(reservation_of(LLAMA, 5))
    second = store.update(reservation_of(QWEN, 6))
    assert first.accepted
    assert second.accepted
    stored = store.read().ledger
    assert stored is not None
    assert stored.confirmed is True
    assert {(item.owner, item.size_bytes) for item in stored.entries} == {(LLAMA, 5), (QWEN, 6)}


def test_an_update_keeps_the_secrets_other_keys_and_labels(store: SecretLedgerStore, core: Any) -> None:
    put_secret(core, {"other": "kept", LEDGER_SECRET_KEY: ""}, labels={"heritage": "deckhouse", "extra": "x"})
    store.update(reservation_of(LLAMA, 5))
    updated = secret(core)
    assert base64.b64decode(updated.data["other"]) == b"kept"
    assert updated.metadata.labels == {"heritage": "deckhouse", "extra": "x"}
    stored = store.read().ledger
    assert stored is not None
    assert stored.bytes_in(EntryState.RESERVED) == 5


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({LEDGER_SECRET_KEY: ""}, id="emptied"),
        pytest.param({LEDGER_SECRET_KEY: " \n"}, id="whitespace"),
        pytest.param({}, id="no-data"),
        pytest.param({"other": "{}"}, id="no-ledger-key"),
    ],
)
def test_an_emptied_ledger_means_usage_unknown(
    store: SecretLedgerStore, core: Any, data: dict[str, str]
) -> None:
    put_secret(core, data)
    stored = store.read()
    assert stored.ledger is None
    assert stored.readable is True
    assert stored.resource_version == secret(core).metadata.resource_version


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("{not json", id="not-json"),
        pytest.param('{"entries": "none"}', id="wrong-shape"),
        pytest.param("[]", id="array"),
        pytest.param('{"confirmed": true, "entries": [{"owner": {}}]}', id="bad-entry"),
    ],
)
def test_an_unreadable_ledger_is_flagged_and_reads_as_usage_unknown(
    store: SecretLedgerStore, core: Any, text: str
) -> None:
    put_secret(core, {LEDGER_SECRET_KEY: text})
    stored = store.read()
    assert stored == StoredLedger(
        ledger=None, resource_version=secret(core).metadata.resource_version, readable=False
    )


def test_an_update_over_an_unreadable_ledger_starts_from_none_and_replaces_it(
    store: SecretLedgerStore, core: Any
) -> None:
    put_secret(core, {LEDGER_SECRET_KEY: "{not json"})
    seen: list[Ledger | None] = []

    def change(ledger: Ledger | None) -> Change:
        seen.append(ledger)
        return Change(commit(ledger, owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=3))

    store.update(change)
    assert seen == [None]
    stored = store.read()
    assert stored.readable is True
    assert stored.ledger is not None
    assert stored.ledger.confirmed is False


def test_a_change_without_a_ledger_writes_nothing(store: SecretLedgerStore, core: Any) -> None:
    assert store.update(lambda ledger: Change(None, result="refused")) == "refused"
    assert not secret_exists(core)
    store.update(reservation_of(LLAMA, 5))
    version = secret(core).metadata.resource_version
    assert store.update(lambda ledger: Change(None, result=42)) == 42
    assert secret(core).metadata.resource_version == version


def test_a_refused_reservation_writes_nothing(store: SecretLedgerStore, core: Any) -> None:
    def change(ledger: Ledger | None) -> Change:
        outcome = reserve(ledger, owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=5, capacity_bytes=10)
        return Change(outcome.ledger if outcome.accepted else None, result=outcome)

    outcome = store.update(change)  # no ledger yet: usage unknown with a budget
    assert not outcome.accepted
    assert not secret_exists(core)


def test_a_write_racing_the_update_is_kept_and_the_change_reapplied(
    store: SecretLedgerStore,
    kube_emulator: RunningEmulator,  # noqa: F811
) -> None:
    store.update(lambda ledger: Change(Ledger(confirmed=True)))
    rival = another_store(kube_emulator)
    calls: list[Ledger | None] = []

    def change(ledger: Ledger | None) -> Change:
        calls.append(ledger)
        if len(calls) == 1:  # someone else writes between our read and our write
            rival.update(reservation_of(QWEN, 7))
        return reservation_of(LLAMA, 5)(ledger)

    store.update(change)
    assert len(calls) == 2
    assert calls[1] is not None
    assert [item.owner for item in calls[1].entries] == [QWEN]
    stored = store.read().ledger
    assert stored is not None
    assert {(item.owner, item.size_bytes) for item in stored.entries} == {(QWEN, 7), (LLAMA, 5)}


def test_a_secret_created_by_someone_else_meanwhile_is_kept(
    store: SecretLedgerStore,
    kube_emulator: RunningEmulator,  # noqa: F811
) -> None:
    rival = another_store(kube_emulator)
    calls = 0

    def change(ledger: Ledger | None) -> Change:
        nonlocal calls
        calls += 1
        if calls == 1:
            rival.update(reservation_of(QWEN, 7))  # creates the Secret first
        return reservation_of(LLAMA, 5)(ledger)

    store.update(change)
    assert calls == 2
    stored = store.read().ledger
    assert stored is not None
    assert {(item.owner, item.size_bytes) for item in stored.entries} == {(QWEN, 7), (LLAMA, 5)}


def test_a_secret_deleted_meanwhile_is_created_again(store: SecretLedgerStore, core: Any) -> None:
    store.update(reservation_of(QWEN, 7))
    calls: list[Ledger | None] = []

    def change(ledger: Ledger | None) -> Change:
        calls.append(ledger)
        if len(calls) == 1:
            core.delete_namespaced_secret(LEDGER_SECRET_NAME, NAMESPACE)
        return reservation_of(LLAMA, 5)(ledger)

    store.update(change)
    assert calls[0] is not None
    assert calls[1] is None  # the deleted ledger is gone: start from usage unknown
    stored = store.read().ledger
    assert stored is not None
    assert [(item.owner, item.size_bytes) for item in stored.entries] == [(LLAMA, 5)]
    assert secret(core).metadata.labels == LEDGER_LABELS


def test_concurrent_writers_never_lose_an_entry(
    store: SecretLedgerStore,
    kube_emulator: RunningEmulator,  # noqa: F811
) -> None:
    per_writer = 50
    store.update(lambda ledger: Change(Ledger(confirmed=True)))
    stores = [another_store(kube_emulator), another_store(kube_emulator)]
    attempts = [0] * len(stores)
    failures: list[BaseException] = []
    start = threading.Barrier(len(stores))

    def writer(index: int) -> None:
        try:
            start.wait()
            for number in range(per_writer):
                owner = Owner(
                    kind="Model", namespace=f"team-{index}", name=f"model-{number}", uid=f"{index}-{number}"
                )
                reservation = reservation_of(owner, number + 1)

                def counted(
                    ledger: Ledger | None, reservation: Callable[[Ledger | None], Change] = reservation
                ) -> Change:
                    attempts[index] += 1
                    return reservation(ledger)

                stores[index].update(counted)
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=writer, args=(index,)) for index in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []
    stored = store.read().ledger
    assert stored is not None
    assert stored.confirmed is True
    assert len(stored.entries) == len(stores) * per_writer
    assert {item.owner.uid for item in stored.entries} == {
        f"{index}-{number}" for index in range(len(stores)) for number in range(per_writer)
    }
    assert stored.bytes_in(EntryState.RESERVED) == len(stores) * sum(range(1, per_writer + 1))
    assert sum(attempts) >= len(stores) * per_writer


def test_a_forbidden_read_is_a_store_error_naming_the_secret(
    core: Any,
    kube_emulator: RunningEmulator,  # noqa: F811
) -> None:
    nobody = kube_emulator.add_identity(Identity.service_account(NAMESPACE, "nobody"))
    forbidden = SecretLedgerStore(kube_emulator.api_client(nobody), namespace=NAMESPACE)
    with pytest.raises(LedgerStoreError, match=f"cannot read Secret {NAMESPACE}/{LEDGER_SECRET_NAME}: 403"):
        forbidden.read()
    with pytest.raises(LedgerStoreError, match="cannot read"):
        forbidden.update(reservation_of(LLAMA, 5))
    assert not secret_exists(core)
