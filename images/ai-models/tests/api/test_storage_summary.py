"""The storage summary: unknown numbers absent (never 0), per-scope use from the ledger, the
catalog's authorization, and one shared ledger read per snapshot age however many ask at once."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.api.catalog.ledger_view import LedgerReading, LedgerSnapshot, LedgerState
from ai_models.api.catalog.storage_summary import summarize
from ai_models.api.catalog.verdicts import VerdictBook
from ai_models.domain.storage.codec import LEDGER_SECRET_NAME
from ai_models.domain.storage.ledger import EntryState, Ledger, LedgerEntry, Owner, Scope
from kubeemu.authn import Identity, new_token

SUMMARY = "/api/catalog-import/v1/storage-summary"
GIB = 1024**3
READ_AT = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC)


def entry(name: str, scope: Scope, size: int, state: EntryState) -> LedgerEntry:
    kind = "ClusterModel" if scope is Scope.CLUSTER else "Model"
    owner = Owner(kind=kind, namespace="" if scope is Scope.CLUSTER else "team", name=name, uid=f"u-{name}")
    return LedgerEntry(owner=owner, scope=scope, size_bytes=size, state=state)


MIXED = (
    entry("a", Scope.NAMESPACED, 3 * GIB, EntryState.PUBLISHED),
    entry("b", Scope.NAMESPACED, 2 * GIB, EntryState.PUBLISHED),
    entry("c", Scope.NAMESPACED, 1 * GIB, EntryState.RESERVED),
    entry("d", Scope.CLUSTER, 4 * GIB, EntryState.PUBLISHED),
)
MIXED_SCOPES = [
    {"scope": "Namespaced", "usedBytes": 5 * GIB, "reservedBytes": 1 * GIB, "artifacts": 2},
    {"scope": "Cluster", "usedBytes": 4 * GIB, "reservedBytes": 0, "artifacts": 1},
]


def snapshot(ledger: Ledger | None) -> LedgerSnapshot:
    reading = LedgerReading(ledger, LedgerState.PRESENT if ledger is not None else LedgerState.MISSING)
    return LedgerSnapshot(
        reading=reading, book=VerdictBook(ledger=ledger, capacity_bytes=None), read_at=READ_AT, taken_at=0.0
    )


def served(ledger: Ledger | None, capacity: int | None) -> dict[str, Any]:
    body: dict[str, Any] = summarize(snapshot(ledger), capacity_bytes=capacity).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    return body


@pytest.mark.parametrize(
    "ledger", [None, Ledger(entries=MIXED, confirmed=False)], ids=["missing", "unconfirmed"]
)
@pytest.mark.parametrize("capacity", [None, 20 * GIB])
def test_unknown_usage_leaves_every_usage_number_out(ledger: Ledger | None, capacity: int | None) -> None:
    body = served(ledger, capacity)
    expected: dict[str, Any] = {
        "capacityKnown": capacity is not None,
        "usageKnown": False,
        "snapshotAt": "2026-03-01T12:00:00Z",
    }
    if capacity is not None:
        expected["capacityBytes"] = capacity
    assert body == expected


def test_without_a_budget_capacity_and_availability_are_absent() -> None:
    body = served(Ledger(entries=MIXED, confirmed=True), None)
    assert body == {
        "capacityKnown": False,
        "usageKnown": True,
        "usedBytes": 9 * GIB,
        "reservedBytes": 1 * GIB,
        "scopes": MIXED_SCOPES,
        "snapshotAt": "2026-03-01T12:00:00Z",
    }


def test_known_capacity_and_usage_give_every_number_per_scope() -> None:
    body = served(Ledger(entries=MIXED, confirmed=True), 20 * GIB)
    assert body == {
        "capacityKnown": True,
        "usageKnown": True,
        "capacityBytes": 20 * GIB,
        "usedBytes": 9 * GIB,
        "reservedBytes": 1 * GIB,
        "availableBytes": 10 * GIB,
        "scopes": MIXED_SCOPES,
        "snapshotAt": "2026-03-01T12:00:00Z",
    }


def test_an_empty_confirmed_ledger_is_known_zero_use_and_an_overrun_budget_has_none_left() -> None:
    empty = served(Ledger(confirmed=True), 5 * GIB)
    assert (empty["usedBytes"], empty["reservedBytes"], empty["availableBytes"]) == (0, 0, 5 * GIB)
    assert [scope["artifacts"] for scope in empty["scopes"]] == [0, 0]
    overrun = served(Ledger(entries=MIXED, confirmed=True), 8 * GIB)
    assert overrun["availableBytes"] == 0


@pytest.fixture
def http(start_api: Any, store: DirectoryStore, api_cluster: Any) -> Iterator[httpx.Client]:
    api = start_api(store, capacity_limit_bytes=20 * GIB)
    user = api_cluster.user("reader")
    with httpx.Client(
        base_url=api.url, timeout=30, headers={"Authorization": f"Bearer {user.token}"}
    ) as client:
        yield client


def test_a_missing_ledger_serves_no_usage_numbers(http: httpx.Client) -> None:
    response = http.get(SUMMARY)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["capacityKnown"] is True
    assert body["usageKnown"] is False
    # Absent, not zero: a client must not mistake "unknown" for "nothing used".
    assert not {"usedBytes", "reservedBytes", "availableBytes", "scopes"} & set(body)


def test_the_summary_follows_a_new_ledger_within_the_snapshot_age(
    api_cluster: Any, start_api: Any, store: DirectoryStore
) -> None:
    api_cluster.put_ledger(Ledger(entries=MIXED, confirmed=True))
    api = start_api(store, capacity_limit_bytes=20 * GIB, api_ledger_max_age_seconds=0.2)
    user = api_cluster.user("reader")
    with httpx.Client(
        base_url=api.url, timeout=30, headers={"Authorization": f"Bearer {user.token}"}
    ) as http:
        first = http.get(SUMMARY).json()
        assert first["availableBytes"] == 10 * GIB
        assert first["scopes"] == MIXED_SCOPES
        api_cluster.put_ledger(Ledger(entries=MIXED[:1], confirmed=True))
        deadline = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=10)
        while (second := http.get(SUMMARY).json())["usedBytes"] != 3 * GIB:
            assert datetime.datetime.now(datetime.UTC) < deadline
        assert second["availableBytes"] == 17 * GIB
        assert datetime.datetime.fromisoformat(second["snapshotAt"]) > datetime.datetime.fromisoformat(
            first["snapshotAt"]
        )
        api_cluster.delete_ledger()
        while "usedBytes" in (third := http.get(SUMMARY).json()):
            assert datetime.datetime.now(datetime.UTC) < deadline
        assert third["usageKnown"] is False


def test_the_summary_takes_the_catalogs_authorization(
    api_cluster: Any, start_api: Any, store: DirectoryStore
) -> None:
    api = start_api(store)
    emulator = api_cluster.emulator
    limited = api_cluster.user("namespace-user", namespace="default")
    lister = emulator.add_identity(Identity(name="lister", token=new_token()))
    emulator.cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "catalog-list-only"},
            "rules": [{"apiGroups": ["ai.deckhouse.io"], "resources": ["catalogimports"], "verbs": ["list"]}],
        }
    )
    emulator.cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "catalog-list-only"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "catalog-list-only",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "lister"}],
        }
    )
    with httpx.Client(base_url=api.url, timeout=30) as http:
        anonymous = http.get(SUMMARY)
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"] == "Bearer"
        for who in (limited, lister):
            refused = http.get(SUMMARY, headers={"Authorization": f"Bearer {who.token}"})
            assert refused.status_code == 403, who.name
            assert refused.json()["type"] == "urn:ai-models:problem:forbidden"
            assert "get catalogimports.ai.deckhouse.io cluster-wide" in refused.json()["detail"]


def test_a_burst_of_summaries_shares_one_ledger_read(
    api_cluster: Any, start_api: Any, store: DirectoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 concurrent requests within one snapshot age: the emulator serves the ledger Secret once."""
    api_cluster.put_ledger(Ledger(entries=MIXED, confirmed=True))
    cluster = api_cluster.emulator.cluster
    reads: list[str] = []
    original = cluster.get

    def counting_get(rtype: Any, *, namespace: str, name: str) -> dict[str, Any]:
        if rtype.plural == "secrets" and name == LEDGER_SECRET_NAME:
            reads.append(namespace)
            # A slow read, so the burst piles up behind it instead of arriving after it.
            time.sleep(0.5)
        found: dict[str, Any] = original(rtype, namespace=namespace, name=name)
        return found

    monkeypatch.setattr(cluster, "get", counting_get)
    api = start_api(store, capacity_limit_bytes=20 * GIB, api_ledger_max_age_seconds=30)
    user = api_cluster.user("reader")
    headers = {"Authorization": f"Bearer {user.token}"}
    with httpx.Client(base_url=api.url, timeout=30, headers=headers) as warm:
        assert warm.get("/api/catalog-import/v1/sources").status_code == 200  # the reviews, cached

    async def burst() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
        async with httpx.AsyncClient(base_url=api.url, timeout=60, headers=headers, limits=limits) as client:
            return await asyncio.gather(*(client.get(SUMMARY) for _ in range(200)))

    responses = asyncio.run(burst())
    assert [response.status_code for response in responses] == [200] * 200
    assert len({response.json()["snapshotAt"] for response in responses}) == 1
    assert responses[0].json()["availableBytes"] == 10 * GIB
    assert reads == ["d8-ai-models"]
