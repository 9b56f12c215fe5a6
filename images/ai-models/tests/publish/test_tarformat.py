"""The strict tar header reader against what tar writers produce, and against any bytes."""

from __future__ import annotations

import io
import tarfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_models.publish.failures import PublicationFailure
from ai_models.publish.members import path_conflict
from ai_models.publish.tarformat import MAX_EXTENDED_HEADER_BYTES, MemberKind, TarMember, members
from fakes.model_files import TAR_END, TAR_GNU_MAGIC, ArchivePart, pax_header, tar_header, tar_member


class BytesTar:
    """A tar in memory, read the way a stored plain tar is."""

    def __init__(self, data: bytes) -> None:
        self._file = io.BytesIO(data)

    def read(self, size: int, /) -> bytes:
        return self._file.read(size)

    def tell(self) -> int:
        return self._file.tell()

    def advance_to(self, position: int, /) -> None:
        self._file.seek(position)


def read(data: bytes) -> list[TarMember]:
    return list(members(BytesTar(data), archive="tar archive"))


def join(*parts: bytes | list[ArchivePart]) -> bytes:
    flat: list[bytes] = []
    for part in parts:
        for piece in part if isinstance(part, list) else [part]:
            assert isinstance(piece, bytes)
            flat.append(piece)
    return b"".join(flat)


@pytest.mark.parametrize("tar_format", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_members_are_read_as_tarfile_writes_them(tar_format: int) -> None:
    long_name = "folder/" + "n" * 140 + "/model.safetensors"  # ustar: a 147-byte prefix
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tar_format) as tar:
        for name, data in (("config.json", b"{}"), (long_name, b"x" * 700)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("link")
        link.type, link.linkname = tarfile.SYMTYPE, "l" * 300 if tar_format != tarfile.USTAR_FORMAT else "x"
        tar.addfile(link)

    found = read(buffer.getvalue())

    assert [(member.name, member.kind, member.size) for member in found] == [
        ("config.json", MemberKind.FILE, 2),
        (long_name, MemberKind.FILE, 700),
        ("link", MemberKind.SYMLINK, 0),
    ]
    data = buffer.getvalue()
    assert data[found[1].offset_data : found[1].offset_data + 700] == b"x" * 700


def test_a_pax_path_and_size_override_the_header() -> None:
    data = join(
        pax_header({"path": "real/name.json", "size": "3"}),
        tar_header("short", 0),
        b"abc",
        bytes(509),
        TAR_END,
    )

    (member,) = read(data)

    assert (member.name, member.size) == ("real/name.json", 3)


def test_a_gnu_base_256_size_is_read() -> None:
    header = tar_header("big.safetensors", 9 * 1024**3, magic=TAR_GNU_MAGIC)

    member = next(members(BytesTar(header), archive="tar archive"))

    assert member.size == 9 * 1024**3


def test_pax_sparse_keys_make_a_sparse_member() -> None:
    data = join(
        pax_header({"GNU.sparse.major": "1", "GNU.sparse.minor": "0"}), tar_member("hole", b"12"), TAR_END
    )

    assert [member.kind for member in read(data)] == [MemberKind.SPARSE]


def test_an_extended_header_over_the_cap_is_refused_by_its_size() -> None:
    header = tar_header("././@PaxHeader", MAX_EXTENDED_HEADER_BYTES + 1, typeflag=b"x")

    with pytest.raises(PublicationFailure, match="extended header \\(pax\\)"):
        read(header)  # nothing after the header: it is refused before its bytes are asked for


def test_a_header_with_a_bad_checksum_is_damaged() -> None:
    header = bytearray(tar_header("config.json", 0))
    header[0] ^= 1

    with pytest.raises(PublicationFailure, match="fails its checksum"):
        read(bytes(header) + TAR_END)


def test_one_zero_block_then_garbage_is_damaged() -> None:
    with pytest.raises(PublicationFailure, match="not followed by a second"):
        read(bytes(512) + b"\x01" * 512)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=4096), prefix=st.sampled_from([b"", tar_header("config.json", 5)]))
def test_any_bytes_give_members_or_a_refusal(data: bytes, prefix: bytes) -> None:
    refusal: PublicationFailure | None = None
    try:
        read(prefix + data)
    except PublicationFailure as failure:
        refusal = failure
    assert refusal is None or refusal.retryable is False


@pytest.mark.parametrize(
    ("paths", "conflict"),
    [
        (["x", "x/model.safetensors"], ("x", "x/model.safetensors")),
        (["a/b/c.json", "a/b"], ("a/b", "a/b/c.json")),
        (["a/b.json", "a/c.json", "a/b.json"], None),
        (["ab", "a/b"], None),
    ],
)
def test_a_path_that_is_a_file_and_a_directory_conflicts(
    paths: list[str], conflict: tuple[str, str] | None
) -> None:
    assert path_conflict(paths) == conflict
