"""Archive bombs and garbage against the real publisher: `ai-models publish` runs in a subprocess,
and its peak RSS and CPU time are measured (`os.wait4`) while it refuses or publishes them.

The publish Job's memory limit is 384 MiB; the publisher itself starts at about 70 MiB. Every
input, however hostile, must end in ArtifactPublished or UnsupportedSource (never a retry), with
the peak well under the limit and CPU time bounded.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.domain.artifacts.digest import upload_digest
from ai_models.domain.artifacts.layout import upload_payload_key, upload_record_key
from ai_models.domain.artifacts.sniff import PayloadFormat
from ai_models.domain.artifacts.upload_record import UploadRecord, record_to_json
from ai_models.domain.storage.ledger import Owner
from ai_models.names import ModelKind, ModelReason
from fakes.model_files import (
    GIB,
    MIB,
    TAR_END,
    TAR_GNU_MAGIC,
    ArchivePart,
    Repeated,
    Zeros,
    pax_header,
    safetensors_bytes,
    tar_header,
    tar_member,
    tar_padding,
    write_archive,
    zip_directory_bomb,
)

ENTRY_POINT = Path(sys.executable).parent / "ai-models"
PUBLISHER_MEMORY_LIMIT = 384 * MIB
PEAK_RSS_BOUND = 192 * MIB  # half the limit; a publisher at rest takes about 70 MiB
CPU_SECONDS_BOUND = 20.0  # a refusal takes well under 5 s; today's code took ten minutes
# Safety nets, so that a regression fails the test instead of swapping the machine.
_ADDRESS_SPACE_LIMIT = 3 * GIB
_CPU_LIMIT_SECONDS = 60

OWNER = Owner(
    kind=ModelKind.MODEL.value, namespace="team-a", name="tiny", uid="6f1c2a1e-0000-4000-8000-0000000000b0"
)
_EXPECTED_REASONS = (ModelReason.ARTIFACT_PUBLISHED.value, ModelReason.UNSUPPORTED_SOURCE.value)
WEIGHTS = safetensors_bytes({"w": ("F32", (16,))})
CONFIG = b'{"model_type": "llama", "max_position_embeddings": 2048}'


@dataclasses.dataclass(frozen=True)
class Run:
    exit_code: int
    reason: str
    message: str
    retryable: bool
    peak_rss_bytes: int
    cpu_seconds: float


_MEASURE = f"""
import json, os, resource, sys
pid = os.fork()
if pid == 0:
    resource.setrlimit(resource.RLIMIT_AS, ({_ADDRESS_SPACE_LIMIT}, {_ADDRESS_SPACE_LIMIT}))
    resource.setrlimit(resource.RLIMIT_CPU, ({_CPU_LIMIT_SECONDS}, {_CPU_LIMIT_SECONDS}))
    os.dup2(os.open(os.environ["PUBLISHER_LOG"], os.O_WRONLY | os.O_CREAT), 1)
    os.dup2(1, 2)
    os.execv(sys.argv[1], sys.argv[1:])
_pid, status, usage = os.wait4(pid, 0)
print(json.dumps({{"exit_code": os.waitstatus_to_exitcode(status), "maxrss_kib": usage.ru_maxrss,
                  "cpu_seconds": usage.ru_utime + usage.ru_stime}}))
"""


def publish_payload(
    directory: Path, parts: Sequence[ArchivePart], payload_format: PayloadFormat, *, gzip: bool = False
) -> Run:
    """Stage `parts` as the upload of a Model, as the upload API leaves it, and run the publisher."""
    directory.mkdir(parents=True, exist_ok=True)
    store = DirectoryStore(directory / "store")
    store.put_bytes(upload_record_key(OWNER), b"{}")  # creates the upload's directory
    size = write_archive(parts, store.root.joinpath(*upload_payload_key(OWNER).split("/")), gzip=gzip)
    # Archives are checked member by member, not against the payload's sha256; one file is.
    sha256 = (
        hashlib.sha256(b"".join(part for part in parts if isinstance(part, bytes))).hexdigest()
        if all(isinstance(part, bytes) for part in parts)
        else "5e" * 32
    )
    record = UploadRecord(
        sha256=sha256,
        size_bytes=size,
        format=payload_format,
        filename="model",
        received_at="2026-01-02T03:04:05Z",
    )
    store.put_bytes(upload_record_key(OWNER), record_to_json(record))
    termination = directory / "termination-log"
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith(("AI_MODELS_", "HF_"))
    }
    environment.update(
        {
            "AI_MODELS_PUBLISH_OWNER_KIND": OWNER.kind,
            "AI_MODELS_PUBLISH_OWNER_NAMESPACE": OWNER.namespace,
            "AI_MODELS_PUBLISH_OWNER_NAME": OWNER.name,
            "AI_MODELS_PUBLISH_OWNER_UID": OWNER.uid,
            "AI_MODELS_PUBLISH_DIGEST": upload_digest(sha256),
            "AI_MODELS_PUBLISH_SOURCE_TYPE": "Upload",
            "AI_MODELS_PUBLISH_TERMINATION_MESSAGE_PATH": str(termination),
            "AI_MODELS_PUBLISH_REPORT_PROGRESS": "false",
            "AI_MODELS_STORE_URL": f"file://{store.root}",
            "PUBLISHER_LOG": str(directory / "publisher.log"),
        }
    )
    # A small interpreter forks the publisher and reaps it with wait4: a child forked from this
    # (large) test process would start with its RSS and report that as its peak.
    measured = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _MEASURE, str(ENTRY_POINT), "publish"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    usage = json.loads(measured.stdout)
    outcome = json.loads(termination.read_text()) if termination.exists() else {}
    print(  # seen with -s: the figures behind the bounds
        f"publisher: {usage['maxrss_kib'] / 1024:.0f} MiB peak RSS, {usage['cpu_seconds']:.2f} s CPU, "
        f"payload {size} bytes: {outcome.get('reason')}"
    )
    message = str(outcome.get("message"))
    if outcome.get("reason") not in _EXPECTED_REASONS:  # the traceback, for the failure report
        message += "\n" + (directory / "publisher.log").read_text()[-3000:]
    return Run(
        exit_code=usage["exit_code"],
        reason=str(outcome.get("reason")),
        message=message,
        retryable=bool(outcome.get("retryable")),
        peak_rss_bytes=usage["maxrss_kib"] * 1024,
        cpu_seconds=usage["cpu_seconds"],
    )


def assert_bounded(run: Run) -> None:
    assert run.peak_rss_bytes < PEAK_RSS_BOUND, f"peak RSS {run.peak_rss_bytes / MIB:.0f} MiB"
    assert run.cpu_seconds < CPU_SECONDS_BOUND, f"CPU {run.cpu_seconds:.1f} s"


def assert_refused(run: Run, *phrases: str) -> None:
    assert_bounded(run)
    assert run.reason == ModelReason.UNSUPPORTED_SOURCE.value, run.message
    assert run.retryable is False
    for phrase in phrases:
        assert phrase in run.message


def model_members(prefix: str = "") -> list[ArchivePart]:
    return [*tar_member(prefix + "model.safetensors", WEIGHTS), *tar_member(prefix + "config.json", CONFIG)]


def test_a_tar_gz_expanding_to_2_gib_of_a_skipped_member_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    parts = [*model_members(), *tar_member("pytorch_model.bin", Zeros(2 * GIB)), TAR_END]

    run = publish_payload(tmp_path, parts, PayloadFormat.TAR_GZIP, gzip=True)

    assert_refused(run, "expands to more than", "plain tar")
    assert (tmp_path / "store" / "artifacts").exists() is False or not any(
        path.is_file() for path in (tmp_path / "store" / "artifacts").rglob("*")
    )


def test_a_tar_gz_whose_padding_after_the_end_blocks_is_a_bomb_is_refused(tmp_path: Path) -> None:
    parts = [*model_members(), TAR_END, Zeros(2 * GIB)]

    run = publish_payload(tmp_path, parts, PayloadFormat.TAR_GZIP, gzip=True)

    assert_refused(run, "expands to more than")


@pytest.mark.parametrize("gzip", [True, False], ids=["tar.gz", "tar"])
def test_a_512_mib_pax_header_is_refused_unread(tmp_path: Path, gzip: bool) -> None:
    parts = [*pax_header({"comment": Zeros(512 * MIB)}), *model_members(), TAR_END]

    run = publish_payload(tmp_path, parts, PayloadFormat.TAR_GZIP if gzip else PayloadFormat.TAR, gzip=gzip)

    assert_refused(run, "extended header (pax)", "1048576 bytes")


def test_a_huge_gnu_long_name_is_refused_unread(tmp_path: Path) -> None:
    size = 256 * MIB
    parts = [
        tar_header("././@LongLink", size, typeflag=b"L", magic=TAR_GNU_MAGIC),
        Zeros(size),
        *model_members(),
        TAR_END,
    ]

    run = publish_payload(tmp_path, parts, PayloadFormat.TAR_GZIP, gzip=True)

    assert_refused(run, "GNU long name")


def test_a_sparse_member_with_endless_extension_blocks_is_refused(tmp_path: Path) -> None:
    extension = bytearray(512)
    extension[0:24] = b"%011o %011o " % (0, 512)  # one hole map entry, then "another block follows"
    extension[504] = 1
    header = tar_header("hole.bin", 0, typeflag=b"S", magic=TAR_GNU_MAGIC, extra={482: b"\x01"})
    # 1 GiB of extension blocks: tarfile keeps 21 map entries from each, forever.
    parts: list[ArchivePart] = [
        *model_members(),
        header,
        Repeated(bytes(extension), 2 * 1024 * 1024),
        TAR_END,
    ]

    run = publish_payload(tmp_path, parts, PayloadFormat.TAR_GZIP, gzip=True)

    assert_refused(run, "extension blocks")


def test_a_tar_gz_of_a_million_empty_members_is_refused_at_the_member_limit(tmp_path: Path) -> None:
    parts = [*model_members(), Repeated(tar_header("empty.txt", 0), 1_000_000), TAR_END]

    run = publish_payload(tmp_path, parts, PayloadFormat.TAR_GZIP, gzip=True)

    assert_refused(run, "more than 10000 members")


def test_a_zip_whose_directory_lists_a_million_members_is_refused_before_it_is_read(tmp_path: Path) -> None:
    target = tmp_path / "many.zip"
    zip_directory_bomb(target, entries=1_000_000, data=WEIGHTS)

    run = publish_payload(tmp_path / "run", [target.read_bytes()], PayloadFormat.ZIP)

    assert_refused(run, "zip archive's directory lists", "4194304 bytes")


def test_a_zip_hiding_its_end_record_signature_in_the_record_is_still_counted(tmp_path: Path) -> None:
    # The end record's directory offset (a field zipfile does not use) spells the record's own
    # signature: a search for the last signature lands inside the record.
    target = tmp_path / "hidden.zip"
    zip_directory_bomb(target, entries=20_000, data=WEIGHTS)
    data = bytearray(target.read_bytes())
    data[-6:-2] = b"PK\x05\x06"

    run = publish_payload(tmp_path / "run", [bytes(data)], PayloadFormat.ZIP)

    assert_refused(run, "zip archive's directory lists", "10000")


def test_a_zip_whose_zip64_record_claims_a_huge_directory_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "zip"
    directory.mkdir()
    with zipfile.ZipFile(directory / "a.zip", "w") as archive:
        archive.writestr("model.safetensors", WEIGHTS)
    data = (directory / "a.zip").read_bytes()
    end_at = data.rindex(b"PK\x05\x06")
    directory_at = data.rindex(b"PK\x01\x02")
    # A zip64 end record and locator that say the directory is 3 GiB, placed where zipfile looks.
    zip64 = b"PK\x06\x06" + (44).to_bytes(8, "little") + bytes(4) + bytes(8)
    zip64 += (
        (1).to_bytes(8, "little") * 2 + (3 * GIB).to_bytes(8, "little") + directory_at.to_bytes(8, "little")
    )
    locator = b"PK\x06\x07" + bytes(4) + end_at.to_bytes(8, "little") + (1).to_bytes(4, "little")
    end = bytearray(data[end_at:])
    end[8:12] = b"\xff\xff\xff\xff"  # entries on disk / total: see the zip64 record
    payload = data[:end_at] + zip64 + locator + bytes(end)

    run = publish_payload(tmp_path / "run", [payload], PayloadFormat.ZIP)

    assert_refused(run, "zip archive's directory")


def test_a_zip_member_that_inflates_past_the_budget_is_refused_before_it_is_read(tmp_path: Path) -> None:
    target = tmp_path / "bomb.zip"
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("model.safetensors", WEIGHTS)
        with archive.open("tokenizer.json", "w", force_zip64=True) as member:
            block = bytes(MIB)
            for _block in range(400):
                member.write(block)

    run = publish_payload(tmp_path / "run", [target.read_bytes()], PayloadFormat.ZIP)

    assert_refused(run, "expands to more than")


# ----- weights files at the parsers' limits ----------------------------------------------------


def test_a_safetensors_header_at_its_size_limit_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    entry = '"t%07d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}'
    count = (16 * MIB - 2) // (len(entry % 0) + 1)
    header = ("{" + ",".join(entry % index for index in range(count)) + "}").encode()
    payload = struct.pack("<Q", len(header)) + header

    run = publish_payload(tmp_path, [payload], PayloadFormat.SAFETENSORS)

    assert_refused(run, "more than 100000 tensors")


def test_a_gguf_header_of_the_most_entries_and_a_huge_array_is_refused_in_bounded_memory(
    tmp_path: Path,
) -> None:
    entries = b"".join(
        struct.pack("<Q", 8) + b"k%07d" % index + struct.pack("<II", 4, index) for index in range(65_535)
    )
    key = b"tokenizer.ggml.tokens"
    strings = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 8, 2_000_000)
    strings += (struct.pack("<Q", 4) + b"tokn") * 2_000_000  # 24 MB of strings, walked over
    payload = b"GGUF" + struct.pack("<IQQ", 3, 1, 65_536) + entries + strings  # and no tensor after them

    run = publish_payload(tmp_path, [payload], PayloadFormat.GGUF)

    assert_refused(run, "not a valid GGUF file")


# ----- property: any archive shape ---------------------------------------------------------------

# Names a publisher stores; they get small sizes (a huge one would be written to this disk).
_KEPT_NAMES = st.sampled_from(["config.json", "tokenizer.json", "m/config.json", "a/" * 300 + "deep.json"])
_SKIPPED_NAMES = st.sampled_from(
    [
        "pytorch_model.bin",
        "nested.tar.gz",
        "/etc/passwd",
        "../escape.safetensors",
        "n" * 150 + "/" + "x" * 150 + ".txt" * 300,
        "convert.py",
    ]
)
_NAMES = st.one_of(_KEPT_NAMES, _SKIPPED_NAMES, st.just("model.safetensors"), st.just("m/model.safetensors"))
_SKIPPED_SIZES = st.sampled_from([0, 1, 511, 4096, 3 * MIB + 1, 300 * MIB, 2 * GIB])
_KEPT_SIZES = st.sampled_from([0, 1, 511, 512, 4096])


@st.composite
def tar_members(draw: st.DrawFn) -> list[ArchivePart]:
    kind = draw(
        st.sampled_from(["file", "file", "weights", "symlink", "directory", "pax", "longname", "sparse"])
    )
    name = draw(_NAMES)
    if kind == "weights":
        return tar_member(name, WEIGHTS)
    if kind == "file":
        if draw(st.booleans()):
            return tar_member(draw(_SKIPPED_NAMES), Zeros(draw(_SKIPPED_SIZES)))
        return tar_member(draw(_KEPT_NAMES), Zeros(draw(_KEPT_SIZES)))
    if kind == "symlink":
        return [tar_header(name, 0, typeflag=b"2")]
    if kind == "directory":
        return [tar_header(name.rstrip("/") + "/", 0, typeflag=b"5")]
    if kind == "pax":
        value_size = draw(st.sampled_from([10, 64 * 1024, 2 * MIB, 512 * MIB]))
        return [*pax_header({"path": name, "comment": Zeros(value_size)}), *tar_member("ignored", WEIGHTS)]
    if kind == "longname":
        size = draw(st.sampled_from([200, 5000, 2 * MIB]))
        return [
            tar_header("././@LongLink", size, typeflag=b"L", magic=TAR_GNU_MAGIC),
            Zeros(size),
            tar_padding(size),
        ]
    size = draw(st.sampled_from([0, 4096, 300 * MIB]))
    header = tar_header(name, size, typeflag=b"S", magic=TAR_GNU_MAGIC)
    return [header, Zeros(size), tar_padding(size)]


@st.composite
def tar_archives(draw: st.DrawFn) -> list[ArchivePart]:
    parts: list[ArchivePart] = []
    for member in draw(st.lists(tar_members(), min_size=0, max_size=6)):
        parts += member
    if draw(st.booleans()):
        parts += tar_member("model.safetensors", WEIGHTS)
    ending = draw(st.sampled_from(["end", "end", "none", "garbage", "zeros after"]))
    if ending == "end":
        parts.append(TAR_END)
    elif ending == "garbage":
        parts.append(b"\x17" * 700)
    elif ending == "zeros after":
        parts += [TAR_END, Zeros(draw(st.sampled_from([10 * 1024, 400 * MIB])))]
    return parts


@pytest.mark.timeout(900)
@settings(max_examples=25, deadline=None)
@given(parts=tar_archives(), gzip=st.booleans())
def test_the_publisher_stays_bounded_on_any_tar_shape(
    tmp_path_factory: pytest.TempPathFactory, parts: list[ArchivePart], gzip: bool
) -> None:
    directory = tmp_path_factory.mktemp("shape")

    run = publish_payload(directory, parts, PayloadFormat.TAR_GZIP if gzip else PayloadFormat.TAR, gzip=gzip)

    assert_bounded(run)
    assert run.reason in _EXPECTED_REASONS, run.message
    assert run.retryable is False


_ZIP_METHODS = st.sampled_from(
    [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]
)


@functools.cache
def _zeros_300_mib() -> bytes:
    return bytes(300 * MIB)  # held once per session; zipfile deflates it per example (0.6 s)


@st.composite
def zip_archives(draw: st.DrawFn) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for _member in range(draw(st.integers(min_value=0, max_value=5))):
            name = draw(st.one_of(_KEPT_NAMES, _SKIPPED_NAMES))
            archive.writestr(name, bytes(draw(_KEPT_SIZES)), compress_type=draw(_ZIP_METHODS))
        if draw(st.booleans()):  # a bomb member: 300 MiB of zeros in about 300 KiB
            archive.writestr(zipfile.ZipInfo(draw(_NAMES)), b"", compress_type=zipfile.ZIP_DEFLATED)
            archive.writestr(draw(_NAMES), _zeros_300_mib(), compress_type=zipfile.ZIP_DEFLATED)
        if draw(st.booleans()):
            archive.writestr("model.safetensors", WEIGHTS, compress_type=draw(_ZIP_METHODS))
    data = bytearray(buffer.getvalue())
    lie = draw(st.sampled_from(["none", "declared size", "truncated", "garbage in directory"]))
    directory_at = data.find(b"PK\x01\x02")
    if lie == "declared size" and directory_at >= 0:
        declared = draw(st.sampled_from([0, 1, 2**31, 2**32 - 1]))
        data[directory_at + 24 : directory_at + 28] = declared.to_bytes(4, "little")
    elif lie == "truncated":
        del data[draw(st.integers(min_value=0, max_value=len(data))) :]
    elif lie == "garbage in directory" and directory_at >= 0:
        at = draw(st.integers(min_value=directory_at, max_value=len(data) - 1))
        data[at : at + 8] = draw(st.binary(min_size=8, max_size=8))
    return bytes(data)


@pytest.mark.timeout(900)
@pytest.mark.filterwarnings("ignore:Duplicate name")
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=zip_archives())
def test_the_publisher_stays_bounded_on_any_zip_shape(
    tmp_path_factory: pytest.TempPathFactory, payload: bytes
) -> None:
    directory = tmp_path_factory.mktemp("shape")

    run = publish_payload(directory, [payload], PayloadFormat.ZIP)

    assert_bounded(run)
    assert run.reason in _EXPECTED_REASONS, run.message
    assert run.retryable is False
