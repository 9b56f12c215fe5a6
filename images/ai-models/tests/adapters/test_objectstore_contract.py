"""The ObjectStore contract, proven on both backends: a directory and S3 (a real moto_server)."""

from __future__ import annotations

import concurrent.futures
import datetime
import hashlib
import io
import random
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ai_models.adapters.objectstore import (
    DirectoryStore,
    InvalidKey,
    ObjectNotFound,
    ObjectStore,
    ObjectStoreError,
    S3Store,
    SizeMismatch,
)
from ai_models.adapters.objectstore.s3 import MIN_PART_BYTES
from fakes.s3 import S3Bucket

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

MIB = 1024 * 1024


@pytest.fixture(params=["directory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "directory":
        return DirectoryStore(tmp_path / "store")
    bucket: S3Bucket = request.getfixturevalue("s3_bucket")
    # The smallest parts S3 allows and two threads, so a test-sized object still spans many parts.
    return S3Store(
        bucket.name,
        endpoint_url=bucket.server.endpoint_url,
        session=bucket.server.session(),
        part_size=MIN_PART_BYTES,
        concurrency=2,
    )


def data(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)


class GeneratedStream(io.RawIOBase):
    """`total` pseudo-random bytes made on demand; refuses to be read whole or in huge pieces.

    A store that tried to hold the object in memory would have to ask for it all at once or in
    one enormous read; this stream fails the test instead.
    """

    _PATTERN = random.Random(7).randbytes(MIB + 7)  # odd length: chunks do not repeat in step

    def __init__(
        self,
        total: int,
        *,
        max_read: int = 8 * MIB,
        fail_after: int | None = None,
        short_reads: int | None = None,
    ) -> None:
        super().__init__()
        self.total = total
        self.max_read = max_read
        self.fail_after = fail_after
        self.short_reads = short_reads
        self.served = 0
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            raise AssertionError("the store asked for the whole stream at once")
        return self._serve(size)

    def readall(self) -> bytes:
        raise AssertionError("the store asked for the whole stream at once")

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        chunk = self._serve(len(view))
        view[: len(chunk)] = chunk
        return len(chunk)

    def _serve(self, size: int) -> bytes:
        if size > self.max_read:
            raise AssertionError(f"the store asked for {size} bytes in one read")
        if self.fail_after is not None and self.served >= self.fail_after:
            raise ConnectionResetError("the source went away")
        size = min(size, self.total - self.served, self.short_reads or size)
        chunk = bytearray()
        while len(chunk) < size:
            offset = (self.served + len(chunk)) % len(self._PATTERN)
            chunk += self._PATTERN[offset : offset + size - len(chunk)]
        self.served += size
        self.digest.update(chunk)
        return bytes(chunk)


def stored_digest(store: ObjectStore, key: str) -> str:
    digest = hashlib.sha256()
    with store.open_range(key) as stream:
        while chunk := stream.read(MIB):
            digest.update(chunk)
    return digest.hexdigest()


def summary(info: Any) -> tuple[str, int, str | None]:
    return info.key, info.size, info.etag


# Writing and reading whole objects.


def test_put_bytes_then_get_bytes_round_trips(store: ObjectStore) -> None:
    payload = data(10_000)
    store.put_bytes("catalog/hf/manifest.json", payload)
    assert store.get_bytes("catalog/hf/manifest.json") == payload


def test_writes_return_what_head_reports(store: ObjectStore) -> None:
    written = store.put_bytes("a/bytes", b"hello")
    streamed = store.put_stream("a/stream", io.BytesIO(b"streamed"))
    for info in (written, streamed):
        head = store.head(info.key)
        assert head is not None
        assert summary(head) == summary(info)
        assert info.etag
        assert isinstance(head.last_modified, datetime.datetime)
        assert head.last_modified.tzinfo is not None
    assert (written.size, streamed.size) == (5, 8)


def test_put_bytes_replaces_the_object_and_its_etag(store: ObjectStore) -> None:
    first = store.put_bytes("k", b"first version")
    second = store.put_bytes("k", b"second")
    assert store.get_bytes("k") == b"second"
    assert first.etag != second.etag
    head = store.head("k")
    assert head is not None
    assert (head.size, head.etag) == (6, second.etag)


def test_empty_object_is_an_object(store: ObjectStore) -> None:
    store.put_bytes("empty", b"")
    assert store.get_bytes("empty") == b""
    head = store.head("empty")
    assert head is not None
    assert head.size == 0
    with store.open_range("empty") as stream:
        assert stream.read() == b""
    assert [info.key for info in store.list("")] == ["empty"]


def test_readers_see_the_old_or_the_new_object_never_a_mix(store: ObjectStore) -> None:
    versions = {bytes([n]) * (256 * 1024 + n) for n in range(4)}
    ordered = sorted(versions)
    store.put_bytes("catalog/src/manifest.json", ordered[0])
    stop = threading.Event()
    seen: list[bytes] = []

    def read_until_stopped() -> None:
        while not stop.is_set():
            seen.append(store.get_bytes("catalog/src/manifest.json"))

    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        readers = [pool.submit(read_until_stopped) for _ in range(2)]
        for round_ in range(12):
            store.put_bytes("catalog/src/manifest.json", ordered[round_ % len(ordered)])
        stop.set()
        for reader in readers:
            reader.result()
    assert seen
    assert all(content in versions for content in seen)


def test_unusual_but_valid_keys_work(store: ObjectStore) -> None:
    keys = ["models/Qwen 2.5/файл.bin", "repo/.gitattributes", "a..b/c", "x/ends.with.dots..", "+=@,;~"]
    for number, key in enumerate(keys):
        store.put_bytes(key, str(number).encode())
    for number, key in enumerate(keys):
        assert store.get_bytes(key) == str(number).encode()
    assert [info.key for info in store.list("")] == sorted(keys)


def test_concurrent_writers_of_different_keys_all_land(store: ObjectStore) -> None:
    keys = [f"artifacts/ns/model/d/file-{number:03d}" for number in range(40)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda key: store.put_bytes(key, key.encode()), keys))
    assert [info.key for info in store.list("artifacts/")] == keys
    assert all(store.get_bytes(key) == key.encode() for key in keys)


# Create-if-absent: the primitive an upload claims its object with.


def test_put_bytes_if_absent_creates_once_and_keeps_the_first(store: ObjectStore) -> None:
    created = store.put_bytes_if_absent("uploads/a/claim.json", b"first")
    head = store.head("uploads/a/claim.json")
    assert created is not None
    assert head is not None
    assert (created.key, created.size, created.etag) == (head.key, head.size, head.etag)
    assert store.put_bytes_if_absent("uploads/a/claim.json", b"second") is None
    assert store.get_bytes("uploads/a/claim.json") == b"first"
    assert [info.key for info in store.list("")] == ["uploads/a/claim.json"]  # no temp file left
    store.delete("uploads/a/claim.json")
    assert store.put_bytes_if_absent("uploads/a/claim.json", b"third") is not None
    assert store.get_bytes("uploads/a/claim.json") == b"third"


def test_concurrent_creates_of_one_key_have_exactly_one_winner(
    store: ObjectStore, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # Each writer with a store object of its own, as two api replicas would have.
    def another() -> ObjectStore:
        if isinstance(store, DirectoryStore):
            return DirectoryStore(store.root)
        bucket: S3Bucket = request.getfixturevalue("s3_bucket")
        return S3Store(bucket.name, endpoint_url=bucket.server.endpoint_url, session=bucket.server.session())

    writers = [another() for _ in range(6)]
    for round_ in range(5):
        key = f"uploads/ns/m/uid/claim-{round_}.json"
        barrier = threading.Barrier(len(writers))

        def create(
            pair: tuple[int, ObjectStore], key: str = key, barrier: threading.Barrier = barrier
        ) -> bool:
            number, writer = pair
            barrier.wait(timeout=30)
            return writer.put_bytes_if_absent(key, f"writer-{number}".encode()) is not None

        with concurrent.futures.ThreadPoolExecutor(max_workers=len(writers)) as pool:
            won = list(pool.map(create, enumerate(writers)))
        assert won.count(True) == 1, won
        assert store.get_bytes(key) == f"writer-{won.index(True)}".encode()


# Missing objects.


@pytest.mark.parametrize(
    "read",
    [
        pytest.param(lambda store: store.get_bytes("no/such/key"), id="get_bytes"),
        pytest.param(lambda store: store.open_range("no/such/key"), id="open_range"),
        pytest.param(lambda store: store.open_range("no/such/key", start=5, end=9), id="open_range-part"),
    ],
)
def test_missing_key_raises_object_not_found_naming_the_key(
    store: ObjectStore, read: Callable[[ObjectStore], object]
) -> None:
    store.put_bytes("no/such/neighbour", b"x")
    with pytest.raises(ObjectNotFound) as caught:
        read(store)
    assert isinstance(caught.value, KeyError)
    assert caught.value.key == "no/such/key"
    assert "'no/such/key'" in str(caught.value)
    assert store.description in str(caught.value)


def test_head_of_a_missing_key_is_none(store: ObjectStore) -> None:
    store.put_bytes("a/b/c", b"x")
    assert store.head("a/b/d") is None
    assert store.head("a/b") is None  # a prefix is not an object


# Ranges.

RANGE_SOURCE = data(10_000, seed=3)


@pytest.mark.parametrize(
    ("start", "end"),
    [
        pytest.param(0, None, id="whole"),
        pytest.param(0, 0, id="first-byte"),
        pytest.param(0, 99, id="first-bytes"),
        pytest.param(1000, 1999, id="middle"),
        pytest.param(9990, None, id="open-ended-tail"),
        pytest.param(9999, 9999, id="last-byte"),
        pytest.param(9995, 20_000, id="end-past-the-end"),
        pytest.param(10_000, None, id="start-at-the-end"),
        pytest.param(12_000, 13_000, id="start-past-the-end"),
    ],
)
def test_open_range_equals_slicing_with_an_inclusive_end(
    store: ObjectStore, start: int, end: int | None
) -> None:
    store.put_bytes("blob", RANGE_SOURCE)
    with store.open_range("blob", start=start, end=end) as stream:
        got = stream.read()
    assert got == RANGE_SOURCE[start : None if end is None else end + 1]


def test_open_range_streams_in_small_reads(store: ObjectStore) -> None:
    store.put_bytes("blob", RANGE_SOURCE)
    pieces = []
    with store.open_range("blob", start=10, end=5009) as stream:
        assert stream.readable()
        while piece := stream.read(333):
            pieces.append(piece)
    assert b"".join(pieces) == RANGE_SOURCE[10:5010]
    assert stream.closed


def test_ranges_of_an_empty_object_are_empty(store: ObjectStore) -> None:
    store.put_bytes("empty", b"")
    for start, end in [(0, None), (0, 10), (5, None)]:
        with store.open_range("empty", start=start, end=end) as stream:
            assert stream.read() == b""


@pytest.mark.parametrize(("start", "end"), [(-1, None), (10, 9), (-5, -1)])
def test_open_range_rejects_a_negative_start_or_an_end_before_the_start(
    store: ObjectStore, start: int, end: int | None
) -> None:
    store.put_bytes("blob", b"0123456789012")
    with pytest.raises(ValueError, match="range"):
        store.open_range("blob", start=start, end=end)


# Streaming writes.


def test_put_stream_keeps_memory_bounded_for_large_objects(store: ObjectStore) -> None:
    total = 64 * MIB
    stream = GeneratedStream(total)
    tracemalloc.start()
    try:
        info = store.put_stream("artifacts/ns/big/model.safetensors", stream)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # S3 holds a few 5 MiB parts (about 18 MiB measured), the directory store one 1 MiB chunk.
    assert peak < total // 2, f"peak traced memory {peak / MIB:.1f} MiB for a {total // MIB} MiB object"
    assert stream.served == total
    assert info.size == total
    head = store.head("artifacts/ns/big/model.safetensors")
    assert head is not None
    assert head.size == total
    assert stored_digest(store, "artifacts/ns/big/model.safetensors") == stream.digest.hexdigest()


@pytest.mark.parametrize("total", [100, 5 * MIB - 1, 12 * MIB + 3])
def test_put_stream_copes_with_a_stream_of_short_reads(store: ObjectStore, total: int) -> None:
    # Sockets and chunked HTTP bodies answer with whatever has arrived, not with what was asked.
    stream = GeneratedStream(total, short_reads=64 * 1024 + 1)
    info = store.put_stream("short-reads", stream)
    assert info.size == total
    assert stored_digest(store, "short-reads") == stream.digest.hexdigest()


def test_put_stream_accepts_the_right_size_promise(store: ObjectStore) -> None:
    stream = GeneratedStream(6 * MIB + 1)
    info = store.put_stream("sized", stream, size=6 * MIB + 1)
    assert info.size == 6 * MIB + 1
    assert stored_digest(store, "sized") == stream.digest.hexdigest()


@pytest.mark.parametrize(
    ("produced", "promised"),
    [
        pytest.param(100, 200, id="short-small"),
        pytest.param(300, 200, id="long-small"),
        pytest.param(7 * MIB, 11 * MIB, id="short-multipart"),
        pytest.param(11 * MIB, 7 * MIB, id="long-multipart"),
    ],
)
def test_put_stream_holds_the_stream_to_its_promised_size(
    store: ObjectStore, produced: int, promised: int
) -> None:
    store.put_bytes("k", b"previous")
    with pytest.raises(SizeMismatch, match=f"promised {promised} bytes") as caught:
        store.put_stream("k", GeneratedStream(produced), size=promised)
    assert isinstance(caught.value, ObjectStoreError)
    assert "'k'" in str(caught.value)
    assert store.get_bytes("k") == b"previous"
    assert [info.key for info in store.list("")] == ["k"]


@pytest.mark.parametrize("fail_after", [0, 100, 6 * MIB])
def test_stream_errors_pass_through_and_keep_the_old_object(store: ObjectStore, fail_after: int) -> None:
    store.put_bytes("k", b"previous")
    with pytest.raises(ConnectionResetError, match="the source went away"):
        store.put_stream("k", GeneratedStream(20 * MIB, fail_after=fail_after))
    with pytest.raises(ConnectionResetError):
        store.put_stream("new", GeneratedStream(20 * MIB, fail_after=fail_after))
    assert store.get_bytes("k") == b"previous"
    assert store.head("new") is None
    assert [info.key for info in store.list("")] == ["k"]


# Listing.

TREE = [
    "a-b",
    "a/x",
    "a/y/z",
    "a0",
    "catalog/hf/generations/g1/chunk-00000.jsonl",
    "catalog/hf/generations/g1/chunk-00001.jsonl",
    "catalog/hf/manifest.json",
    "catalog/hf2/manifest.json",
    "catalog/other/manifest.json",
    "catalog/top-level-object",
]


@pytest.fixture
def tree(store: ObjectStore) -> ObjectStore:
    for number, key in enumerate(reversed(TREE)):
        store.put_bytes(key, b"x" * number)
    return store


def test_list_is_recursive_and_sorted_like_s3(tree: ObjectStore) -> None:
    # '-' < '/' < '0': a per-directory walk that ignored the separator would put "a/..." first.
    assert [info.key for info in tree.list("")] == TREE


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("catalog/hf/", [key for key in TREE if key.startswith("catalog/hf/")]),
        ("catalog/hf", [key for key in TREE if key.startswith("catalog/hf")]),
        ("catalog/hf/generations/g1/chunk-0000", [key for key in TREE if "chunk" in key]),
        ("a", ["a-b", "a/x", "a/y/z", "a0"]),
        ("a/", ["a/x", "a/y/z"]),
        ("a/x", ["a/x"]),
        ("nothing/", []),
        ("catalog/top-level-object/", []),
        ("zzz", []),
    ],
)
def test_list_uses_plain_string_prefixes(tree: ObjectStore, prefix: str, expected: list[str]) -> None:
    assert [info.key for info in tree.list(prefix)] == expected


def test_list_reports_what_head_reports(tree: ObjectStore) -> None:
    for info in tree.list("catalog/"):
        head = tree.head(info.key)
        assert head is not None
        assert summary(info) == summary(head)
        assert info.last_modified is not None
        assert info.last_modified.tzinfo is not None


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("", ["a/", "catalog/"]),
        ("catalog/", ["catalog/hf/", "catalog/hf2/", "catalog/other/"]),
        ("catalog/h", ["catalog/hf/", "catalog/hf2/"]),
        ("catalog/hf/", ["catalog/hf/generations/"]),
        ("catalog/hf/generations/g1/", []),
        ("a", ["a/"]),
        ("missing/", []),
    ],
)
def test_list_prefixes_gives_one_level_of_full_prefixes(
    tree: ObjectStore, prefix: str, expected: list[str]
) -> None:
    assert tree.list_prefixes(prefix) == expected


# Deleting.


def test_delete_removes_the_object_and_tolerates_a_missing_one(tree: ObjectStore) -> None:
    tree.delete("a/y/z")
    assert tree.head("a/y/z") is None
    assert tree.list_prefixes("a/") == []
    tree.delete("a/y/z")
    tree.delete("never/was")
    tree.delete("a")  # a prefix, not an object: nothing happens
    assert [info.key for info in tree.list("a")] == ["a-b", "a/x", "a0"]


def test_delete_prefix_counts_and_spares_neighbours(tree: ObjectStore) -> None:
    assert tree.delete_prefix("catalog/hf/") == 3
    assert [info.key for info in tree.list("catalog/")] == [
        "catalog/hf2/manifest.json",
        "catalog/other/manifest.json",
        "catalog/top-level-object",
    ]
    assert tree.list_prefixes("catalog/") == ["catalog/hf2/", "catalog/other/"]
    assert tree.delete_prefix("catalog/hf/") == 0
    assert tree.delete_prefix("missing/") == 0


@pytest.mark.parametrize("prefix", ["", "catalog/hf", "catalog"])
def test_delete_prefix_refuses_an_empty_or_unterminated_prefix(tree: ObjectStore, prefix: str) -> None:
    with pytest.raises(InvalidKey):
        tree.delete_prefix(prefix)
    assert [info.key for info in tree.list("")] == TREE


# Hostile keys.

HOSTILE_KEYS = [
    "",
    "/etc/passwd",
    "../outside",
    "a/../../outside",
    "a/..",
    "..",
    ".",
    "a/./b",
    "a//b",
    "a/",
    "a\\b",
    "..\\outside",
    "a\x00b",
    "a\nb",
    ".tmp-0123",
    "a/.tmp-x/b",
    "k" * 1025,
    "a/" + "b" * 256,
    "lone-\ud800-surrogate",
]

KEY_OPERATIONS: dict[str, Callable[[ObjectStore, str], object]] = {
    "put_bytes": lambda store, key: store.put_bytes(key, b"x"),
    "put_stream": lambda store, key: store.put_stream(key, io.BytesIO(b"x")),
    "put_bytes_if_absent": lambda store, key: store.put_bytes_if_absent(key, b"x"),
    "get_bytes": lambda store, key: store.get_bytes(key),
    "open_range": lambda store, key: store.open_range(key),
    "head": lambda store, key: store.head(key),
    "delete": lambda store, key: store.delete(key),
    "copy_range (target)": lambda store, key: store.copy_range(key, "a/b", start=0, length=1),
    "copy_range (source)": lambda store, key: store.copy_range("a/b", key, start=0, length=1),
}


@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_hostile_keys_are_refused_by_every_method(store: ObjectStore, key: str) -> None:
    for operation in KEY_OPERATIONS.values():
        with pytest.raises(InvalidKey, match="invalid object key"):
            operation(store, key)
    assert list(store.list("")) == []


@pytest.mark.parametrize(
    "prefix", ["/abs/", "../", "a/../", "a/./", "a//b/", "a\\b/", "a\x00/", ".tmp-1/", "a/.tmp-1/"]
)
def test_hostile_prefixes_are_refused(store: ObjectStore, prefix: str) -> None:
    store.put_bytes("a/b", b"x")
    with pytest.raises(InvalidKey):
        list(store.list(prefix))
    with pytest.raises(InvalidKey):
        store.list_prefixes(prefix)
    with pytest.raises(InvalidKey):
        store.delete_prefix(prefix)
    assert store.get_bytes("a/b") == b"x"


# Copies inside the store.


def test_copy_range_copies_exactly_the_range_across_several_parts(store: ObjectStore) -> None:
    source = data(12 * MIB + 5, seed=3)
    store.put_bytes("uploads/payload", source)
    start, length = MIB + 7, 11 * MIB - 3  # three parts of S3's smallest size
    info = store.copy_range("artifacts/m/weights", "uploads/payload", start=start, length=length)
    assert store.get_bytes("artifacts/m/weights") == source[start : start + length]
    assert info == store.head("artifacts/m/weights")
    assert store.get_bytes("uploads/payload") == source


def test_copy_range_of_nothing_is_an_empty_object_and_replaces_an_old_one(store: ObjectStore) -> None:
    store.put_bytes("src", b"0123456789")
    store.put_bytes("dst", b"old")
    assert store.copy_range("dst", "src", start=3, length=0).size == 0
    assert store.get_bytes("dst") == b""
    assert store.copy_range("dst", "src", start=9, length=1).size == 1
    assert store.get_bytes("dst") == b"9"


def test_copy_range_from_a_missing_or_short_source_keeps_the_old_object(store: ObjectStore) -> None:
    store.put_bytes("dst", b"old")
    with pytest.raises(ObjectNotFound):
        store.copy_range("dst", "missing", start=0, length=1)
    store.put_bytes("src", b"0123456789")
    with pytest.raises(SizeMismatch, match="before byte 11"):
        store.copy_range("dst", "src", start=5, length=6)
    with pytest.raises(SizeMismatch):
        store.copy_range("new", "src", start=20, length=1)
    assert store.get_bytes("dst") == b"old"
    assert [info.key for info in store.list("")] == ["dst", "src"]


# Reachability.


def test_check_passes_for_a_usable_store(store: ObjectStore) -> None:
    store.check()
    store.put_bytes("k", b"v")
    store.check()
    assert [info.key for info in store.list("")] == ["k"]
