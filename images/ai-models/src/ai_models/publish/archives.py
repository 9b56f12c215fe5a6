"""Unpacking an uploaded archive from the store into the artifact, member by member.

A plain tar and a zip are read with random access through ranged reads of the stored payload:
their member list first, then each chosen member's bytes (a plain tar's members are copied inside
the store, see `ArtifactWriter.copy`). A tar.gz can only be read front to back. None of them ever
lands on local disk, and memory holds one piece of one member at a time.

Only regular files are taken (links, devices, FIFOs and sparse files are skipped and logged),
names go through `members` (unsafe ones are skipped and logged), and every size is bounded before
it is read: tar headers by `tarformat`, a tar.gz's decompressed bytes (skipped members, padding
and all) by the expansion budget, a zip's central directory and declared sizes here.
"""

from __future__ import annotations

import dataclasses
import logging
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable, Mapping
from typing import Final, TypeVar

from ai_models.adapters.objectstore import ByteSource, ObjectStore
from ai_models.domain.artifacts.manifest import ArtifactFile
from ai_models.domain.artifacts.selection import select_files
from ai_models.domain.artifacts.sniff import safe_member_path
from ai_models.names import ModelReason
from ai_models.publish.artifact import ArtifactWriter
from ai_models.publish.failures import PublicationFailure, unsupported
from ai_models.publish.members import PathTree, StreamingLayout, kept, path_conflict, unwrap, wrapper_of
from ai_models.publish.parallel import files_at_once, run_parallel
from ai_models.publish.progress import Progress
from ai_models.publish.streams import CountingReader, ExactReader, GzipReader, StoreFile
from ai_models.publish.tarformat import MemberKind, TarMember, damaged, member_data, members, shown

logger = logging.getLogger(__name__)

Entry = TypeVar("Entry")

MIB: Final = 1024 * 1024
# A model directory has hundreds of files at most; each member costs a header read (a request,
# in a stored tar) and, in a zip, a directory entry in memory.
MAX_MEMBERS: Final = 10_000
LISTING_WINDOW: Final = 64 * 1024  # a tar header is 512 bytes; reads after a seek start small
UNIX_CREATOR: Final = 3  # zip's "created on" system for Unix, whose mode bits say the file type
ENCRYPTED_FLAG: Final = 0x1
# Weights barely compress; tokenizer files do, but they are small. More than this is a bomb.
MAX_EXPANSION: Final = 10
EXPANSION_FLOOR_BYTES: Final = 256 * MIB  # what a small archive may expand to whatever its ratio
# 10,000 entries of 46 bytes plus a name and the usual extra fields take about 3 MiB; zipfile
# reads the directory whole and keeps an object per entry.
MAX_ZIP_DIRECTORY_BYTES: Final = 4 * MIB
_ZIP_END: Final = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR: Final = struct.Struct("<4sLQL")
_ZIP64_END: Final = struct.Struct("<4sQ2H2L4Q")
_MAX_ZIP_COMMENT: Final = 65535
# What the archive libraries raise for bytes that lie. OSError among them: zipfile seeks to
# offsets the directory states, and one before the start fails as it would on a file (the
# store's own failures are ObjectStoreError, never OSError).
# Where unpacked files wait while the wrapper is put back; a safe member segment starts with a
# letter or a digit, so no member is ever stored here.
UNWRAP_STAGING: Final = "_unwrapping"
# UnicodeDecodeError: a zip name flagged UTF-8 that is not.
ARCHIVE_ERRORS: Final = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    EOFError,
    zlib.error,
    OSError,
    UnicodeDecodeError,
)


@dataclasses.dataclass
class Budget:
    """Bytes and members an archive may still expand to.

    A tar.gz is charged every byte it decompresses to, the members it skips included; a zip the
    declared sizes of the members it publishes (zipfile never yields more than a member declares).
    """

    limit: int
    bytes_left: int
    members_left: int = MAX_MEMBERS

    @classmethod
    def for_payload(cls, payload_bytes: int) -> Budget:
        limit = max(payload_bytes * MAX_EXPANSION, EXPANSION_FLOOR_BYTES)
        return cls(limit=limit, bytes_left=limit)

    def member(self, *, archive: str) -> None:
        self.members_left -= 1
        if self.members_left < 0:
            raise unsupported(
                f"the {archive} has more than {MAX_MEMBERS} members, the most a publisher reads; a model "
                "directory has far fewer: archive the model directory alone"
            )

    def spend(self, size: int, *, archive: str) -> None:
        self.bytes_left -= size
        if self.bytes_left < 0:
            raise self._exceeded(archive)

    def check(self, size: int, *, archive: str) -> None:
        """Refuses now a member that cannot fit, rather than after decompressing up to the limit."""
        if size > self.bytes_left:
            raise self._exceeded(archive)

    def _exceeded(self, archive: str) -> PublicationFailure:
        return unsupported(
            f"the {archive} expands to more than {self.limit} bytes, the limit of {MAX_EXPANSION} times "
            f"its own size (at least {EXPANSION_FLOOR_BYTES // MIB} MiB), which no model directory "
            "reaches: upload the model as a plain tar, or its files uncompressed"
        )


def extract_tar(
    store: ObjectStore, key: str, writer: ArtifactWriter, *, size: int, progress: Progress
) -> None:
    """Store a plain tar's selected regular files through ranged reads.

    The member headers are read first (seeking over the data), so the selection and the wrapper
    are decided before anything is written; each member's bytes are then copied inside the store
    (a plain tar keeps them whole and in place) while they are read for their sha256.
    """
    archive = "tar archive"
    budget = Budget.for_payload(size)
    entries: dict[str, TarMember] = {}
    with StoreFile(store, key, size=size, first_window=LISTING_WINDOW) as file:
        for member in members(_SeekableTar(file), archive=archive):
            budget.member(archive=archive)
            path = _tar_member_path(member)
            if path is not None:
                if member.offset_data + member.size > size:
                    raise damaged(archive, f"member {shown(member.name)} ends past its end (truncated)")
                entries[path] = member  # a repeated name: the later member wins, as with tar -x
    chosen = _choose(entries, archive=archive)
    progress.total = sum(member.size for member in chosen.values())
    budget.spend(progress.total, archive=archive)

    def task(path: str, member: TarMember) -> Callable[[], ArtifactFile]:
        return lambda: writer.copy(
            path, key, start=member.offset_data, size=member.size, on_bytes=progress.add
        )

    # Each member is its own copy inside the store, so several can be stored at once; largest first.
    ordered = sorted(chosen.items(), key=lambda item: -item[1].size)
    run_parallel(
        [task(path, member) for path, member in ordered],
        workers=files_at_once(writer.store),
        progress=progress,
    )


def extract_tar_gz(payload: ByteSource, writer: ArtifactWriter, *, budget: Budget) -> None:
    """Store a tar.gz's regular files, read front to back from `payload` (gzip allows nothing else).

    Later members are unknown while earlier ones are written: the wrapper is decided by the first
    member (and undone if a later one contradicts it), and the weights-format choice is applied
    to the unpacked files afterwards (see `upload`).
    """
    archive = "tar.gz archive"
    layout = StreamingLayout()
    tree = PathTree()
    gzip = GzipReader(payload, on_output=lambda count: budget.spend(count, archive=archive))
    source = _StreamedTar(gzip, archive=archive)
    for member in members(source, archive=archive):
        budget.member(archive=archive)
        budget.check(member.size, archive=archive)
        path = _tar_member_path(member)
        if path is None:
            continue
        stored, broken = layout.place(path)
        if broken is not None:
            _unwrap_undone(writer, broken)
        if not kept(stored):
            logger.info("archive member left out", extra={"member": path})
            continue
        conflict = tree.add(path)
        if conflict is not None:
            raise _conflicting(archive, *conflict)
        writer.put(stored, member_data(source, member, archive=archive), size=member.size)
    # What follows the end-of-archive blocks (record padding) is read too, so that zlib checks
    # the stream's CRC; the budget still applies.
    while gzip.read():
        pass


def extract_zip(
    store: ObjectStore, key: str, writer: ArtifactWriter, *, size: int, progress: Progress
) -> None:
    """Store a zip's selected regular files through ranged reads (its directory sits at the end)."""
    archive_name = "zip archive"
    budget = Budget.for_payload(size)
    with StoreFile(store, key, size=size) as file:
        _check_zip_directory(file, size=size)
        with zipfile.ZipFile(file) as archive:
            entries: dict[str, zipfile.ZipInfo] = {}
            for info in archive.infolist():
                budget.member(archive=archive_name)
                path = _zip_member_path(info)
                if path is not None:
                    entries[path] = info  # a repeated name: the later member wins, as with unzip
            chosen = _choose(entries, archive=archive_name)
            progress.total = sum(info.file_size for info in chosen.values())
            budget.spend(progress.total, archive=archive_name)
            for path, info in chosen.items():
                with archive.open(info) as stream:
                    writer.put(path, _exact(stream, info), size=info.file_size, on_bytes=progress.add)


def _exact(stream: ByteSource, info: zipfile.ZipInfo) -> ExactReader:
    def too_short(count: int) -> PublicationFailure:
        return damaged(
            "zip archive",
            f"member {shown(info.filename)} holds {count} bytes, but its directory entry says "
            f"{info.file_size}",
        )

    def too_long() -> PublicationFailure:
        return damaged(
            "zip archive",
            f"member {shown(info.filename)} holds more than the {info.file_size} bytes its directory "
            "entry says",
        )

    return ExactReader(stream, info.file_size, too_short=too_short, too_long=too_long)


def _check_zip_directory(file: StoreFile, *, size: int) -> None:
    """The central directory zipfile is about to read whole is small enough to hold.

    Its size and entry count are read the way zipfile reads them (the end record, then the zip64
    record right before its locator), so a lying zip64 record is caught before zipfile trusts it.
    A payload without an end record is left to zipfile, which refuses it.
    """
    tail_start = max(0, size - _ZIP_END.size - _MAX_ZIP_COMMENT)
    file.seek(tail_start)
    tail = file.read(size - tail_start)
    # As zipfile looks: the record that ends the file, else the last whole one before a comment.
    # A bare rfind could land on the signature's bytes inside the record's own fields (its
    # directory offset, which zipfile does not use) and leave the directory unchecked.
    at = len(tail) - _ZIP_END.size
    if at < 0 or tail[at : at + 4] != b"PK\x05\x06":
        at = tail.rfind(b"PK\x05\x06", 0, max(0, len(tail) - _ZIP_END.size + 4))
    if at < 0:
        return
    end = _ZIP_END.unpack_from(tail, at)
    entries, directory_bytes = end[4], end[5]
    location = tail_start + at
    if location >= _ZIP64_LOCATOR.size + _ZIP64_END.size:
        file.seek(location - _ZIP64_LOCATOR.size - _ZIP64_END.size)
        record = file.read(_ZIP64_END.size + _ZIP64_LOCATOR.size)
        if len(record) == _ZIP64_END.size + _ZIP64_LOCATOR.size and record[_ZIP64_END.size :].startswith(
            b"PK\x06\x07"
        ):
            zip64 = _ZIP64_END.unpack_from(record)
            if zip64[0] == b"PK\x06\x06":
                entries, directory_bytes = zip64[7], zip64[8]
    if entries > MAX_MEMBERS or directory_bytes > MAX_ZIP_DIRECTORY_BYTES:
        raise unsupported(
            f"the zip archive's directory lists {entries} members in {directory_bytes} bytes, more than "
            f"the {MAX_MEMBERS} members or {MAX_ZIP_DIRECTORY_BYTES} bytes a publisher reads; a model "
            "directory has far fewer: archive the model directory alone"
        )


class _SeekableTar:
    """A stored plain tar: data the caller does not read is seeked over."""

    def __init__(self, file: StoreFile) -> None:
        self._file = file

    def read(self, size: int, /) -> bytes:
        return self._file.read(size) or b""

    def tell(self) -> int:
        return self._file.tell()

    def advance_to(self, position: int, /) -> None:
        self._file.seek(position)


class _StreamedTar:
    """A tar.gz: data the caller does not read is decompressed and dropped (and charged)."""

    def __init__(self, gzip: GzipReader, *, archive: str) -> None:
        self._gzip = gzip
        self._archive = archive

    def read(self, size: int, /) -> bytes:
        return self._gzip.read(size)

    def tell(self) -> int:
        return self._gzip.position

    def advance_to(self, position: int, /) -> None:
        while self._gzip.position < position:
            if not self._gzip.read(position - self._gzip.position):
                raise damaged(self._archive, "it ends inside a member (truncated)")


def _tar_member_path(member: TarMember) -> str | None:
    """The member's safe path when it is a regular file to consider; None (logged) otherwise."""
    if member.kind is MemberKind.DIRECTORY:
        return None
    if member.kind is not MemberKind.FILE:
        logger.warning(
            "archive member skipped: not a regular file",
            extra={"member": shown(member.name), "kind": member.kind.value},
        )
        return None
    return _safe(member.name)


def _zip_member_path(info: zipfile.ZipInfo) -> str | None:
    if info.is_dir():
        return None
    mode = info.external_attr >> 16
    if info.create_system == UNIX_CREATOR and stat.S_IFMT(mode) not in (0, stat.S_IFREG):
        logger.warning("archive member skipped: not a regular file", extra={"member": info.filename})
        return None
    if info.flag_bits & ENCRYPTED_FLAG:
        logger.warning("archive member skipped: encrypted", extra={"member": info.filename})
        return None
    return _safe(info.filename)


def _safe(name: str) -> str | None:
    path = safe_member_path(name)
    if path is None:
        logger.warning("archive member skipped: unsafe path", extra={"member": shown(name)})
    return path


def _choose(entries: Mapping[str, Entry], *, archive: str) -> dict[str, Entry]:
    """The members a repository with these files would publish, under their unwrapped paths."""
    wrapper = wrapper_of(entries)
    unwrapped = {unwrap(path, wrapper): entry for path, entry in entries.items()}
    candidates = {path: entry for path, entry in unwrapped.items() if kept(path)}
    selection = select_files(candidates)
    if not selection.accepted:
        # The selection's own refusal says the same about a repository; once is enough.
        raise unsupported(f"the {archive} holds no safetensors or GGUF weights")
    conflict = path_conflict(selection.files)
    if conflict is not None:
        raise _conflicting(archive, *conflict)
    left_out = sorted(set(unwrapped) - set(selection.files))
    if left_out:
        logger.info("archive members left out", extra={"members": left_out[:20], "count": len(left_out)})
    return {path: candidates[path] for path in selection.files}


def verify_payload_size(payload: CountingReader, expected_bytes: int) -> None:
    """The archive read is as long as the upload API received (its members are hashed one by one
    for the manifest; hashing the whole payload again would double the work for no new fact)."""
    payload.drain()
    if payload.count != expected_bytes:
        raise PublicationFailure(
            ModelReason.ARTIFACT_DAMAGED,
            f"the stored upload is {payload.count} bytes long, but {expected_bytes} were received: it was "
            "changed or damaged in the object store; upload the model again",
        )


def _unwrap_undone(writer: ArtifactWriter, wrapper: str) -> None:
    """A member outside the supposed wrapper: files stored without it go back under it.

    When a file's new path lies where a stored file or its directory is (`a/a`, stored as `a`,
    goes back to `a/a`), every file is moved aside first, under a name no member can have.
    """
    logger.info(
        "archive has more than one top-level entry; keeping its directory", extra={"directory": wrapper}
    )
    items = writer.files
    targets = [f"{wrapper}/{item.path}" for item in items]
    if _overlapping(targets, [item.path for item in items]):
        for index, item in enumerate(items):
            writer.move(item.path, f"{UNWRAP_STAGING}/{index}")
        for index, target in enumerate(targets):
            writer.move(f"{UNWRAP_STAGING}/{index}", target)
        return
    for item, target in zip(items, targets, strict=True):
        writer.move(item.path, target)


def _overlapping(targets: list[str], stored: list[str]) -> bool:
    """Whether a target is a stored path, one of its directories, or lies under a stored path."""
    files = set(stored)
    directories = {path.rsplit("/", count)[0] for path in stored for count in range(1, path.count("/") + 1)}
    for target in targets:
        if target in files or target in directories:
            return True
        parts = target.split("/")
        if any("/".join(parts[:count]) in files for count in range(1, len(parts))):
            return True
    return False


def _conflicting(archive: str, file: str, under: str) -> PublicationFailure:
    return unsupported(
        f"the {archive} holds {shown(file)} as a file and {shown(under)} under it as if it were a "
        "directory; no directory can hold both: rename or remove one of them and archive the model "
        "directory again"
    )
