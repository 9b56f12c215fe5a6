"""A strict reader of tar headers in which every size is checked before it is read.

`tarfile` reads a pax or GNU long-name header whole into memory (a 512 MiB pax header costs
more than 1 GiB), follows a sparse member's extension blocks without end, and keeps a list of
every member. This reader takes one 512-byte block at a time, reads an extended header only when
it is at most `MAX_EXTENDED_HEADER_BYTES` long, keeps nothing of members it has passed, and never
reads member data itself: the caller reads a member's data through `member_data` or lets the
next `members` step skip it (a seek in a stored plain tar, a bounded read in a tar.gz).

The formats read are the ones tar writers produce: v7, POSIX ustar (name prefix), pax (`x`
headers: `path`, `size`, `GNU.sparse.*`; `g` headers are read and ignored), GNU (`L`/`K` long
names, base-256 sizes, `S` sparse members with their extension blocks).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator
from typing import Final, Protocol

from ai_models.publish.failures import PublicationFailure, unsupported

BLOCK: Final = 512
# Real pax headers hold a path, times, ids and a few extended attributes: a few KiB. One MiB
# leaves room for large attributes and still costs the publisher nothing it cannot spare.
MAX_EXTENDED_HEADER_BYTES: Final = 1024 * 1024
# A member has a pax header and a long name and a long link name at most; a chain of more is
# no archive any writer makes.
MAX_EXTENDED_HEADERS_PER_MEMBER: Final = 8
# Each GNU sparse extension block describes 21 holes; this many describe more than any file has.
MAX_SPARSE_EXTENSION_BLOCKS: Final = 1024
_SIZE_DIGITS: Final = 20  # a pax `size` of more digits is larger than any store takes

_POSIX_MAGIC: Final = b"ustar\x0000"
_GNU_MAGIC: Final = b"ustar  \x00"


class MemberKind(enum.Enum):
    FILE = "file"
    DIRECTORY = "directory"
    SYMLINK = "symlink"
    HARDLINK = "hardlink"
    DEVICE = "device"
    FIFO = "fifo"
    SPARSE = "sparse"
    OTHER = "other"


_KINDS: Final = {
    b"0": MemberKind.FILE,
    b"\x00": MemberKind.FILE,
    b"7": MemberKind.FILE,  # contiguous file: a regular file to every reader but one
    b"1": MemberKind.HARDLINK,
    b"2": MemberKind.SYMLINK,
    b"3": MemberKind.DEVICE,
    b"4": MemberKind.DEVICE,
    b"5": MemberKind.DIRECTORY,
    b"6": MemberKind.FIFO,
    b"S": MemberKind.SPARSE,
}
_EXTENDED: Final = frozenset({b"x", b"g", b"L", b"K"})


class TarSource(Protocol):
    """The uncompressed archive, read from the front: `advance_to` moves forward to a position
    (a seek for a stored tar, a read that discards for a tar.gz)."""

    def read(self, size: int, /) -> bytes: ...

    def tell(self) -> int: ...

    def advance_to(self, position: int, /) -> None: ...


@dataclasses.dataclass(frozen=True)
class TarMember:
    name: str  # as the archive names it: pax path, GNU long name or ustar prefix and name
    kind: MemberKind
    size: int  # bytes of data after the header (a sparse member's stored bytes)
    offset_data: int  # where the data starts in the uncompressed archive


def damaged(archive: str, cause: str) -> PublicationFailure:
    return unsupported(f"the {archive} is damaged: {cause}")


def members(source: TarSource, *, archive: str) -> Iterator[TarMember]:
    """Every member of the archive, in order, up to its end-of-archive blocks (which are checked).

    Before the next member is read, the source is advanced past the data of the one yielded,
    whether or not the caller read it.
    """
    position = source.tell()
    while True:
        source.advance_to(position)
        member = _next_member(source, archive=archive)
        if member is None:
            return
        yield member
        position = member.offset_data + _padded(member.size)


def member_data(source: TarSource, member: TarMember, *, archive: str) -> MemberData:
    """A reader of exactly the member's data; the source must stand at `member.offset_data`."""
    return MemberData(source, member.size, name=member.name, archive=archive)


class MemberData:
    """Exactly `size` bytes of the source; an archive that ends sooner is damaged, not short."""

    def __init__(self, source: TarSource, size: int, *, name: str, archive: str) -> None:
        self._source = source
        self._left = size
        self._name = name
        self._archive = archive

    def read(self, size: int = -1, /) -> bytes:
        wanted = self._left if size < 0 else min(size, self._left)
        if wanted == 0:
            return b""
        data = self._source.read(wanted)
        if not data:
            raise damaged(self._archive, f"it ends inside member {shown(self._name)}")
        self._left -= len(data)
        return data


def shown(name: str) -> str:
    """A member name for a message: quoted, and cut short (names come from the user)."""
    return repr(name if len(name) <= 120 else name[:117] + "...")


def _next_member(source: TarSource, *, archive: str) -> TarMember | None:
    long_name: str | None = None
    pax: dict[str, str] = {}
    for _extended in range(MAX_EXTENDED_HEADERS_PER_MEMBER + 1):
        at = source.tell()
        block = _block(source, archive=archive)
        if block.count(0) == BLOCK:
            if _block(source, archive=archive).count(0) != BLOCK:
                raise damaged(archive, f"a zero block at byte {at} is not followed by a second one")
            return None
        _check_sum(block, at=at, archive=archive)
        typeflag = block[156:157]
        size = _size(block, at=at, archive=archive)
        if typeflag not in _EXTENDED:
            return _member(source, block, typeflag, size, long_name=long_name, pax=pax, archive=archive)
        if size > MAX_EXTENDED_HEADER_BYTES:
            raise unsupported(
                f"the {archive} has an extended header ({_EXTENDED_NAMES[typeflag]}) of {size} bytes at "
                f"byte {at}, more than the {MAX_EXTENDED_HEADER_BYTES} bytes a publisher reads; "
                "archive the model directory again with plain GNU or POSIX tar"
            )
        data = _exactly(source, size, archive=archive)
        _exactly(source, _padded(size) - size, archive=archive)
        if typeflag == b"x":
            pax.update(_pax_records(data, at=at, archive=archive))
        elif typeflag == b"L":
            long_name = _text(data.split(b"\x00", 1)[0])
        # `g` (global pax values) and `K` (a link's long target) say nothing this reader uses.
    raise damaged(archive, f"more than {MAX_EXTENDED_HEADERS_PER_MEMBER} extended headers precede one member")


_EXTENDED_NAMES: Final = {b"x": "pax", b"g": "global pax", b"L": "GNU long name", b"K": "GNU long link"}


def _member(
    source: TarSource,
    block: bytes,
    typeflag: bytes,
    size: int,
    *,
    long_name: str | None,
    pax: dict[str, str],
    archive: str,
) -> TarMember:
    magic = block[257:265]
    name = _text(_field(block[0:100]))
    if magic == _POSIX_MAGIC and (prefix := _field(block[345:500])):
        name = _text(prefix) + "/" + name
    name = pax.get("path", long_name if long_name is not None else name)
    if "size" in pax:
        value = pax["size"]
        if not value.isdigit() or len(value) > _SIZE_DIGITS:
            raise damaged(archive, f"member {shown(name)} has a pax size {shown(value)}")
        size = int(value)
    kind = _KINDS.get(typeflag, MemberKind.OTHER)
    if any(key.startswith("GNU.sparse.") for key in pax):
        kind = MemberKind.SPARSE
    if typeflag == b"S" and magic == _GNU_MAGIC and block[482]:
        _skip_sparse_extensions(source, name=name, archive=archive)
    return TarMember(name=name, kind=kind, size=size, offset_data=source.tell())


def _skip_sparse_extensions(source: TarSource, *, name: str, archive: str) -> None:
    for _extension in range(MAX_SPARSE_EXTENSION_BLOCKS):
        if not _block(source, archive=archive)[504]:
            return
    raise damaged(
        archive,
        f"sparse member {shown(name)} has more than {MAX_SPARSE_EXTENSION_BLOCKS} extension blocks",
    )


def _block(source: TarSource, *, archive: str) -> bytes:
    return _exactly(source, BLOCK, archive=archive, what="a header")


def _exactly(source: TarSource, size: int, *, archive: str, what: str = "an extended header") -> bytes:
    pieces = []
    left = size
    while left:
        piece = source.read(left)
        if not piece:
            raise damaged(archive, f"it ends inside {what} (truncated)")
        pieces.append(piece)
        left -= len(piece)
    return b"".join(pieces)


def _check_sum(block: bytes, *, at: int, archive: str) -> None:
    stored = _octal(block[148:156])
    unsigned = sum(block[:148]) + 8 * 0x20 + sum(block[156:])
    # Some old writers summed signed bytes; tar readers accept both.
    signed = unsigned - 256 * sum(1 for byte in block[:148] + block[156:] if byte > 127)
    if stored is None or stored not in (unsigned, signed):
        raise damaged(archive, f"the header at byte {at} fails its checksum (not a tar header)")


def _size(block: bytes, *, at: int, archive: str) -> int:
    field = block[124:136]
    if field[0] == 0x80:  # GNU base-256 for sizes of 8 GiB and more
        return int.from_bytes(field[1:], "big")
    size = _octal(field)
    if size is None:
        raise damaged(archive, f"the header at byte {at} has no valid size")
    return size


def _octal(field: bytes) -> int | None:
    digits = field.replace(b"\x00", b" ").strip()
    if not digits:
        return 0
    if any(byte not in b"01234567" for byte in digits):
        return None
    return int(digits, 8)


def _field(raw: bytes) -> bytes:
    return raw.split(b"\x00", 1)[0]


def _text(raw: bytes) -> str:
    # A name that is not UTF-8 keeps a replacement character, which no safe member path has.
    return raw.decode("utf-8", errors="replace")


def _pax_records(data: bytes, *, at: int, archive: str) -> dict[str, str]:
    """`<length> <key>=<value>\\n` records; a record that does not parse makes the archive damaged."""
    records: dict[str, str] = {}
    position = 0
    while position < len(data):
        if data[position] == 0:  # some writers pad the header with NULs
            break
        space = data.find(b" ", position, position + _SIZE_DIGITS + 1)
        length_text = data[position:space] if space >= 0 else b""
        if not length_text.isdigit():
            raise damaged(archive, f"the pax header at byte {at} has a malformed record")
        end = position + int(length_text)
        record = data[space + 1 : end]
        if end <= space + 1 or end > len(data) or not record.endswith(b"\n") or b"=" not in record:
            raise damaged(archive, f"the pax header at byte {at} has a malformed record")
        key, _equals, value = record[:-1].partition(b"=")
        records[_text(key)] = _text(value)
        position = end
    return records


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK
