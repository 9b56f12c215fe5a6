"""The node cache against the real serving API: one download per digest, resumed after a stop, never
a partial tree, damaged files found and fetched again, references kept across a restart."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

from ai_models.domain.delivery.claim_layout import completion_record, object_dir, staging_dir
from ai_models.domain.delivery.node_cache import QUARANTINE_DIR, reference_record
from ai_models.nodecache.cache import CacheState, Failed, Ready, Waiting
from support.eventually import eventually
from support.node_cache_stack import CacheStack, cache_stack_fixture  # noqa: F401  (fixture)
from support.tls_files import foreign_ca

MIB = 1024 * 1024


def noise(size: int, *, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


FILES = {"config.json": b'{"model_type": "llama"}', "weights/model.safetensors": noise(3 * MIB, seed=1)}
SIZE = sum(len(content) for content in FILES.values())


def assert_tree(state: CacheState, files: dict[str, bytes] = FILES) -> Path:
    assert isinstance(state, Ready), state
    for path, content in files.items():
        assert (state.tree / path).read_bytes() == content
    assert sorted(
        str(path.relative_to(state.tree)) for path in state.tree.rglob("*") if path.is_file()
    ) == sorted(files)
    return state.tree


def mount_target(stack: CacheStack, pod_uid: str) -> str:
    """A target directory as kubelet's pod directory holds it (what the plugin mounts onto)."""
    target = (
        stack.root.parent / "kubelet" / "pods" / pod_uid / "volumes" / "kubernetes.io~csi" / "model" / "mount"
    )
    target.mkdir(parents=True)
    return str(target)


def test_many_pods_asking_at_once_cause_one_download(cache_stack: CacheStack) -> None:
    request = cache_stack.publish("llama", FILES)
    cache = cache_stack.cache()
    states: list[CacheState] = []
    start = threading.Barrier(16)

    def ask() -> None:
        start.wait()
        states.append(cache.wait(request, timeout=60))

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(states) == 16
    trees = {assert_tree(state) for state in states}
    assert trees == {cache_stack.root / object_dir(request.digest)}
    assert cache_stack.store.files_read() == SIZE
    # A hit costs no request at all.
    assert isinstance(cache.want(request), Ready)
    assert cache_stack.store.files_read() == SIZE


def test_a_stopped_download_resumes_and_a_partial_tree_is_never_ready(cache_stack: CacheStack) -> None:
    request = cache_stack.publish("llama", FILES)
    cache_stack.store.pause("weights/model.safetensors", at=MIB)
    cache = cache_stack.cache()
    first = cache.want(request)
    assert isinstance(first, Waiting)
    assert request.ref.describe() in first.message
    assert cache_stack.store.paused.wait(timeout=30)
    waiting = cache.wait(request, timeout=0.2)
    assert isinstance(waiting, Waiting)
    assert "downloading Model team-a/llama" in waiting.message
    assert " of 3.0 MiB" in waiting.message
    tree = cache_stack.root / object_dir(request.digest)
    assert not tree.exists()
    assert not (cache_stack.root / completion_record(request.digest)).exists()

    # The plugin stops mid-file (as on SIGTERM); what it fetched stays in staging.
    closing = threading.Thread(target=cache.close)
    closing.start()
    eventually(lambda: not cache.usable(), timeout=10, message="the cache to stop")
    cache_stack.store.release()
    closing.join(timeout=30)
    assert not closing.is_alive()
    staged = (cache_stack.root / staging_dir(request.digest) / "weights/model.safetensors").stat().st_size
    assert MIB <= staged < len(FILES["weights/model.safetensors"])
    assert not tree.exists()

    # A restarted plugin has nothing ready, then continues from the staged bytes.
    restarted = cache_stack.cache()
    assert restarted.report().ready_digests == ()
    opened = len(cache_stack.store.opened)
    assert_tree(restarted.wait(request, timeout=60))
    # One Range request from the staged end; config.json was complete in staging already.
    resumed = [
        (stream.key.rpartition("/files/")[2], stream.start, stream.read_bytes)
        for stream in cache_stack.store.opened[opened:]
        if "/files/" in stream.key
    ]
    assert resumed == [
        ("weights/model.safetensors", staged, len(FILES["weights/model.safetensors"]) - staged)
    ]


# A plugin process that wants one artifact and then waits to be killed.
_KILLED_PLUGIN = """
import sys, threading
from pathlib import Path
from ai_models.domain.models.reference import ModelKey
from ai_models.names import ModelKind
from ai_models.nodecache.cache import CacheConfig, CacheRequest, NodeCache
root, url, token, ca, namespace, name, digest = sys.argv[1:]
cache = NodeCache(
    CacheConfig(root=Path(root), limit_bytes=1 << 30, api_url=url, token_file=Path(token), ca_file=ca)
)
cache.want(CacheRequest(ModelKey(ModelKind.MODEL, namespace, name), digest))
threading.Event().wait()
"""


def test_a_plugin_killed_mid_download_leaves_only_staging_and_the_next_one_resumes(
    cache_stack: CacheStack,
) -> None:
    request = cache_stack.publish("llama", FILES)
    cache_stack.store.pause("weights/model.safetensors", at=MIB)
    arguments = [str(cache_stack.root), cache_stack.url, str(cache_stack.token_file)]
    arguments += [str(cache_stack.ca_file)]
    arguments += [request.ref.namespace, request.ref.name, request.digest]
    plugin = subprocess.Popen([sys.executable, "-c", _KILLED_PLUGIN, *arguments])
    try:
        assert cache_stack.store.paused.wait(timeout=60)
        staged = cache_stack.root / staging_dir(request.digest) / "weights/model.safetensors"
        eventually(lambda: staged.stat().st_size == MIB, timeout=10, message="the first MiB in staging")
    finally:
        plugin.send_signal(signal.SIGKILL)
        plugin.wait(timeout=30)
    cache_stack.store.release()
    assert not (cache_stack.root / object_dir(request.digest)).exists()

    restarted = cache_stack.cache()
    assert restarted.report().ready_digests == ()
    opened = len(cache_stack.store.opened)
    assert_tree(restarted.wait(request, timeout=60))
    weights = [
        stream for stream in cache_stack.store.opened[opened:] if stream.key.endswith("model.safetensors")
    ]
    assert [(stream.start, stream.read_bytes) for stream in weights] == [(MIB, 2 * MIB)]


def test_a_file_changed_after_publication_is_quarantined_and_fetched_again(cache_stack: CacheStack) -> None:
    request = cache_stack.publish("llama", FILES)
    cache = cache_stack.cache()
    tree = assert_tree(cache.wait(request, timeout=60))
    target = mount_target(cache_stack, "uid-1")
    cache.hold(target=target, digest=request.digest, pod_uid="uid-1")
    with (tree / "weights/model.safetensors").open("r+b") as damaged:
        damaged.seek(12345)
        byte = damaged.read(1)
        damaged.seek(12345)
        damaged.write(bytes([byte[0] ^ 0xFF]))

    again = cache.want(request)
    assert isinstance(again, Waiting), again
    assert_tree(cache.wait(request, timeout=60))
    assert cache_stack.store.files_read() == 2 * SIZE
    # The damaged tree waits in quarantine while the pod that mounted it runs, then goes.
    quarantined = list((cache_stack.root / QUARANTINE_DIR).iterdir())
    assert len(quarantined) == 1
    cache.housekeeping()
    assert quarantined[0].exists()
    cache.release(target=target)
    cache.housekeeping()
    assert not quarantined[0].exists()


def test_the_scrub_finds_a_damaged_file_whose_size_and_mtime_were_kept(cache_stack: CacheStack) -> None:
    request = cache_stack.publish("llama", FILES)
    cache = cache_stack.cache()
    tree = assert_tree(cache.wait(request, timeout=60))
    path = tree / "weights/model.safetensors"
    stats = path.stat()
    with path.open("r+b") as damaged:
        damaged.write(b"\0" * 8)
    os.utime(path, ns=(stats.st_atime_ns, stats.st_mtime_ns))
    assert isinstance(cache.want(request), Ready)  # the stat check cannot see it

    assert cache.scrub() == [request.digest]
    assert isinstance(cache.want(request), Waiting)
    assert_tree(cache.wait(request, timeout=60))
    assert cache.scrub() == []


def test_a_tree_complete_but_never_stamped_is_rehashed_before_it_is_mounted(cache_stack: CacheStack) -> None:
    request = cache_stack.publish("llama", FILES)
    cache = cache_stack.cache()
    tree = assert_tree(cache.wait(request, timeout=60))
    cache.close()
    # Killed between the completion record and the stamps, and a byte damaged meanwhile.
    (cache_stack.root / f"{object_dir(request.digest)}.stamps").unlink()
    with (tree / "weights/model.safetensors").open("r+b") as damaged:
        damaged.write(b"\xff")

    restarted = cache_stack.cache()
    assert restarted.report().ready_digests == ()
    assert isinstance(restarted.want(request), Waiting)
    assert_tree(restarted.wait(request, timeout=60))
    assert cache_stack.store.files_read() == 2 * SIZE


def test_references_are_on_disk_and_survive_a_restart(cache_stack: CacheStack) -> None:
    request = cache_stack.publish("llama", FILES)
    other = cache_stack.publish("qwen", {"w.bin": noise(2 * MIB, seed=2)})
    cache = cache_stack.cache()
    assert_tree(cache.wait(request, timeout=60))
    target = mount_target(cache_stack, "uid-1")
    cache.hold(target=target, digest=request.digest, pod_uid="uid-1")
    assert (cache_stack.root / reference_record(target)).is_file()
    cache.close()

    # Restarted with room for one tree only: the referenced one stays, the new one does not fit.
    restarted = cache_stack.cache(limit_bytes=SIZE + MIB)
    assert restarted.report().ready_digests == (request.digest,)
    refused = restarted.wait(other, timeout=60)
    assert not isinstance(refused, (Ready, Waiting)), refused
    assert (cache_stack.root / object_dir(request.digest)).is_dir()
    # Unmounted: the tree may go (the grace is 0 here), and the new one fits at once.
    restarted.release(target=target)
    assert not (cache_stack.root / reference_record(target)).exists()
    assert_tree(restarted.wait(other, timeout=60), {"w.bin": noise(2 * MIB, seed=2)})
    assert not (cache_stack.root / object_dir(request.digest)).exists()


def test_a_refused_download_says_why_and_is_retried(cache_stack: CacheStack) -> None:
    request = cache_stack.publish("llama", FILES)
    token = cache_stack.token_file.read_text()
    cache_stack.token_file.write_text("not-a-token")
    now = [1_000_000.0]
    cache = cache_stack.cache(clock=lambda: now[0])
    failed = cache.wait(request, timeout=60)
    assert isinstance(failed, Failed), failed
    assert "401" in failed.message
    assert "ServiceAccount token was not accepted" in failed.message
    assert "next attempt in" in failed.message
    # Within the backoff the answer stays; the token is read again for the next attempt.
    assert "the next attempt in 5 s" in failed.message
    cache_stack.token_file.write_text(token)
    now[0] += 4
    assert cache.want(request) == failed
    now[0] += 1
    assert isinstance(cache.want(request), Waiting)
    assert_tree(cache.wait(request, timeout=60))


def test_a_server_the_module_ca_did_not_sign_is_refused(cache_stack: CacheStack, tmp_path: Path) -> None:
    request = cache_stack.publish("llama", FILES)
    cache = cache_stack.cache(ca_file=str(foreign_ca(tmp_path / "other")))
    failed = cache.wait(request, timeout=60)
    assert isinstance(failed, Failed), failed
    assert "presents a certificate the node cache does not trust" in failed.message
    assert cache_stack.store.files_read() == 0


def test_at_most_the_configured_downloads_run_at_once(cache_stack: CacheStack) -> None:
    first = cache_stack.publish("llama", FILES)
    second = cache_stack.publish("qwen", {"w.bin": noise(MIB, seed=3)})
    cache_stack.store.pause("weights/model.safetensors", at=MIB)
    cache = cache_stack.cache(max_concurrent_downloads=1)
    assert isinstance(cache.want(first), Waiting)
    assert cache_stack.store.paused.wait(timeout=30)
    assert isinstance(cache.want(second), Waiting)

    def slot_message() -> str:
        state = cache.want(second)
        assert isinstance(state, Waiting), state
        return state.message if "slot" in state.message else ""

    assert eventually(slot_message, timeout=30, message="the second download to queue") == (
        f"waiting for a download slot for Model team-a/qwen (artifact {second.digest}) "
        "(1 downloads run, at most 1)"
    )
    assert not any(stream.key.endswith("/files/w.bin") for stream in cache_stack.store.opened)
    cache_stack.store.release()
    assert_tree(cache.wait(first, timeout=60))
    assert_tree(cache.wait(second, timeout=60), {"w.bin": noise(MIB, seed=3)})


def test_a_reference_whose_target_is_gone_is_dropped_after_the_grace(cache_stack: CacheStack) -> None:
    # kubelet never unpublished (the node rebooted and the pod directory went): the tree is not
    # held forever.
    request = cache_stack.publish("llama", FILES)
    now = [1_000_000.0]
    cache = cache_stack.cache(eviction_grace_seconds=600.0, clock=lambda: now[0])
    assert_tree(cache.wait(request, timeout=60))
    kept = mount_target(cache_stack, "uid-1")
    gone = str(Path(kept).parent.parent / "other" / "mount")
    cache.hold(target=kept, digest=request.digest, pod_uid="uid-1")
    cache.hold(target=gone, digest=request.digest, pod_uid="uid-2")
    now[0] += 599
    cache.housekeeping()
    assert (cache_stack.root / reference_record(gone)).exists()
    now[0] += 1
    cache.housekeeping()
    assert not (cache_stack.root / reference_record(gone)).exists()
    assert (cache_stack.root / reference_record(kept)).exists()


def test_staging_nobody_wants_goes_after_a_day_without_writes(cache_stack: CacheStack) -> None:
    now = [2_000_000_000.0]
    cache = cache_stack.cache(clock=lambda: now[0])
    left = cache_stack.root / staging_dir("sha256:" + "b" * 64)
    (left / "weights").mkdir(parents=True)
    (left / "weights" / "part.bin").write_bytes(b"x" * 1000)
    written = now[0] - 86_400 + 1
    for path in (left, left / "weights", left / "weights" / "part.bin"):
        os.utime(path, (written, written))
    assert cache.report().used_bytes == 1000  # counted while it is on disk
    cache.housekeeping()
    assert left.exists()
    now[0] += 1
    cache.housekeeping()
    assert not left.exists()
    assert cache.report().used_bytes == 0


def test_publishing_a_held_target_again_keeps_its_record(cache_stack: CacheStack) -> None:
    request = cache_stack.publish("llama", FILES)
    cache = cache_stack.cache()
    assert_tree(cache.wait(request, timeout=60))
    target = mount_target(cache_stack, "uid-1")
    cache.hold(target=target, digest=request.digest, pod_uid="uid-1")
    record = cache_stack.root / reference_record(target)
    first = record.stat().st_ino
    cache.hold(target=target, digest=request.digest, pod_uid="uid-1")
    assert record.stat().st_ino == first
    cache.hold(target=target, digest=request.digest, pod_uid="uid-2")  # another pod: rewritten
    assert record.stat().st_ino != first
