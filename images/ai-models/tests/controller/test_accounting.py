"""The controller's ledger operations against the API emulator, and the lock that keeps reconciles
and the inventory pass apart."""

from __future__ import annotations

import base64
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from ai_models.adapters.kube.ledger_store import LEDGER_LABELS, SecretLedgerStore
from ai_models.controller.accounting import Accounting, ReadersWriterLock
from ai_models.domain.storage.codec import (
    LEDGER_SECRET_KEY,
    LEDGER_SECRET_NAME,
    ledger_from_json,
    ledger_to_json,
)
from ai_models.domain.storage.ledger import EntryState, Ledger, LedgerEntry, Owner, Refusal, Scope
from ai_models.names import MODULE_NAMESPACE
from support.eventually import eventually

WAIT = 10.0  # bound for "promptly"; waits end as soon as the awaited thing happens
BLOCKED = 0.1  # how long something that must stay blocked is watched

# ----- ReadersWriterLock ------------------------------------------------------------------------------


def attempt(
    enter: Callable[[], Any], release: threading.Event | None = None
) -> tuple[threading.Thread, threading.Event]:
    """A thread that takes `enter()`'s side of the lock, says so, and holds it until `release`."""
    entered = threading.Event()

    def run() -> None:
        with enter():
            entered.set()
            if release is not None:
                assert release.wait(WAIT)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, entered


def wait_until(predicate: Callable[[], bool]) -> None:
    eventually(predicate, timeout=WAIT, interval=0.001, message="the lock's state")


def test_many_readers_hold_the_lock_together() -> None:
    lock = ReadersWriterLock()
    together = threading.Barrier(5, timeout=WAIT)
    failures: list[BaseException] = []

    def read() -> None:
        try:
            with lock.shared():
                together.wait()  # passes only when all five are inside at once
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=read) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert failures == []


def test_a_writer_excludes_readers_until_it_leaves() -> None:
    lock = ReadersWriterLock()
    release = threading.Event()
    writer, writing = attempt(lock.exclusive, release)
    assert writing.wait(WAIT)
    reader, reading = attempt(lock.shared)
    other_writer, other_writing = attempt(lock.exclusive)
    assert not reading.wait(BLOCKED)
    assert not other_writing.is_set()
    release.set()
    assert reading.wait(WAIT)
    assert other_writing.wait(WAIT)
    for thread in (writer, reader, other_writer):
        thread.join(WAIT)


def test_a_writer_waits_for_the_readers_inside() -> None:
    lock = ReadersWriterLock()
    release = threading.Event()
    readers = [attempt(lock.shared, release) for _ in range(3)]
    for _, reading in readers:
        assert reading.wait(WAIT)
    writer, writing = attempt(lock.exclusive)
    assert not writing.wait(BLOCKED)
    release.set()
    assert writing.wait(WAIT)
    writer.join(WAIT)


def test_a_waiting_writer_blocks_new_readers_so_it_is_not_starved() -> None:
    lock = ReadersWriterLock()
    order: list[str] = []
    release_first = threading.Event()
    first, first_reading = attempt(lock.shared, release_first)
    assert first_reading.wait(WAIT)

    def write() -> None:
        with lock.exclusive():
            order.append("writer")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    wait_until(lambda: lock._writers_waiting == 1)  # the writer is queued behind the first reader

    def late_read() -> None:
        with lock.shared():
            order.append("late reader")

    late = threading.Thread(target=late_read, daemon=True)
    late.start()
    late.join(BLOCKED)
    assert late.is_alive()  # a reader is inside, yet the newcomer waits for the queued writer
    release_first.set()
    for thread in (first, writer, late):
        thread.join(WAIT)
        assert not thread.is_alive()
    assert order == ["writer", "late reader"]


@pytest.mark.parametrize("side", ["shared", "exclusive"])
def test_an_exception_inside_releases_the_lock(side: str) -> None:
    lock = ReadersWriterLock()
    enter = lock.shared if side == "shared" else lock.exclusive
    with pytest.raises(RuntimeError), enter():
        raise RuntimeError("reconcile failed")
    writer, writing = attempt(lock.exclusive)
    assert writing.wait(WAIT)
    writer.join(WAIT)


def test_mixed_readers_and_writers_never_overlap_wrongly_and_all_finish() -> None:
    lock = ReadersWriterLock()
    state = threading.Lock()
    inside = {"readers": 0, "writers": 0}
    violations: list[str] = []
    done = {"shared": 0, "exclusive": 0}

    def check() -> None:
        if inside["writers"] > 1 or (inside["writers"] and inside["readers"]):
            violations.append(repr(inside))

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(200):
            side = "exclusive" if rng.random() < 0.2 else "shared"
            role = "writers" if side == "exclusive" else "readers"
            with lock.exclusive() if side == "exclusive" else lock.shared():
                with state:
                    inside[role] += 1
                    check()
                if rng.random() < 0.5:
                    time.sleep(0)  # let another thread try its luck while this one is inside
                with state:
                    check()
                    inside[role] -= 1
            with state:
                done[side] += 1

    threads = [threading.Thread(target=worker, args=(seed,), daemon=True) for seed in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
        assert not thread.is_alive(), "deadlock: a worker never finished"
    assert violations == []
    assert done["shared"] + done["exclusive"] == 12 * 200
    assert done["exclusive"] > 0
    assert done["shared"] > 0


# ----- Accounting against the emulator --------------------------------------------------------------------


def owner(name: str, kind: str = "Model") -> Owner:
    return Owner(kind=kind, namespace="team-a" if kind == "Model" else "", name=name, uid=f"uid-{name}")


QWEN, GEMMA, PHI = owner("qwen"), owner("gemma"), owner("phi", "ClusterModel")


def published(who: Owner, size: int) -> LedgerEntry:
    return LedgerEntry(owner=who, scope=Scope.NAMESPACED, size_bytes=size, state=EntryState.PUBLISHED)


def reserved(who: Owner, size: int, scope: Scope = Scope.NAMESPACED) -> LedgerEntry:
    return LedgerEntry(owner=who, scope=scope, size_bytes=size, state=EntryState.RESERVED)


class LedgerSecret:
    """The ledger Secret read and written with the plain client, apart from the store under test."""

    def __init__(self, api_client: Any) -> None:
        self.core = k8s.CoreV1Api(api_client)

    def read(self) -> tuple[Ledger | None, str] | None:
        try:
            secret = self.core.read_namespaced_secret(LEDGER_SECRET_NAME, MODULE_NAMESPACE)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        data = base64.b64decode(secret.data[LEDGER_SECRET_KEY])
        return ledger_from_json(data), secret.metadata.resource_version

    def ledger(self) -> Ledger | None:
        stored = self.read()
        assert stored is not None, "the ledger Secret does not exist"
        return stored[0]

    def write(self, ledger: Ledger) -> None:
        body = {
            "metadata": {"name": LEDGER_SECRET_NAME},
            "data": {LEDGER_SECRET_KEY: base64.b64encode(ledger_to_json(ledger)).decode()},
        }
        self.core.create_namespaced_secret(MODULE_NAMESPACE, body)


@pytest.fixture
def ledger_secret(kube_api_client: Any) -> LedgerSecret:
    k8s.CoreV1Api(kube_api_client).create_namespace({"metadata": {"name": MODULE_NAMESPACE}})
    return LedgerSecret(kube_api_client)


@pytest.fixture
def store(kube_api_client: Any, ledger_secret: LedgerSecret) -> SecretLedgerStore:
    return SecretLedgerStore(kube_api_client, namespace=MODULE_NAMESPACE)


def test_with_a_budget_a_missing_ledger_refuses_as_usage_unknown(
    store: SecretLedgerStore, ledger_secret: LedgerSecret
) -> None:
    accounting = Accounting(store, capacity_bytes=100)
    assert accounting.reserve(QWEN, Scope.NAMESPACED, 1) is Refusal.STORAGE_USAGE_UNKNOWN
    assert ledger_secret.read() is None  # nothing written


def test_with_a_budget_an_unconfirmed_ledger_refuses_as_usage_unknown(
    store: SecretLedgerStore, ledger_secret: LedgerSecret
) -> None:
    ledger_secret.write(Ledger(entries=(published(GEMMA, 10),), confirmed=False))
    before = ledger_secret.read()
    accounting = Accounting(store, capacity_bytes=100)
    assert accounting.reserve(QWEN, Scope.NAMESPACED, 1) is Refusal.STORAGE_USAGE_UNKNOWN
    assert ledger_secret.read() == before


def test_without_a_budget_a_reservation_creates_an_unconfirmed_ledger(
    store: SecretLedgerStore, ledger_secret: LedgerSecret
) -> None:
    accounting = Accounting(store, capacity_bytes=None)
    assert accounting.reserve(QWEN, Scope.NAMESPACED, 10**12) is None
    assert ledger_secret.ledger() == Ledger(entries=(reserved(QWEN, 10**12),), confirmed=False)
    secret = ledger_secret.core.read_namespaced_secret(LEDGER_SECRET_NAME, MODULE_NAMESPACE)
    assert secret.metadata.labels == LEDGER_LABELS


def test_on_a_confirmed_ledger_reservations_fit_the_budget(
    store: SecretLedgerStore, ledger_secret: LedgerSecret
) -> None:
    ledger_secret.write(Ledger(entries=(published(GEMMA, 60),), confirmed=True))
    accounting = Accounting(store, capacity_bytes=100)

    assert accounting.reserve(QWEN, Scope.NAMESPACED, 30) is None
    assert ledger_secret.ledger() == Ledger(
        entries=(published(GEMMA, 60), reserved(QWEN, 30)), confirmed=True
    )

    # The same owner asking again replaces its reservation rather than adding to it.
    assert accounting.reserve(QWEN, Scope.NAMESPACED, 40) is None
    assert ledger_secret.ledger() == Ledger(
        entries=(published(GEMMA, 60), reserved(QWEN, 40)), confirmed=True
    )

    unchanged = ledger_secret.read()
    assert accounting.reserve(QWEN, Scope.NAMESPACED, 41) is Refusal.INSUFFICIENT_STORAGE
    assert accounting.reserve(PHI, Scope.CLUSTER, 1) is Refusal.INSUFFICIENT_STORAGE
    assert ledger_secret.read() == unchanged  # a refusal writes nothing, not even the same ledger


def test_commit_replaces_the_reservation_with_the_published_size(
    store: SecretLedgerStore, ledger_secret: LedgerSecret
) -> None:
    ledger_secret.write(Ledger(entries=(published(GEMMA, 10),), confirmed=True))
    accounting = Accounting(store, capacity_bytes=100)
    assert accounting.reserve(QWEN, Scope.NAMESPACED, 50) is None
    accounting.commit(QWEN, Scope.NAMESPACED, 45)
    assert ledger_secret.ledger() == Ledger(
        entries=(published(GEMMA, 10), published(QWEN, 45)), confirmed=True
    )
    # A re-publication replaces the earlier artifact too.
    assert accounting.reserve(QWEN, Scope.NAMESPACED, 20) is None
    accounting.commit(QWEN, Scope.NAMESPACED, 20)
    assert ledger_secret.ledger() == Ledger(
        entries=(published(GEMMA, 10), published(QWEN, 20)), confirmed=True
    )


def test_commit_onto_a_missing_ledger_creates_an_unconfirmed_one(
    store: SecretLedgerStore, ledger_secret: LedgerSecret
) -> None:
    Accounting(store, capacity_bytes=100).commit(QWEN, Scope.NAMESPACED, 7)
    assert ledger_secret.ledger() == Ledger(entries=(published(QWEN, 7),), confirmed=False)


def test_releases_on_a_missing_ledger_write_nothing(
    store: SecretLedgerStore, ledger_secret: LedgerSecret
) -> None:
    accounting = Accounting(store, capacity_bytes=100)
    accounting.release(QWEN)
    accounting.release_reservation(QWEN)
    assert ledger_secret.read() is None


def test_releases_that_change_nothing_write_nothing(
    store: SecretLedgerStore, ledger_secret: LedgerSecret
) -> None:
    ledger_secret.write(Ledger(entries=(published(GEMMA, 10),), confirmed=True))
    before = ledger_secret.read()
    accounting = Accounting(store, capacity_bytes=100)
    accounting.release(QWEN)
    accounting.release_reservation(GEMMA)  # GEMMA holds no reservation
    assert ledger_secret.read() == before  # same resourceVersion: not rewritten


def test_release_reservation_keeps_the_artifact_and_release_drops_everything(
    store: SecretLedgerStore, ledger_secret: LedgerSecret
) -> None:
    ledger_secret.write(Ledger(entries=(published(GEMMA, 10), published(QWEN, 20)), confirmed=True))
    accounting = Accounting(store, capacity_bytes=100)
    assert accounting.reserve(QWEN, Scope.NAMESPACED, 30) is None
    accounting.release_reservation(QWEN)
    assert ledger_secret.ledger() == Ledger(
        entries=(published(GEMMA, 10), published(QWEN, 20)), confirmed=True
    )
    assert accounting.reserve(QWEN, Scope.NAMESPACED, 30) is None
    accounting.release(QWEN)
    assert ledger_secret.ledger() == Ledger(entries=(published(GEMMA, 10),), confirmed=True)


def test_concurrent_reservations_lose_no_write_and_never_exceed_the_budget(
    store: SecretLedgerStore, ledger_secret: LedgerSecret
) -> None:
    """As many writers at once as the controller has model workers, and then some."""
    ledger_secret.write(Ledger(confirmed=True))
    accounting = Accounting(store, capacity_bytes=40)
    owners = [owner(f"m{index}") for index in range(6)]
    results: dict[Owner, Refusal | None] = {}
    start = threading.Barrier(len(owners), timeout=WAIT)

    def reserve(who: Owner) -> None:
        start.wait()
        results[who] = accounting.reserve(who, Scope.NAMESPACED, 10)

    threads = [threading.Thread(target=reserve, args=(who,)) for who in owners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    accepted = {who for who, refusal in results.items() if refusal is None}
    assert len(results) == 6
    assert len(accepted) == 4
    assert set(results.values()) == {None, Refusal.INSUFFICIENT_STORAGE}
    ledger = ledger_secret.ledger()
    assert ledger is not None
    assert {entry.owner for entry in ledger.entries} == accepted
    assert ledger.bytes_in(EntryState.RESERVED) == 40
