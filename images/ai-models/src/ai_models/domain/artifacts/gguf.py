"""The facts a GGUF file states about itself, read from the first bytes of the file (pure).

A GGUF file (v2 and v3; little-endian) starts with its metadata: typed key/value pairs
(`general.architecture`, `<arch>.context_length`, ...) followed by one description per tensor.
The publisher reads the first few MiB of a stored file and hands them here; whatever lies past
those bytes (a long tokenizer vocabulary, usually) is left unread, and the facts found before it
are still returned.

Input is untrusted: every length and count is checked against the bytes actually present before
anything is allocated, strings kept are short, nesting is bounded, and nothing here raises for
any input except `GgufFormatError` for bytes that are not a GGUF file at all.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Mapping
from typing import Final

MAGIC: Final = b"GGUF"
SUPPORTED_VERSIONS: Final = frozenset({2, 3})
MAX_KEY_BYTES: Final = 65535  # the format's own limit
MAX_KEPT_STRING_BYTES: Final = 1024  # longer values (chat templates) are skipped, not kept
MAX_ARRAY_DEPTH: Final = 3
MAX_DIMENSIONS: Final = 8  # ggml tensors have at most 4
MAX_COUNT: Final = 2**53 - 1  # larger element counts are garbage (and lose precision in JSON)

# GGUF metadata value types.
_UINT8, _INT8, _UINT16, _INT16, _UINT32, _INT32, _FLOAT32, _BOOL, _STRING, _ARRAY = range(10)
_UINT64, _INT64, _FLOAT64 = 10, 11, 12
_SCALARS: Final[Mapping[int, struct.Struct]] = {
    _UINT8: struct.Struct("<B"),
    _INT8: struct.Struct("<b"),
    _UINT16: struct.Struct("<H"),
    _INT16: struct.Struct("<h"),
    _UINT32: struct.Struct("<I"),
    _INT32: struct.Struct("<i"),
    _FLOAT32: struct.Struct("<f"),
    _BOOL: struct.Struct("<?"),
    _UINT64: struct.Struct("<Q"),
    _INT64: struct.Struct("<q"),
    _FLOAT64: struct.Struct("<d"),
}
_U32: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")

# llama.cpp's `enum llama_ftype` (llama.h): the file type `general.file_type` states.
FILE_TYPES: Final[Mapping[int, str]] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
    39: "NVFP4",
    40: "Q1_0",
}
# llama.cpp marks a file type it guessed (not stated by the converter) with this bit.
_GUESSED_FILE_TYPE: Final = 1024

Scalar = str | int | float | bool


class GgufFormatError(ValueError):
    """The bytes are not a GGUF file this parser reads (wrong magic, unsupported version)."""


@dataclasses.dataclass(frozen=True)
class GgufHeader:
    version: int
    tensor_count: int
    metadata: Mapping[str, Scalar]  # scalar values and short strings; arrays are skipped
    tensor_elements: int | None  # elements of all tensors, when every tensor description was read
    complete: bool  # the whole header (metadata and tensor descriptions) lay within the bytes

    @property
    def architecture(self) -> str | None:
        value = self.metadata.get("general.architecture")
        return value if isinstance(value, str) and value else None

    def _arch_int(self, suffix: str) -> int | None:
        return _count(self.metadata.get(f"{self.architecture}.{suffix}")) if self.architecture else None

    @property
    def context_length(self) -> int | None:
        return self._arch_int("context_length")

    @property
    def block_count(self) -> int | None:
        return self._arch_int("block_count")

    @property
    def parameter_count(self) -> int | None:
        """The tensors' element count; else what `general.parameter_count` states, if anything."""
        if self.tensor_elements:
            return self.tensor_elements
        return _count(self.metadata.get("general.parameter_count"))

    @property
    def file_type(self) -> str | None:
        """The quantization llama.cpp names the file by (`Q4_K_M`), from `general.file_type`."""
        value = _count(self.metadata.get("general.file_type"))
        if value is None:
            return None
        return FILE_TYPES.get(value & ~_GUESSED_FILE_TYPE)


class _Truncated(Exception):
    """The header goes on past the bytes given."""


class _Malformed(Exception):
    """A value that no writer produces; parsing stops there."""


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self.offset = 0

    def take(self, count: int) -> memoryview:
        if count < 0 or self.offset + count > len(self._data):
            raise _Truncated
        piece = self._data[self.offset : self.offset + count]
        self.offset += count
        return piece

    def skip(self, count: int) -> None:
        self.take(count)

    def unpack(self, layout: struct.Struct) -> object:
        return layout.unpack(self.take(layout.size))[0]

    def u32(self) -> int:
        value = self.unpack(_U32)
        assert isinstance(value, int)
        return value

    def u64(self) -> int:
        value = self.unpack(_U64)
        assert isinstance(value, int)
        return value

    def string(self, *, limit: int | None = None) -> bytes | None:
        """A length-prefixed string; None (and skipped) when longer than `limit`."""
        length = self.u64()
        if limit is not None and length > limit:
            self.skip(length)
            return None
        return bytes(self.take(length))


def parse_gguf_header(data: bytes) -> GgufHeader:
    """The header facts found in `data`, the first bytes of a GGUF file (any amount)."""
    if len(data) < 24 or not data.startswith(MAGIC):
        raise GgufFormatError("not a GGUF file: it does not start with the GGUF magic and header")
    reader = _Reader(data)
    reader.skip(len(MAGIC))
    version = reader.u32()
    if version not in SUPPORTED_VERSIONS:
        raise GgufFormatError(
            f"GGUF version {version} is not supported (only v2 and v3, little-endian); convert the "
            "model with a current llama.cpp"
        )
    tensor_count = reader.u64()
    kv_count = reader.u64()
    metadata: dict[str, Scalar] = {}
    complete = False
    elements: int | None = None
    try:
        # Each entry takes at least 12 bytes, so a lying count ends at the end of `data`.
        for _entry in range(kv_count):
            key = reader.string(limit=MAX_KEY_BYTES)
            if key is None:
                raise _Malformed
            value_type = reader.u32()
            value = _value(reader, value_type, depth=0)
            if value is not None:
                metadata[key.decode("utf-8", errors="replace")] = value
        elements = _tensor_elements(reader, tensor_count)
        complete = True
    except (_Truncated, _Malformed):
        pass
    return GgufHeader(
        version=version,
        tensor_count=tensor_count,
        metadata=metadata,
        tensor_elements=elements,
        complete=complete,
    )


def _value(reader: _Reader, value_type: int, *, depth: int) -> Scalar | None:
    if value_type == _STRING:
        text = reader.string(limit=MAX_KEPT_STRING_BYTES)
        return text.decode("utf-8", errors="replace") if text is not None else None
    if value_type == _ARRAY:
        _skip_array(reader, depth=depth + 1)
        return None
    layout = _SCALARS.get(value_type)
    if layout is None:
        raise _Malformed
    value = reader.unpack(layout)
    assert isinstance(value, (int, float, bool))
    return value


def _skip_array(reader: _Reader, *, depth: int) -> None:
    if depth > MAX_ARRAY_DEPTH:
        raise _Malformed
    element_type = reader.u32()
    count = reader.u64()
    layout = _SCALARS.get(element_type)
    if layout is not None:
        reader.skip(count * layout.size)
        return
    if element_type not in (_STRING, _ARRAY):
        raise _Malformed
    # Every element takes at least 8 bytes, so a lying count ends at the end of the data.
    for _item in range(count):
        if element_type == _STRING:
            reader.skip(reader.u64())
        else:
            _skip_array(reader, depth=depth + 1)


def _tensor_elements(reader: _Reader, tensor_count: int) -> int | None:
    total = 0
    for _tensor in range(tensor_count):
        if reader.string(limit=MAX_KEY_BYTES) is None:
            raise _Malformed
        dimensions = reader.u32()
        if dimensions > MAX_DIMENSIONS:
            raise _Malformed
        shape = [reader.u64() for _dimension in range(dimensions)]
        reader.skip(4 + 8)  # ggml type, data offset
        total += math.prod(shape)
        if total > MAX_COUNT:
            return None
    return total


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return None
