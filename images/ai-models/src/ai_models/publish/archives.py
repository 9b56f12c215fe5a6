"""Unpacking an uploaded archive from the store into the artifact, member by member.

tar and tar.gz are read front to back in `tarfile`'s streaming mode straight from the stored
payload; zip is read with random access through ranged reads (its directory sits at the end), so
neither ever lands on local disk or in memory. Only regular files are taken (links, devices and
FIFOs are skipped and logged), names go through `members` (unsafe ones are skipped and logged),
and the archive may expand to at most `MAX_EXPANSION` times its size, against archive bombs.
"""

from __future__ import annotations

import dataclasses
import logging
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from typing import Final

from ai_models.adapters.objectstore import ByteSource, ObjectStore
from ai_models.domain.artifacts.selection import select_files
from ai_models.domain.artifacts.sniff import ACCEPTED_DESCRIPTION, safe_member_path
from ai_models.names import ModelReason
from ai_models.publish.artifact import ArtifactWriter
from ai_models.publish.failures import PublicationFailure
from ai_models.publish.members import StreamingLayout, kept, unwrap, wrapper_of
from ai_models.publish.progress import Progress
from ai_models.publish.streams import HashingReader, StoreFile

logger = logging.getLogger(__name__)

MIB: Final = 1024 * 1024
TAR_BUFFER_BYTES: Final = MIB
MAX_MEMBERS: Final = 100_000
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
    payload: ByteSource,
    writer: ArtifactWriter,
    *,
    compressed: bool,
    budget: Budget,
    on_bytes: Callable[[int], None] | None = None,
) -> None:
    """Store the tar's regular files (selected by `members`) read front to back from `payload`."""
    archive = "tar.gz archive" if compressed else "tar archive"
    layout = StreamingLayout()
    with tarfile.open(fileobj=payload, mode="r|gz" if compressed else "r|", bufsize=TAR_BUFFER_BYTES) as tar:  # type: ignore[call-overload]
        for member in tar:
            budget.member(archive=archive)
            if member.isdir():
                continue
            if not member.isfile():
                logger.warning(
                    "archive member skipped: not a regular file",
                    extra={"member": member.name, "kind": _tar_kind(member)},
                )
                continue
            path = safe_member_path(member.name)
            if path is None:
                logger.warning("archive member skipped: unsafe path", extra={"member": member.name})
                continue
            stored, broken = layout.place(path)
            if broken is not None:
                _unwrap_undone(writer, broken)
            if not kept(stored):
                logger.info("archive member left out", extra={"member": member.name})
                continue
            budget.spend(member.size, archive=archive)
            stream = tar.extractfile(member)
            assert stream is not None  # a regular file always has data
            writer.put(stored, stream, size=member.size, on_bytes=on_bytes)


def extract_zip(
    store: ObjectStore,
    key: str,
    writer: ArtifactWriter,
    *,
    size: int,
    progress: Progress,
) -> None:
    """Store the zip's regular files (selected like a repository's) through ranged reads."""
    with StoreFile(store, key, size=size) as file, zipfile.ZipFile(file) as archive:
        chosen: dict[str, zipfile.ZipInfo] = {}
        budget = Budget.for_payload(size)
        for info in archive.infolist():
            budget.member(archive="zip archive")
            if info.is_dir():
                continue
            mode = info.external_attr >> 16
            if info.create_system == 3 and stat.S_IFMT(mode) not in (0, stat.S_IFREG):
                logger.warning("archive member skipped: not a regular file", extra={"member": info.filename})
                continue
            if info.flag_bits & 0x1:
                logger.warning("archive member skipped: encrypted", extra={"member": info.filename})
                continue
            path = safe_member_path(info.filename)
            if path is None:
                logger.warning("archive member skipped: unsafe path", extra={"member": info.filename})
                continue
            chosen[path] = info  # a repeated name: the later member wins, as with unzip
        wrapper = wrapper_of(chosen)
        members = {
            unwrap(path, wrapper): info for path, info in chosen.items() if kept(unwrap(path, wrapper))
        }
        selection = select_files(members)
        if not selection.accepted:
            raise unsupported(f"the zip archive holds no safetensors or GGUF weights ({selection.refusal})")
        progress.total = sum(members[path].file_size for path in selection.files)
        budget.spend(progress.total, archive="zip archive")
        for path in selection.files:
            with archive.open(members[path]) as stream:
                writer.put(path, stream, size=members[path].file_size, on_bytes=progress.add)


def verify_payload(hashing: HashingReader, expected_sha256: str) -> None:
    """The payload read through `hashing` is the one the upload API received."""
    hashing.drain()
    if hashing.hexdigest() != expected_sha256:
        raise PublicationFailure(
            ModelReason.ARTIFACT_DAMAGED,
            f"the stored upload has sha256 {hashing.hexdigest()}, but {expected_sha256} was received: "
            "it was changed or damaged in the object store; upload the model again",
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
