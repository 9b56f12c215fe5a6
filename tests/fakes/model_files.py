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
import json
import math
import random
import struct
from collections.abc import Iterator, Mapping, Sequence
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
