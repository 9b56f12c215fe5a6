"""Download verdicts: the domain's function on a ledger snapshot, in entries and in the filter."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ai_models.adapters.kube import ClientOptions, new_api_client
from ai_models.adapters.objectstore import DirectoryStore
from ai_models.api.catalog.ledger_view import LedgerReading, LedgerState, LedgerView, secret_ledger_reader
from ai_models.api.catalog.verdicts import VerdictBook
from ai_models.catalog.layout import CatalogManifest
from ai_models.domain.catalog.record import CatalogRecord
from ai_models.domain.storage.ledger import EntryState, Ledger, LedgerEntry, Owner, Scope
from ai_models.domain.storage.verdict import download_verdict
from kubeemu.authn import Identity
from support.eventually import eventually

RecordMaker = Callable[..., CatalogRecord]
GenerationWriter = Callable[..., CatalogManifest]

GIB = 1024**3
OWNER = Owner(kind="Model", namespace="team", name="m", uid="u-1")


def ledger(*, used: int, confirmed: bool) -> Ledger:
    entry = LedgerEntry(owner=OWNER, scope=Scope.NAMESPACED, size_bytes=used, state=EntryState.PUBLISHED)
    return Ledger(entries=(entry,), confirmed=confirmed)


@pytest.mark.parametrize("capacity", [None, 10 * GIB])
@pytest.mark.parametrize(
    "snapshot", [None, ledger(used=4 * GIB, confirmed=True), ledger(used=4 * GIB, confirmed=False)]
)
@pytest.mark.parametrize("size", [None, 0, 1 * GIB, 6 * GIB, 6 * GIB + 1, 100 * GIB])
def test_the_book_answers_exactly_what_the_domain_function_answers(
    capacity: int | None, snapshot: Ledger | None, size: int | None
) -> None:
    book = VerdictBook(ledger=snapshot, capacity_bytes=capacity)
    expected = download_verdict(size, ledger=snapshot, capacity_bytes=capacity)
    assert book.verdict(size) == expected
    assert book.verdict(size) == expected  # memoised: same answer the second time
    assert book.verdict_name(size) == expected.verdict.value


def test_the_ledger_is_read_at_most_once_per_max_age() -> None:
    reads: list[float] = []
    now = [100.0]

    def read() -> LedgerReading:
        reads.append(now[0])
        return LedgerReading(None, LedgerState.MISSING)

    view = LedgerView(read=read, capacity_bytes=None, max_age_seconds=5.0, clock=lambda: now[0])
    first = view.verdicts()
    now[0] += 5.0
    assert view.verdicts() is first
    now[0] += 0.1
    assert view.verdicts() is not first
    assert reads == [100.0, 105.1]


def test_concurrent_requests_share_one_ledger_read() -> None:
    started = threading.Event()
    release = threading.Event()
    reads = []

    def slow_read() -> LedgerReading:
        reads.append(1)
        started.set()
        release.wait(timeout=10)
        return LedgerReading(None, LedgerState.MISSING)

    view = LedgerView(read=slow_read, capacity_bytes=None)
    books: list[VerdictBook] = []
    threads = [threading.Thread(target=lambda: books.append(view.verdicts())) for _ in range(8)]
    for thread in threads:
        thread.start()
    assert started.wait(timeout=10)
    time.sleep(0.1)  # let every thread reach the refresh
    release.set()
    for thread in threads:
        thread.join(timeout=10)
    assert len(reads) == 1
    assert len(books) == 8
    assert all(book is books[0] for book in books)


RECORDS: list[tuple[str, dict[str, Any]]] = [
    ("org/small", {"weights_bytes": 1 * GIB, "downloads": 3}),
    ("org/large", {"weights_bytes": 8 * GIB, "downloads": 2}),
    ("org/unsized", {"downloads": 1}),
]


@dataclasses.dataclass(frozen=True)
class Case:
    capacity: int | None
    secret: str  # absent, confirmed (4 GiB used), unconfirmed or unreadable
    small: tuple[str, str]  # verdict and reason for the 1 GiB model
    large: tuple[str, str]  # and for the 8 GiB one


FITS = ("Feasible", "WithinBudget")
UNLIMITED = ("Feasible", "NoCapacityLimit")
UNKNOWN = ("NotFeasible", "StorageUsageUnknown")
TOO_LARGE = ("NotFeasible", "InsufficientStorage")
CASES = [
    # No budget: nothing is refused, whether usage is known or not.
    Case(None, "absent", UNLIMITED, UNLIMITED),
    Case(None, "confirmed", UNLIMITED, UNLIMITED),
    # A budget with unknown usage: the module cannot know what fits.
    Case(10 * GIB, "absent", UNKNOWN, UNKNOWN),
    Case(10 * GIB, "unconfirmed", UNKNOWN, UNKNOWN),
    Case(10 * GIB, "unreadable", UNKNOWN, UNKNOWN),
    # A budget with confirmed usage: 6 GiB are free.
    Case(10 * GIB, "confirmed", FITS, TOO_LARGE),
]


@pytest.fixture
def catalog_store(store: DirectoryStore, make_record: RecordMaker, write_generation: GenerationWriter) -> Any:
    write_generation(store, "hf", "g1", [[make_record("hf", i, **facts) for i, facts in RECORDS]])
    return store


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.capacity}-{c.secret}")
def test_served_verdicts_follow_the_ledger_secret_and_the_budget(
    api_cluster: Any, start_api: Any, catalog_store: DirectoryStore, case: Case
) -> None:
    if case.secret == "confirmed":
        api_cluster.put_ledger(ledger(used=4 * GIB, confirmed=True))
    elif case.secret == "unconfirmed":
        api_cluster.put_ledger(ledger(used=4 * GIB, confirmed=False))
    elif case.secret == "unreadable":
        api_cluster.put_ledger(None, raw=b'{"entries": "nonsense"}')
    api = start_api(catalog_store, capacity_limit_bytes=case.capacity)
    assert api.runtime.builder.first_pass_complete.wait(timeout=10)
    user = api_cluster.user("reader")
    headers = {"Authorization": f"Bearer {user.token}"}
    with httpx.Client(base_url=api.url, headers=headers, timeout=10) as http:
        items = http.get("/api/catalog-import/v1/models").json()["items"]
        verdicts = {item["id"]: item["downloadVerdict"] for item in items}
        assert verdicts == {
            "org/small": {"verdict": case.small[0], "reason": case.small[1], "requiredBytes": 1 * GIB},
            "org/large": {"verdict": case.large[0], "reason": case.large[1], "requiredBytes": 8 * GIB},
            "org/unsized": {"verdict": "EstimateUnavailable", "reason": "SizeUnknown"},
        }
        entry = http.get("/api/catalog-import/v1/sources/hf/models/org/large").json()
        assert entry["downloadVerdict"] == verdicts["org/large"]
        for verdict in ("Feasible", "NotFeasible", "EstimateUnavailable"):
            filtered = http.get("/api/catalog-import/v1/models", params={"verdict": verdict}).json()["items"]
            assert [item["id"] for item in filtered] == [
                i for i, _ in RECORDS if verdicts[i]["verdict"] == verdict
            ]


def test_a_new_ledger_changes_verdicts_within_the_snapshot_age(
    api_cluster: Any,
    start_api: Any,
    store: DirectoryStore,
    make_record: RecordMaker,
    write_generation: GenerationWriter,
) -> None:
    write_generation(store, "hf", "g1", [[make_record("hf", i, **facts) for i, facts in RECORDS]])
    api = start_api(store, capacity_limit_bytes=10 * GIB, api_ledger_max_age_seconds=0.2)
    assert api.runtime.builder.first_pass_complete.wait(timeout=10)
    user = api_cluster.user("reader")
    params = {"verdict": "Feasible"}
    with httpx.Client(
        base_url=api.url, headers={"Authorization": f"Bearer {user.token}"}, timeout=10
    ) as http:
        assert http.get("/api/catalog-import/v1/models", params=params).json()["items"] == []
        api_cluster.put_ledger(ledger(used=0, confirmed=True))

        def feasible() -> list[str]:
            items = http.get("/api/catalog-import/v1/models", params=params).json()["items"]
            return [item["id"] for item in items]

        # Once the 0.2 s old reading expires, the next search reads the new ledger (once).
        eventually(
            lambda: feasible() == ["org/small", "org/large"],
            timeout=10,
            message="both feasible by the new ledger",
        )
    reads = api.runtime.metrics.registry.get_sample_value(
        "d8_ai_models_api_ledger_reads_total", {"state": "Present"}
    )
    assert reads == 1


def test_the_ledger_reader_says_why_usage_is_unknown(api_cluster: Any) -> None:
    emulator = api_cluster.emulator
    timeout = (2.0, 2.0)

    def reader_as(identity: Any) -> Any:
        client = new_api_client(ClientOptions(retries=0), kubeconfig=str(emulator.kubeconfig(identity)))
        return client, secret_ledger_reader(client, namespace="d8-ai-models", request_timeout=timeout)

    api_client, read = reader_as(api_cluster.api_account)
    stranger_client, read_as_stranger = reader_as(
        emulator.add_identity(Identity.service_account("d8-ai-models", "stranger"))
    )
    try:
        assert read() == LedgerReading(None, LedgerState.MISSING)
        api_cluster.put_ledger(ledger(used=1, confirmed=True))
        assert read() == LedgerReading(ledger(used=1, confirmed=True), LedgerState.PRESENT)
        api_cluster.put_ledger(None)  # emptied: usage unknown until the inventory rebuilds it
        assert read() == LedgerReading(None, LedgerState.MISSING)
        api_cluster.put_ledger(None, raw=b"{")
        assert read() == LedgerReading(None, LedgerState.UNREADABLE)
        assert read_as_stranger() == LedgerReading(None, LedgerState.UNAVAILABLE)  # 403
        emulator.server.stop()
        assert read() == LedgerReading(None, LedgerState.UNAVAILABLE)
    finally:
        api_client.close()
        stranger_client.close()
