"""Real model files for tests: safetensors and GGUF files small enough to build in memory, and
synthetic files of any size whose bytes are generated on the fly.

    data = safetensors_bytes({"w": ("BF16", (4, 8))})        # a valid file with zero tensors
    gguf = gguf_bytes(metadata={"general.architecture": "llama", "llama.context_length": 4096},
                      tensors={"token_embd.weight": (GGML_F32, (16, 8))})
    big = synthetic_safetensors(2 * GIB, seed=1)              # a valid header, then 2 GiB of noise
    for chunk in big.chunks(): ...                              # never more than 1 MiB at a time

The writers follow the published formats (safetensors: 8-byte little-endian header length, a
JSON header, the tensor bytes; GGUF v3: magic, version, counts, typed metadata, tensor infos,
data aligned to `general.alignment`), so a parser that reads these reads real files too.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import math
import random
import struct
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final

MIB: Final = 1024 * 1024
GIB: Final = 1024 * MIB

# safetensors dtype -> bytes per element (the sub-byte types are not needed by tests).
SAFETENSORS_DTYPE_BYTES: Final = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}

# ggml tensor types (ggml.h `enum ggml_type`) and their bytes per element; quantized types are
# block formats and are left out: test tensors are F32/F16/BF16.
GGML_F32: Final = 0
GGML_F16: Final = 1
GGML_BF16: Final = 30
_GGML_BYTES: Final = {GGML_F32: 4, GGML_F16: 2, GGML_BF16: 2}

# GGUF metadata value types (gguf.md).
GGUF_UINT8: Final = 0
GGUF_INT8: Final = 1
GGUF_UINT16: Final = 2
GGUF_INT16: Final = 3
GGUF_UINT32: Final = 4
GGUF_INT32: Final = 5
GGUF_FLOAT32: Final = 6
GGUF_BOOL: Final = 7
GGUF_STRING: Final = 8
GGUF_ARRAY: Final = 9
GGUF_UINT64: Final = 10
GGUF_INT64: Final = 11
GGUF_FLOAT64: Final = 12
_GGUF_SCALARS: Final = {
    GGUF_UINT8: "<B",
    GGUF_INT8: "<b",
    GGUF_UINT16: "<H",
    GGUF_INT16: "<h",
    GGUF_UINT32: "<I",
    GGUF_INT32: "<i",
    GGUF_FLOAT32: "<f",
    GGUF_BOOL: "<?",
    GGUF_UINT64: "<Q",
    GGUF_INT64: "<q",
    GGUF_FLOAT64: "<d",
}
GGUF_ALIGNMENT: Final = 32

_BLOCK_BYTES: Final = MIB


# ----- synthetic files ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SyntheticFile:
    """`size` deterministic bytes: `prefix` (a real header, say), then noise that depends on `seed`
    and on the position, so a reordered or truncated copy never matches. Nothing is held in memory
    but one 1 MiB block."""

    size: int
    seed: int = 0
    prefix: bytes = b""

    def __post_init__(self) -> None:
        if self.size < len(self.prefix):
            raise ValueError(
                f"a synthetic file of {self.size} bytes cannot hold a {len(self.prefix)}-byte prefix"
            )

    def __len__(self) -> int:
        return self.size

    def chunks(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """The bytes `start..end` (end exclusive, default the end) in pieces of at most 1 MiB."""
        stop = self.size if end is None else min(end, self.size)
        position = start
        while position < stop:
            if position < len(self.prefix):
                piece = self.prefix[position : min(stop, len(self.prefix))]
            else:
                offset = position - len(self.prefix)
                index, within = divmod(offset, _BLOCK_BYTES)
                block = self._block(index)
                piece = block[within : within + min(stop - position, _BLOCK_BYTES - within)]
            yield piece
            position += len(piece)

    def read(self, start: int, length: int) -> bytes:
        return b"".join(self.chunks(start, start + length))

    def to_bytes(self) -> bytes:
        """Everything at once: for small files only."""
        return self.read(0, self.size)

    @functools.cached_property
    def sha256(self) -> str:
        digest = hashlib.sha256()
        for chunk in self.chunks():
            digest.update(chunk)
        return digest.hexdigest()

    @functools.cached_property
    def _noise(self) -> bytes:
        return random.Random(self.seed).randbytes(_BLOCK_BYTES)

    def _block(self, index: int) -> bytes:
        # Rotating one random block by a per-block amount is as fast as copying it, and makes
        # every block of the file different from its neighbours.
        shift = (index * 4099 + 1) % _BLOCK_BYTES
        return self._noise[shift:] + self._noise[:shift]


FileContent = bytes | SyntheticFile


def content_size(content: FileContent) -> int:
    return len(content)


def content_sha256(content: FileContent) -> str:
    return content.sha256 if isinstance(content, SyntheticFile) else hashlib.sha256(content).hexdigest()


def content_chunks(content: FileContent, start: int = 0, end: int | None = None) -> Iterator[bytes]:
    if isinstance(content, SyntheticFile):
        yield from content.chunks(start, end)
        return
    stop = len(content) if end is None else min(end, len(content))
    for position in range(start, stop, _BLOCK_BYTES):
        yield content[position : min(stop, position + _BLOCK_BYTES)]


def git_blob_id(data: bytes) -> str:
    """The id git (and the Hub's `blobId`) gives a file's bytes."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The pointer file git stores for an LFS file; the Hub's `blobId` of an LFS file is its blob id."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


# ----- safetensors ------------------------------------------------------------------------------


def safetensors_header(
    tensors: Mapping[str, tuple[str, Sequence[int]]],
    *,
    metadata: Mapping[str, str] | None = None,
    pad_to: int | None = None,
) -> tuple[bytes, int]:
    """The 8-byte length plus JSON header for `tensors` ({name: (dtype, shape)}), laid out one after
    another, and the number of data bytes they take. `pad_to` pads the header with spaces (the
    format allows trailing whitespace) so that header plus data reach a chosen alignment."""
    document: dict[str, object] = {}
    if metadata is not None:
        document["__metadata__"] = dict(metadata)
    offset = 0
    for name, (dtype, shape) in tensors.items():
        length = math.prod(shape) * SAFETENSORS_DTYPE_BYTES[dtype]
        document[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + length]}
        offset += length
    text = json.dumps(document, separators=(",", ":")).encode()
    if pad_to is not None:
        text += b" " * (-(8 + len(text)) % pad_to)
    return struct.pack("<Q", len(text)) + text, offset


def safetensors_bytes(
    tensors: Mapping[str, tuple[str, Sequence[int]]], *, metadata: Mapping[str, str] | None = None
) -> bytes:
    """A complete safetensors file whose tensors are all zeros."""
    header, data_bytes = safetensors_header(tensors, metadata=metadata)
    return header + bytes(data_bytes)


def synthetic_safetensors(
    size: int, *, seed: int = 0, dtype: str = "BF16", name: str = "weight"
) -> SyntheticFile:
    """A `size`-byte safetensors file: a real header declaring one 1-D tensor that fills the rest
    (the few bytes a whole element cannot fill pad the header)."""
    element = SAFETENSORS_DTYPE_BYTES[dtype]
    elements = max(0, (size - 128) // element)
    # The header states the element count, so its length depends on it: shrink until both fit.
    while True:
        header, data_bytes = safetensors_header({name: (dtype, (elements,))})
        if len(header) + data_bytes <= size or elements == 0:
            break
        elements -= 1
    spare = size - len(header) - data_bytes
    if spare < 0:
        raise ValueError(f"{size} bytes cannot hold a safetensors header and data")
    text = header[8:] + b" " * spare
    return SyntheticFile(size=size, seed=seed, prefix=struct.pack("<Q", len(text)) + text)


def safetensors_element_counts(tensors: Mapping[str, tuple[str, Sequence[int]]]) -> dict[str, int]:
    """What a parser must find: elements per dtype."""
    counts: dict[str, int] = {}
    for dtype, shape in tensors.values():
        counts[dtype] = counts.get(dtype, 0) + math.prod(shape)
    return counts


# ----- GGUF -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Typed:
    """A metadata value with an explicit GGUF type (`Typed(GGUF_UINT32, 15)`); arrays take the
    element type: `Typed(GGUF_ARRAY, [1, 2], element=GGUF_INT32)`."""

    type: int
    value: object
    element: int | None = None


def _gguf_string(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(data)) + data


def _infer(value: object) -> Typed:
    if isinstance(value, Typed):
        return value
    if isinstance(value, bool):
        return Typed(GGUF_BOOL, value)
    if isinstance(value, int):
        if 0 <= value < 2**32:
            return Typed(GGUF_UINT32, value)
        return Typed(GGUF_UINT64 if value >= 0 else GGUF_INT64, value)
    if isinstance(value, float):
        return Typed(GGUF_FLOAT32, value)
    if isinstance(value, str):
        return Typed(GGUF_STRING, value)
    if isinstance(value, list):
        element = GGUF_STRING if value and isinstance(value[0], str) else GGUF_INT32
        return Typed(GGUF_ARRAY, value, element=element)
    raise TypeError(f"no GGUF type for {value!r}")


def _gguf_value(typed: Typed) -> bytes:
    if typed.type == GGUF_STRING:
        assert isinstance(typed.value, (str, bytes))
        return _gguf_string(typed.value)
    if typed.type == GGUF_ARRAY:
        assert isinstance(typed.value, list)
        assert typed.element is not None
        body = b"".join(_gguf_value(_infer(Typed(typed.element, item))) for item in typed.value)
        return struct.pack("<IQ", typed.element, len(typed.value)) + body
    return struct.pack(_GGUF_SCALARS[typed.type], typed.value)


def gguf_bytes(
    *,
    metadata: Mapping[str, object],
    tensors: Mapping[str, tuple[int, Sequence[int]]] | None = None,
    version: int = 3,
) -> bytes:
    """A complete GGUF file: `metadata` ({key: value or Typed}) and zero-filled `tensors`
    ({name: (ggml type, dims)}, dims innermost first as GGUF stores them)."""
    tensors = tensors or {}
    parts = [b"GGUF", struct.pack("<IQQ", version, len(tensors), len(metadata))]
    for key, value in metadata.items():
        typed = _infer(value)
        parts.append(_gguf_string(key) + struct.pack("<I", typed.type) + _gguf_value(typed))
    offset = 0
    sizes = []
    for name, (ggml_type, dims) in tensors.items():
        parts.append(_gguf_string(name) + struct.pack("<I", len(dims)))
        parts.append(b"".join(struct.pack("<Q", dim) for dim in dims))
        parts.append(struct.pack("<IQ", ggml_type, offset))
        size = math.prod(dims) * _GGML_BYTES[ggml_type]
        sizes.append(size)
        offset += size + (-size % GGUF_ALIGNMENT)
    header = b"".join(parts)
    header += bytes(-len(header) % GGUF_ALIGNMENT)
    data = b"".join(bytes(size) + bytes(-size % GGUF_ALIGNMENT) for size in sizes)
    return header + data


def tiny_gguf(
    *,
    architecture: str = "llama",
    context_length: int = 4096,
    block_count: int = 2,
    file_type: int = 15,
    name: str = "tiny",
) -> bytes:
    """A small but real llama-style GGUF with the metadata llama.cpp writes first, a tokenizer
    array after it (as in real files), and three F32 tensors (768 parameters)."""
    return gguf_bytes(
        metadata={
            "general.architecture": architecture,
            "general.name": name,
            "general.file_type": Typed(GGUF_UINT32, file_type),
            f"{architecture}.context_length": Typed(GGUF_UINT32, context_length),
            f"{architecture}.block_count": Typed(GGUF_UINT32, block_count),
            f"{architecture}.embedding_length": Typed(GGUF_UINT32, 16),
            f"{architecture}.rope.freq_base": 10000.0,
            "tokenizer.ggml.model": "gpt2",
            "tokenizer.ggml.tokens": [f"t{index}" for index in range(32)],
            "tokenizer.ggml.token_type": Typed(GGUF_ARRAY, [1] * 32, element=GGUF_INT32),
            "tokenizer.chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}",
        },
        tensors={
            "token_embd.weight": (GGML_F32, (16, 32)),
            "blk.0.attn_norm.weight": (GGML_F32, (16,)),
            "output.weight": (GGML_F16, (16, 15)),
        },
    )


TINY_GGUF_PARAMETERS: Final = 16 * 32 + 16 + 16 * 15


# ----- hostile archives --------------------------------------------------------------------------
# Archive bombs and garbage, written by hand so that every field can lie. Parts are bytes or
# `Zeros(n)`, which never exist in memory: `write_archive` writes them as a sparse hole (plain
# tar) or as one precompressed deflate block repeated (tar.gz), so a 2 GiB member costs a few MiB.


@dataclasses.dataclass(frozen=True)
class Zeros:
    size: int


@dataclasses.dataclass(frozen=True)
class Repeated:
    """`block` `times` over (for tar.gz only: a plain tar writes it out); `block` divides 1 MiB."""

    block: bytes
    times: int

    @property
    def size(self) -> int:
        return len(self.block) * self.times


ArchivePart = bytes | Zeros | Repeated
TAR_POSIX_MAGIC: Final = b"ustar\x0000"
TAR_GNU_MAGIC: Final = b"ustar  \x00"


def tar_header(
    name: str | bytes,
    size: int,
    *,
    typeflag: bytes = b"0",
    magic: bytes = TAR_POSIX_MAGIC,
    prefix: bytes = b"",
    extra: Mapping[int, bytes] | None = None,
) -> bytes:
    """One 512-byte tar header with a correct checksum; `size` may take 12 octal digits or, at 8 GiB
    and more, GNU base-256. `extra` writes raw bytes at offsets (sparse fields, say)."""
    block = bytearray(512)
    raw_name = name.encode() if isinstance(name, str) else name
    block[0 : len(raw_name[:100])] = raw_name[:100]
    block[100:108] = b"0000644\x00"
    block[108:116] = b"0000000\x00"
    block[116:124] = b"0000000\x00"
    if size < 8**11:
        block[124:136] = b"%011o\x00" % size
    else:
        block[124:136] = b"\x80" + size.to_bytes(11, "big")
    block[136:148] = b"00000000000\x00"
    block[156:157] = typeflag
    block[257:265] = magic
    block[345 : 345 + len(prefix)] = prefix
    for offset, data in (extra or {}).items():
        block[offset : offset + len(data)] = data
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\x00 " % sum(block)
    return bytes(block)


def tar_padding(size: int) -> bytes:
    return bytes(-size % 512)


def tar_member(name: str | bytes, data: bytes | Zeros, *, typeflag: bytes = b"0") -> list[ArchivePart]:
    size = len(data) if isinstance(data, bytes) else data.size
    return [tar_header(name, size, typeflag=typeflag), data, tar_padding(size)]


def pax_header(records: Mapping[str, str | Zeros], *, typeflag: bytes = b"x") -> list[ArchivePart]:
    """A pax extended header (`x`, or `g` for global); a `Zeros` value is that many NULs."""
    parts: list[ArchivePart] = []
    size = 0
    for key, value in records.items():
        value_size = value.size if isinstance(value, Zeros) else len(value.encode())
        body = len(key.encode()) + value_size + 3  # " ", "=", "\n"
        digits = len(str(body))
        while len(str(body + digits)) != digits:
            digits += 1
        record_head = f"{body + digits} {key}=".encode()
        parts += [record_head, value if isinstance(value, Zeros) else value.encode(), b"\n"]
        size += body + digits
    return [tar_header("././@PaxHeader", size, typeflag=typeflag), *parts, tar_padding(size)]


TAR_END: Final = bytes(1024)


def archive_size(parts: Sequence[ArchivePart]) -> int:
    return sum(len(part) if isinstance(part, bytes) else part.size for part in parts)


@functools.cache
def _deflated_block(block: bytes) -> bytes:
    """`block` (1 MiB), deflated after a full flush: the same bytes wherever it is repeated."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)


def write_archive(parts: Sequence[ArchivePart], path: Path, *, gzip: bool) -> int:
    """Write `parts` to `path`, plain or as one gzip member; returns the bytes written."""
    with path.open("wb") as out:
        if not gzip:
            for part in parts:
                if isinstance(part, Zeros):
                    out.seek(part.size, io.SEEK_CUR)
                elif isinstance(part, Repeated):
                    for _time in range(part.times):
                        out.write(part.block)
                else:
                    out.write(part)
            out.truncate()
            return out.tell()
        out.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")
        deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
        crc = 0
        for part in parts:
            if isinstance(part, bytes):
                out.write(deflate.compress(part))
                crc = zlib.crc32(part, crc)
                continue
            out.write(deflate.flush(zlib.Z_FULL_FLUSH))
            pattern = bytes(MIB) if isinstance(part, Zeros) else part.block * (MIB // len(part.block))
            blocks, rest = divmod(part.size, MIB)
            deflated = _deflated_block(pattern)
            for _block in range(blocks):
                out.write(deflated)
                crc = zlib.crc32(pattern, crc)
            out.write(deflate.compress(pattern[:rest]))
            crc = zlib.crc32(pattern[:rest], crc)
        out.write(deflate.flush())
        out.write(struct.pack("<II", crc, archive_size(parts) % 2**32))
        return out.tell()


def zip_directory_bomb(path: Path, *, entries: int, data: bytes) -> int:
    """A zip whose central directory lists `entries` members that all point at one local header
    holding `data`: a few dozen bytes per member, and a directory zipfile would read whole."""
    crc = zlib.crc32(data)
    name = b"model.safetensors"
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, crc, len(data), len(data), len(name), 0)
    with path.open("wb") as out:
        out.write(local + name + data)
        directory_at = out.tell()
        for index in range(entries):
            entry = b"f%07d.txt" % index
            out.write(
                struct.pack(
                    "<4s6H3L5H2L",
                    b"PK\x01\x02",
                    20,
                    20,
                    0,
                    0,
                    0,
                    0,
                    crc,
                    len(data),
                    len(data),
                    len(entry),
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                )
                + entry
            )
        directory_bytes = out.tell() - directory_at
        listed = min(entries, 0xFFFF)
        out.write(
            struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, listed, listed, directory_bytes, directory_at, 0)
        )
        return out.tell()
