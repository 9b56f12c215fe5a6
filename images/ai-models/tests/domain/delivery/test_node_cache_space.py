"""The node cache's pure rules: budget arithmetic, which trees to evict, the report annotation."""

from __future__ import annotations

import datetime
import json

import pytest

from ai_models.domain.delivery.node_cache import (
    REPORT_MAX_DIGESTS,
    CachedTree,
    CacheReport,
    DoesNotFit,
    Fits,
    Space,
    WaitForGrace,
    abandoned,
    make_room,
    progress,
    reference_record,
    stamps_record,
)
from ai_models.domain.sizes import size_text

MIB = 1024 * 1024
DIGEST = "sha256:" + "a" * 64
NOW = 10_000.0
GRACE = 600.0


def tree(name: str, *, size: int = MIB, last_used: float = 0.0, referenced: bool = False) -> CachedTree:
    return CachedTree(digest=name, size_bytes=size, last_used=last_used, referenced=referenced)


def space(*, limit: int = 4 * MIB, free: int = 100 * MIB, held: int = 0, committed: int = 0) -> Space:
    return Space(limit_bytes=limit, free_bytes=free, held_bytes=held, committed_bytes=committed)


def room(needed: int, trees: list[CachedTree], *, budget: Space, reserved: int = 0) -> object:
    return make_room(
        needed_bytes=needed,
        space=budget,
        trees=trees,
        reserved_bytes=reserved,
        grace_seconds=GRACE,
        now=NOW,
        what="Model team-a/llama",
    )


@pytest.mark.parametrize(
    ("budget", "capacity", "available"),
    [
        (space(limit=4 * MIB, free=100 * MIB, held=MIB, committed=MIB), 4 * MIB, 3 * MIB),
        # The disk is the tighter bound: what the cache holds plus the free space.
        (space(limit=4 * MIB, free=MIB, held=MIB, committed=MIB), 2 * MIB, MIB),
        # Reservations count in full before their bytes are written.
        (space(limit=4 * MIB, free=100 * MIB, held=0, committed=3 * MIB), 4 * MIB, MIB),
        (space(limit=4 * MIB, free=0, held=MIB, committed=2 * MIB), MIB, 0),
    ],
)
def test_the_budget_is_the_limit_capped_by_the_disk(budget: Space, capacity: int, available: int) -> None:
    assert (budget.capacity_bytes, budget.available_bytes) == (capacity, available)


def test_what_fits_evicts_nothing() -> None:
    assert room(MIB, [tree("old")], budget=space(committed=MIB)) == Fits(evict=())


def test_least_recently_used_trees_past_their_grace_go_first_and_only_as_many_as_needed() -> None:
    trees = [
        tree("newest", last_used=NOW - GRACE),
        tree("oldest", last_used=1.0),
        tree("mounted", last_used=0.0, referenced=True),
        tree("middle", last_used=2.0),
    ]
    assert room(2 * MIB, trees, budget=space(committed=4 * MIB)) == Fits(evict=("oldest", "middle"))
    assert room(3 * MIB, trees, budget=space(committed=4 * MIB)) == Fits(evict=("oldest", "middle", "newest"))


def test_trees_within_their_grace_make_the_download_wait_until_the_earliest_passes() -> None:
    trees = [tree("old", last_used=1.0), tree("recent", last_used=NOW - 10), tree("later", last_used=NOW - 5)]
    decision = room(2 * MIB, trees, budget=space(committed=3 * MIB + MIB // 2))
    assert isinstance(decision, WaitForGrace)
    assert decision.retry_at == NOW - 10 + GRACE
    assert decision.message.startswith(
        "waiting for space for Model team-a/llama: needs 2.0 MiB, 512.0 KiB available"
    )


def test_referenced_trees_and_reservations_never_make_room() -> None:
    trees = [tree("mounted", size=2 * MIB, referenced=True), tree("unused", last_used=1.0)]
    decision = room(2 * MIB, trees, budget=space(committed=4 * MIB), reserved=MIB)
    assert isinstance(decision, DoesNotFit)
    assert decision.message == (
        "Model team-a/llama needs 2.0 MiB but the node cache has 0 B available of 4.0 MiB even after "
        "evicting every unused tree (2.0 MiB in 1 trees pods on this node mount, 1.0 MiB reserved by "
        "other downloads, 1.0 MiB in 1 unused trees); raise delivery.nodeCache.size, free disk space "
        "on the node, or schedule the workload to another node"
    )


def test_larger_than_the_whole_budget_does_not_fit_an_empty_cache() -> None:
    assert isinstance(room(5 * MIB, [], budget=space()), DoesNotFit)


def test_the_report_annotation_is_compact_sorted_and_bounded() -> None:
    now = datetime.datetime(2026, 12, 4, 3, 0, tzinfo=datetime.UTC)
    report = CacheReport(
        limit_bytes=10, used_bytes=4, available_bytes=6, ready_digests=("sha256:b", "sha256:a")
    )
    text = report.annotation(now=now)
    assert text == (
        '{"limitBytes":10,"usedBytes":4,"availableBytes":6,"readyDigests":["sha256:a","sha256:b"],'
        '"updatedAt":"2026-12-04T03:00:00Z"}'
    )

    many = tuple(f"sha256:{index:064x}" for index in range(REPORT_MAX_DIGESTS + 3))
    document = json.loads(CacheReport(1, 1, 0, ready_digests=many[::-1]).annotation(now=now))
    assert document["readyDigests"] == list(many[:REPORT_MAX_DIGESTS])
    assert document["truncated"] is True


@pytest.mark.parametrize(
    ("count", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (3 * MIB // 2, "1.5 MiB"), (5 << 40, "5.0 TiB")],
)
def test_sizes_for_people(count: int, text: str) -> None:
    assert size_text(count) == text


def test_progress_is_in_the_unit_of_the_total() -> None:
    assert progress(int(3.1 * 1024 * MIB), 16 * 1024 * MIB) == "3.1 of 16.0 GiB"
    assert progress(0, 10) == "0 of 10 B"


def test_staging_is_abandoned_after_a_day_without_writes_unless_wanted() -> None:
    assert abandoned(newest_write=0.0, now=86_400.0, wanted=False)
    assert not abandoned(newest_write=1.0, now=86_400.0, wanted=False)
    assert not abandoned(newest_write=0.0, now=1e9, wanted=True)


def test_records_have_names_of_their_own() -> None:
    assert stamps_record(DIGEST) == f"objects/sha256-{'a' * 64}.stamps"
    first = reference_record("/var/lib/kubelet/pods/a/volumes/x/mount")
    assert first.startswith("refs/")
    assert first.endswith(".json")
    assert first != reference_record("/var/lib/kubelet/pods/b/volumes/x/mount")
