"""The facts a GGUF file states about itself, read from the first bytes of the file (pure).

A GGUF file (v2 and v3; little-endian) starts with its metadata: typed key/value pairs
(`general.architecture`, `<arch>.context_length`, ...) followed by one description per tensor,
then the tensor data. The publisher reads the first `GGUF_HEADER_BYTES` of a stored file (or all
of a smaller one) and hands them here with the file's size.

The header is parsed strictly, as llama.cpp's loader parses it: magic and version, counts that
the file can hold, lengths inside the file, value types that exist, no key or tensor named
twice, and tensor descriptions consistent with the file (at most 4 dimensions, whole blocks of
their type, offsets aligned and in order, data inside the file). Bytes that fail any of it are
no model: `GgufFormatError`, the only exception raised for any input. Memory stays bounded: every
length and count is checked before anything is allocated, kept strings are short, arrays are
skipped, nesting is bounded and the numbers of entries and tensors are capped.
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
MAX_DIMENSIONS: Final = 4  # GGML_MAX_DIMS
MAX_COUNT: Final = 2**53 - 1  # larger element counts are garbage (and lose precision in JSON)
# Real files have tens of metadata entries and at most a few thousand tensors.
MAX_ENTRIES: Final = 65536
MAX_TENSORS: Final = 65536
DEFAULT_ALIGNMENT: Final = 32
_MIN_ENTRY_BYTES: Final = 8 + 4 + 1  # key length, value type, the smallest value
_MIN_TENSOR_BYTES: Final = 8 + 4 + 4 + 8  # name length, dimensions, type, offset
_MAX_GGML_TYPE: Final = 255  # ids beyond are garbage; unknown ones below may be newer types

# ggml tensor types (ggml.h `enum ggml_type`) whose layout is certain: (elements, bytes) per block.
GGML_BLOCKS: Final[Mapping[int, tuple[int, int]]] = {
    0: (1, 4),  # F32
    1: (1, 2),  # F16
    2: (32, 18),  # Q4_0
    3: (32, 20),  # Q4_1
    6: (32, 22),  # Q5_0
    7: (32, 24),  # Q5_1
    8: (32, 34),  # Q8_0
    10: (256, 84),  # Q2_K
    11: (256, 110),  # Q3_K
    12: (256, 144),  # Q4_K
    13: (256, 176),  # Q5_K
    14: (256, 210),  # Q6_K
    15: (256, 292),  # Q8_K
    16: (256, 66),  # IQ2_XXS
    17: (256, 74),  # IQ2_XS
    18: (256, 98),  # IQ3_XXS
    19: (256, 50),  # IQ1_S
    20: (32, 18),  # IQ4_NL
    21: (256, 110),  # IQ3_S
    22: (256, 82),  # IQ2_S
    23: (256, 136),  # IQ4_XS
    24: (1, 1),  # I8
    25: (1, 2),  # I16
    26: (1, 4),  # I32
    27: (1, 8),  # I64
    28: (1, 8),  # F64
    29: (256, 56),  # IQ1_M
    30: (1, 2),  # BF16
    34: (256, 54),  # TQ1_0
    35: (256, 66),  # TQ2_0
    39: (32, 17),  # MXFP4
}

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
    """The bytes are not a valid GGUF file this parser reads; the message says what is wrong."""


@dataclasses.dataclass(frozen=True)
class GgufHeader:
    version: int
    tensor_count: int
    metadata: Mapping[str, Scalar]  # scalar values and short strings; arrays are skipped
    tensor_elements: int | None  # elements of all tensors (always counted by a strict parse)
    complete: bool  # the whole header was read and checked (always, once parsed)

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
    """The header goes on past the bytes given (but not past the file)."""


class _Malformed(Exception):
    """A value that no writer produces; the message says which."""


class _Reader:
    def __init__(self, data: bytes, file_size: int) -> None:
        self._data = memoryview(data)
        self._file_size = file_size
        self.offset = 0

    def take(self, count: int) -> memoryview:
        end = self.offset + count
        if end > len(self._data):
            if end > self._file_size:
                raise _Malformed(f"a length at byte {self.offset} reaches past the end of the file")
            raise _Truncated
        piece = self._data[self.offset : end]
        self.offset = end
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


def parse_gguf_header(data: bytes, *, file_size: int | None = None) -> GgufHeader:
    """The header facts of a GGUF file of `file_size` bytes (`data` itself when not given) whose
    first bytes are `data`; the whole header must lie within `data`."""
    size = len(data) if file_size is None else max(file_size, len(data))
    if len(data) < 24 or not data.startswith(MAGIC):
        raise GgufFormatError("not a GGUF file: it does not start with the GGUF magic and header")
    reader = _Reader(data, size)
    reader.skip(len(MAGIC))
    version = reader.u32()
    if version not in SUPPORTED_VERSIONS:
        raise GgufFormatError(
            f"GGUF version {version} is not supported (only v2 and v3, little-endian); convert the "
            "model with a current llama.cpp"
        )
    tensor_count = reader.u64()
    kv_count = reader.u64()
    if tensor_count == 0:
        raise GgufFormatError("the file describes no tensors (a vocabulary-only GGUF is not a model)")
    if kv_count > min(MAX_ENTRIES, size // _MIN_ENTRY_BYTES) or tensor_count > min(
        MAX_TENSORS, size // _MIN_TENSOR_BYTES
    ):
        raise GgufFormatError(
            f"the header counts {kv_count} metadata entries and {tensor_count} tensors, more than a "
            f"file of {size} bytes holds (or than the {MAX_ENTRIES} entries and {MAX_TENSORS} "
            "tensors a publisher reads)"
        )
    try:
        metadata = _metadata(reader, kv_count)
        elements = _tensors(reader, tensor_count, alignment=_alignment(metadata), file_size=size)
    except _Malformed as error:
        raise GgufFormatError(f"the header is malformed: {error}") from None
    except _Truncated:
        raise GgufFormatError(
            f"the header goes on past the first {len(data)} bytes, the most a publisher reads"
        ) from None
    return GgufHeader(
        version=version, tensor_count=tensor_count, metadata=metadata, tensor_elements=elements, complete=True
    )


def _metadata(reader: _Reader, count: int) -> dict[str, Scalar]:
    metadata: dict[str, Scalar] = {}
    keys: set[bytes] = set()
    for _entry in range(count):
        key = reader.string(limit=MAX_KEY_BYTES)
        if key is None or key in keys:
            raise _Malformed("a metadata key is too long or named twice")
        keys.add(key)
        value_type = reader.u32()
        value = _value(reader, value_type, depth=0)
        if value is not None:
            metadata[key.decode("utf-8", errors="replace")] = value
    return metadata


def _alignment(metadata: Mapping[str, Scalar]) -> int:
    value = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value & (value - 1):
        raise _Malformed(f"general.alignment {value!r} is not a power of two")
    return value


def _value(reader: _Reader, value_type: int, *, depth: int) -> Scalar | None:
    if value_type == _STRING:
        text = reader.string(limit=MAX_KEPT_STRING_BYTES)
        return text.decode("utf-8", errors="replace") if text is not None else None
    if value_type == _ARRAY:
        _skip_array(reader, depth=depth + 1)
        return None
    layout = _SCALARS.get(value_type)
    if layout is None:
        raise _Malformed(f"value type {value_type} does not exist")
    value = reader.unpack(layout)
    assert isinstance(value, (int, float, bool))
    return value


def _skip_array(reader: _Reader, *, depth: int) -> None:
    if depth > MAX_ARRAY_DEPTH:
        raise _Malformed(f"arrays nest deeper than {MAX_ARRAY_DEPTH}")
    element_type = reader.u32()
    count = reader.u64()
    layout = _SCALARS.get(element_type)
    if layout is not None:
        reader.skip(count * layout.size)
        return
    if element_type not in (_STRING, _ARRAY):
        raise _Malformed(f"array element type {element_type} does not exist")
    # Every element takes at least 8 bytes, so a lying count ends at the end of the data.
    for _item in range(count):
        if element_type == _STRING:
            reader.skip(reader.u64())
        else:
            _skip_array(reader, depth=depth + 1)


def _tensors(reader: _Reader, count: int, *, alignment: int, file_size: int) -> int:
    """Elements of all tensors, once their descriptions are shown to fit the file."""
    total = 0
    names: set[bytes] = set()
    expected: int | None = 0  # where the next tensor must start, while every layout is known
    data_end = 0  # the least the data section must hold
    for _tensor in range(count):
        name = reader.string(limit=MAX_KEY_BYTES)
        if name is None or name in names:
            raise _Malformed("a tensor name is too long or named twice")
        names.add(name)
        dimensions = reader.u32()
        if dimensions > MAX_DIMENSIONS:
            raise _Malformed(f"a tensor has {dimensions} dimensions, more than {MAX_DIMENSIONS}")
        shape = [reader.u64() for _dimension in range(dimensions)]
        ggml_type = reader.u32()
        offset = reader.u64()
        elements = math.prod(shape)
        if elements > MAX_COUNT or ggml_type > _MAX_GGML_TYPE or offset % alignment:
            raise _Malformed("a tensor has an impossible size, type or unaligned offset")
        block = GGML_BLOCKS.get(ggml_type)
        if block is not None:
            block_elements, block_bytes = block
            if shape and shape[0] % block_elements:
                raise _Malformed(f"a tensor's rows are not whole blocks of its type {ggml_type}")
            size = elements // block_elements * block_bytes
        else:
            size = -(-elements // 8)  # a type newer than this table: at least a bit per element
        if expected is not None and offset != expected:
            raise _Malformed(f"a tensor starts at data offset {offset}, where {expected} was due")
        expected = offset + size + (-size % alignment) if block is not None and expected is not None else None
        data_end = max(data_end, offset + size)
        total += elements
        if total > MAX_COUNT:
            raise _Malformed("the tensors declare more elements than any model has")
    data_start = reader.offset + (-reader.offset % alignment)
    if data_start + data_end > file_size:
        raise _Malformed(f"the tensors need {data_start + data_end} bytes, but the file has {file_size}")
    if total == 0:
        raise _Malformed("the tensors hold no elements")
    return total


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return None
