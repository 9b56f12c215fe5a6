"""Unpacking an uploaded archive from the store into the artifact, member by member.

A plain tar and a zip are read with random access through ranged reads of the stored payload:
their member list first, then each chosen member's bytes (a plain tar's members are copied inside
the store, see `ArtifactWriter.copy`). A tar.gz can only be read front to back, in `tarfile`'s
streaming mode. None of them ever lands on local disk or in memory.

Only regular files are taken (links, devices and FIFOs are skipped and logged), names go through
`members` (unsafe ones are skipped and logged), and the archive may expand to at most
`MAX_EXPANSION` times its size, against archive bombs.
"""

from __future__ import annotations

import dataclasses
import logging
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Mapping
from typing import Final, TypeVar

from ai_models.adapters.objectstore import ByteSource, ObjectStore
from ai_models.domain.artifacts.manifest import ArtifactFile
from ai_models.domain.artifacts.selection import select_files
from ai_models.domain.artifacts.sniff import ACCEPTED_DESCRIPTION, safe_member_path
from ai_models.names import ModelReason
from ai_models.publish.artifact import ArtifactWriter
from ai_models.publish.failures import PublicationFailure
from ai_models.publish.members import StreamingLayout, kept, unwrap, wrapper_of
from ai_models.publish.parallel import files_at_once, run_parallel
from ai_models.publish.progress import Progress
from ai_models.publish.streams import CountingReader, StoreFile

logger = logging.getLogger(__name__)

Entry = TypeVar("Entry")

MIB: Final = 1024 * 1024
TAR_BUFFER_BYTES: Final = MIB
# tarfile keeps every member's header in memory; a model directory has hundreds of files at most.
MAX_MEMBERS: Final = 10_000
LISTING_WINDOW: Final = 64 * 1024  # a tar header is 512 bytes; reads after a seek start small
UNIX_CREATOR: Final = 3  # zip's "created on" system for Unix, whose mode bits say the file type
ENCRYPTED_FLAG: Final = 0x1
# Weights barely compress; tokenizer files do, but they are small. More than this is a bomb.
MAX_EXPANSION: Final = 10
EXPANSION_SLACK_BYTES: Final = 256 * MIB
ARCHIVE_ERRORS: Final = (tarfile.TarError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error)


@dataclasses.dataclass
class Budget:
    """Bytes and members an archive may still expand to."""

    bytes_left: int
    members_left: int = MAX_MEMBERS

    @classmethod
    def for_payload(cls, payload_bytes: int) -> Budget:
        return cls(bytes_left=payload_bytes * MAX_EXPANSION + EXPANSION_SLACK_BYTES)

    def member(self, *, archive: str) -> None:
        self.members_left -= 1
        if self.members_left < 0:
            raise unsupported(
                f"the {archive} has more than {MAX_MEMBERS} members; a model directory has far fewer"
            )

    def spend(self, size: int, *, archive: str) -> None:
        self.bytes_left -= size
        if self.bytes_left < 0:
            raise unsupported(
                f"the {archive} expands to more than {MAX_EXPANSION} times its own size, which no model "
                "directory does; upload the files uncompressed or as a plain tar"
            )


def unsupported(cause: str) -> PublicationFailure:
    return PublicationFailure(
        ModelReason.UNSUPPORTED_SOURCE,
        f"the uploaded payload cannot be published: {cause}; expected {ACCEPTED_DESCRIPTION}",
    )


def extract_tar(
    store: ObjectStore, key: str, writer: ArtifactWriter, *, size: int, progress: Progress
) -> None:
    """Store a plain tar's selected regular files through ranged reads.

    The member headers are read first (seeking over the data), so the selection and the wrapper
    are decided before anything is written; each member's bytes are then copied inside the store
    (a plain tar keeps them whole and in place) while they are read for their sha256.
    """
    budget = Budget.for_payload(size)
    entries: dict[str, tarfile.TarInfo] = {}
    with (
        StoreFile(store, key, size=size, first_window=LISTING_WINDOW) as file,
        tarfile.open(fileobj=file, mode="r:") as tar,
    ):
        for member in tar:
            budget.member(archive="tar archive")
            path = _tar_member_path(member)
            if path is not None:
                if member.offset_data + member.size > size:
                    raise unsupported(
                        f"the tar archive is truncated: member {member.name!r} ends past its end"
                    )
                entries[path] = member  # a repeated name: the later member wins, as with tar -x
        file.seek(tar.offset)
        _check_end_of_archive(file.read(2 * tarfile.BLOCKSIZE), blocks=2, archive="tar archive")
    chosen = _choose(entries, archive="tar archive")
    progress.total = sum(member.size for member in chosen.values())
    budget.spend(progress.total, archive="tar archive")

    def task(path: str, member: tarfile.TarInfo) -> Callable[[], ArtifactFile]:
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
    layout = StreamingLayout()
    # tarfile's stubs ask for a whole IO[bytes]; its stream mode only ever calls read().
    with tarfile.open(fileobj=payload, mode="r|gz", bufsize=TAR_BUFFER_BYTES) as tar:  # type: ignore[call-overload]
        for member in tar:
            budget.member(archive="tar.gz archive")
            path = _tar_member_path(member)
            if path is None:
                continue
            stored, broken = layout.place(path)
            if broken is not None:
                _unwrap_undone(writer, broken)
            if not kept(stored):
                logger.info("archive member left out", extra={"member": member.name})
                continue
            budget.spend(member.size, archive="tar.gz archive")
            stream = tar.extractfile(member)
            assert stream is not None  # a regular file always has data
            writer.put(stored, stream, size=member.size)
        # tarfile has read the first of the two closing blocks when it stops.
        _check_end_of_archive(tar.fileobj.read(tarfile.BLOCKSIZE), blocks=1, archive="tar.gz archive")


def extract_zip(
    store: ObjectStore, key: str, writer: ArtifactWriter, *, size: int, progress: Progress
) -> None:
    """Store a zip's selected regular files through ranged reads (its directory sits at the end)."""
    budget = Budget.for_payload(size)
    with StoreFile(store, key, size=size) as file, zipfile.ZipFile(file) as archive:
        entries: dict[str, zipfile.ZipInfo] = {}
        for info in archive.infolist():
            budget.member(archive="zip archive")
            path = _zip_member_path(info)
            if path is not None:
                entries[path] = info  # a repeated name: the later member wins, as with unzip
        chosen = _choose(entries, archive="zip archive")
        progress.total = sum(info.file_size for info in chosen.values())
        budget.spend(progress.total, archive="zip archive")
        for path, info in chosen.items():
            with archive.open(info) as stream:
                writer.put(path, stream, size=info.file_size, on_bytes=progress.add)


def _check_end_of_archive(tail: bytes, *, blocks: int, archive: str) -> None:
    """A tar ends with two zero blocks; tarfile stops quietly at a header cut short, so a payload
    truncated between members would otherwise pass for a smaller model."""
    if len(tail) != blocks * tarfile.BLOCKSIZE or tail.count(0) != len(tail):
        raise unsupported(f"the {archive} is truncated: it does not end with the end-of-archive blocks")


def _tar_member_path(member: tarfile.TarInfo) -> str | None:
    """The member's safe path when it is a regular file to consider; None (logged) otherwise."""
    if member.isdir():
        return None
    if not member.isfile() or member.issparse():
        logger.warning(
            "archive member skipped: not a regular file",
            extra={"member": member.name, "kind": _tar_kind(member)},
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
        logger.warning("archive member skipped: unsafe path", extra={"member": name})
    return path


def _choose(entries: Mapping[str, Entry], *, archive: str) -> dict[str, Entry]:
    """The members a repository with these files would publish, under their unwrapped paths."""
    wrapper = wrapper_of(entries)
    unwrapped = {unwrap(path, wrapper): entry for path, entry in entries.items()}
    candidates = {path: entry for path, entry in unwrapped.items() if kept(path)}
    selection = select_files(candidates)
    if not selection.accepted:
        raise unsupported(f"the {archive} holds no safetensors or GGUF weights ({selection.refusal})")
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
    """A member outside the supposed wrapper: files stored without it go back under it."""
    logger.info(
        "archive has more than one top-level entry; keeping its directory", extra={"directory": wrapper}
    )
    for item in writer.files:
        writer.move(item.path, f"{wrapper}/{item.path}")


def _tar_kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return "symlink"
    if member.islnk():
        return "hardlink"
    if member.isdev():
        return "device"
    return "other"
