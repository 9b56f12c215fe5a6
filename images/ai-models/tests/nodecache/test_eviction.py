"""Space in the node cache: a tree a pod mounts is never evicted, unused trees go least recently used
first once their grace has passed, and what cannot fit is refused with the sizes that decide it."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from ai_models.domain.delivery.claim_layout import object_dir
from ai_models.nodecache.cache import CacheRequest, NodeCache, Ready, Unfit, Waiting
from support.node_cache_stack import CacheStack, cache_stack_fixture  # noqa: F401  (fixture)

MIB = 1024 * 1024


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def one_mib_model(stack: CacheStack, name: str) -> CacheRequest:
    return stack.publish(name, {"w.bin": random.Random(name).randbytes(MIB)})


def tree(stack: CacheStack, request: CacheRequest) -> Path:
    return stack.root / object_dir(request.digest)


def ready(cache: NodeCache, request: CacheRequest) -> None:
    state = cache.wait(request, timeout=60)
    assert isinstance(state, Ready), state


def target(stack: CacheStack, pod_uid: str) -> str:
    path = stack.root.parent / "kubelet" / "pods" / pod_uid / "mount"
    path.mkdir(parents=True)
    return str(path)


def test_a_cache_full_of_mounted_trees_refuses_a_new_one_and_evicts_nothing(cache_stack: CacheStack) -> None:
    first, second, third = (one_mib_model(cache_stack, name) for name in ("a", "b", "c"))
    cache = cache_stack.cache(limit_bytes=2 * MIB + 1000)
    for uid, request in (("uid-a", first), ("uid-b", second)):
        ready(cache, request)
        cache.hold(target=target(cache_stack, uid), digest=request.digest, pod_uid=uid)

    refused = cache.wait(third, timeout=60)
    assert isinstance(refused, Unfit), refused
    assert refused.message.startswith(f"Model team-a/c (artifact {third.digest}) needs 1.0 MiB")
    assert "1000 B available of 2.0 MiB" in refused.message
    assert "2.0 MiB in 2 trees pods on this node mount" in refused.message
    assert "raise delivery.nodeCache.size" in refused.message
    assert tree(cache_stack, first).is_dir()
    assert tree(cache_stack, second).is_dir()
    assert cache.want(third) == refused  # refused again without a download
    assert cache_stack.store.files_read() == 2 * MIB

    # The first pod goes: its tree may be evicted (grace 0 here), and the new one is fetched.
    cache.release(target=str(cache_stack.root.parent / "kubelet" / "pods" / "uid-a" / "mount"))
    ready(cache, third)
    assert not tree(cache_stack, first).exists()
    assert tree(cache_stack, second).is_dir()
    assert cache.report().ready_digests == tuple(sorted((second.digest, third.digest)))


def test_unused_trees_go_least_recently_used_first_after_their_grace(cache_stack: CacheStack) -> None:
    clock = Clock()
    old, recent, newer, newest = (
        one_mib_model(cache_stack, name) for name in ("old", "recent", "newer", "newest")
    )
    cache = cache_stack.cache(limit_bytes=2 * MIB + 1000, eviction_grace_seconds=600.0, clock=clock)
    ready(cache, old)
    clock.now += 100
    ready(cache, recent)
    mount = target(cache_stack, "uid-old")
    cache.hold(target=mount, digest=old.digest, pod_uid="uid-old")
    clock.now += 50
    cache.release(target=mount)  # the last use of "old" is now, later than "recent"'s
    used_old, used_recent = clock.now, clock.now - 50

    clock.now = used_recent + 600
    ready(cache, newer)  # "recent" is the least recently used and past its grace
    assert not tree(cache_stack, recent).exists()
    assert tree(cache_stack, old).is_dir()

    # "old" is within its grace and "newer" was just used: the download waits for the grace.
    waiting = cache.wait(newest, timeout=0.5)
    assert isinstance(waiting, Waiting), waiting
    assert waiting.message.startswith(f"waiting for space for Model team-a/newest (artifact {newest.digest})")
    assert "unused trees may be evicted 600 s after their last use" in waiting.message
    assert tree(cache_stack, old).is_dir()
    clock.now = used_old + 600
    cache.housekeeping()  # wakes the waiting download to look at the space again
    ready(cache, newest)
    assert not tree(cache_stack, old).exists()
    assert tree(cache_stack, newer).is_dir()
    assert cache_stack.store.files_read() == 4 * MIB


def test_a_disk_fuller_than_the_budget_caps_it(cache_stack: CacheStack) -> None:
    request = one_mib_model(cache_stack, "a")
    cache = cache_stack.cache(limit_bytes=100 * MIB, free_bytes=lambda: MIB // 2)
    refused = cache.wait(request, timeout=60)
    assert isinstance(refused, Unfit), refused
    assert "512.0 KiB available of 512.0 KiB" in refused.message
    assert cache.report().limit_bytes == MIB // 2
    assert cache_stack.store.files_read() == 0


def test_what_a_previous_plugin_left_is_sorted_counted_and_evictable(cache_stack: CacheStack) -> None:
    stamped, unstamped, damaged, torn = (one_mib_model(cache_stack, name) for name in ("a", "b", "c", "d"))
    cache = cache_stack.cache()
    for request in (stamped, unstamped, damaged, torn):
        ready(cache, request)
    cache.close()
    (cache_stack.root / f"{object_dir(unstamped.digest)}.stamps").unlink()
    with (tree(cache_stack, damaged) / "w.bin").open("r+b") as file:
        file.write(b"\0")  # changed while no plugin ran: the stamps see it
    (cache_stack.root / f"{object_dir(torn.digest)}.complete").unlink()  # killed mid-publication
    used_later = time.time() + 100
    os.utime(cache_stack.root / f"{object_dir(stamped.digest)}.complete", (used_later, used_later))

    restarted = cache_stack.cache(limit_bytes=2 * MIB + 1000)
    report = restarted.report()
    assert report.ready_digests == (stamped.digest,)
    assert report.used_bytes == 4 * MIB  # two trees in objects/, two in quarantine
    assert sorted(
        path.name.partition(".")[0] for path in (cache_stack.root / "quarantine").iterdir()
    ) == sorted(f"sha256-{request.digest[7:]}" for request in (damaged, torn))
    restarted.housekeeping()  # no pod holds the quarantined trees: they go
    assert restarted.report().used_bytes == 2 * MIB

    # A new tree needs room: the unstamped one is on disk, unused for longer, and goes.
    fresh = one_mib_model(cache_stack, "e")
    ready(restarted, fresh)
    assert not tree(cache_stack, unstamped).exists()
    assert tree(cache_stack, stamped).is_dir()
    assert restarted.report().used_bytes == 2 * MIB
