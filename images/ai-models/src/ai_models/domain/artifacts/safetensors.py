"""The facts a safetensors file states about itself, checked against the file (pure).

A safetensors file is an 8-byte little-endian header length N, a JSON header of N bytes naming
each tensor's dtype, shape and `data_offsets` into the data that follows, then the data. The
header is checked as the safetensors loader checks it before any tensor is read: offsets start
at 0 and follow one another in order, each tensor's bytes are its elements times its dtype's
size, and the data fills the rest of the file exactly. A header that passes states real element
counts; one that does not is no model, whatever its JSON says.

Input is untrusted: the header is bounded before it is read (`MAX_HEADER_BYTES`), tensor
descriptions are reduced to four numbers as they are parsed and counted against `MAX_TENSORS`,
and nothing here raises for any input except `SafetensorsFormatError`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
from collections.abc import Mapping
from typing import Any, Final

from ai_models.domain.catalog.config_view import MAX_FACT
from ai_models.domain.catalog.dtypes import DTYPE_BITS, dtype_key

PREFIX_BYTES: Final = 8
# The format allows 100 MB; real headers are kilobytes to a few MiB (thousands of tensors), and
# parsing costs several times the header's size in memory.
MAX_HEADER_BYTES: Final = 16 * 1024 * 1024
MAX_TENSORS: Final = 100_000  # per file; the largest real shards hold a few thousand
MAX_DIMENSIONS: Final = 16  # real tensors have at most 5; a bound keeps the products cheap
METADATA_KEY: Final = "__metadata__"


class SafetensorsFormatError(ValueError):
    """The bytes are not a valid safetensors file; the message says what is wrong."""


@dataclasses.dataclass(frozen=True)
class SafetensorsHeader:
    counts: Mapping[str, int]  # elements per dtype (upper-case safetensors names)
    tensors: int


def header_length(prefix: bytes, *, file_size: int) -> int:
    """The JSON header's length from the file's first 8 bytes, checked against the file."""
    if len(prefix) < PREFIX_BYTES or file_size < PREFIX_BYTES:
        raise SafetensorsFormatError(f"{file_size} bytes cannot hold a safetensors header")
    (length,) = struct.unpack("<Q", prefix[:PREFIX_BYTES])
    if length < 2 or PREFIX_BYTES + length > file_size:
        raise SafetensorsFormatError(f"the header length {length} does not fit the file of {file_size} bytes")
    if length > MAX_HEADER_BYTES:
        raise SafetensorsFormatError(
            f"the header is {length} bytes, more than the {MAX_HEADER_BYTES} bytes a publisher reads"
        )
    return int(length)


@dataclasses.dataclass(frozen=True)
class _Tensor:
    dtype: str
    elements: int
    start: int
    end: int


class _Invalid(Exception):
    """Raised inside the JSON parser's hooks, to stop at the first problem."""


@dataclasses.dataclass(frozen=True)
class _Refused:
    """A tensor description that is not valid: the header names it once it is parsed."""

    cause: str


def parse_safetensors_header(header: bytes, *, file_size: int) -> SafetensorsHeader:
    """Elements per dtype that the JSON `header` of a `file_size`-byte file declares, once every
    tensor is shown to lie where the header says, in a file that long."""
    data_bytes = file_size - PREFIX_BYTES - len(header)
    if not header.startswith(b"{") or data_bytes < 0:
        raise SafetensorsFormatError("the header is not a JSON object")
    parser = _Parser()
    try:
        document = json.loads(
            header.decode("utf-8"), object_pairs_hook=parser.hook, parse_constant=_no_constants
        )
    except _Invalid as error:
        raise SafetensorsFormatError(str(error)) from None
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError and JSONDecodeError included
        raise SafetensorsFormatError(f"the header is not UTF-8 JSON ({type(error).__name__})") from None
    if not isinstance(document, dict):
        raise SafetensorsFormatError("the header is not a JSON object")
    described: list[tuple[str, _Tensor]] = []
    for name, value in document.items():
        if name == METADATA_KEY and isinstance(value, dict):
            continue
        if isinstance(value, _Refused):
            raise SafetensorsFormatError(f"tensor {_shown(name)}: {value.cause}")
        if not isinstance(value, _Tensor):
            raise SafetensorsFormatError(f"tensor {_shown(name)} has no valid dtype, shape and data_offsets")
        described.append((name, value))
    tensors = sorted(described, key=lambda item: (item[1].start, item[1].end))
    end = 0
    counts: dict[str, int] = {}
    for name, tensor in tensors:
        if tensor.start != end:
            raise SafetensorsFormatError(
                f"tensor {_shown(name)} starts at byte {tensor.start} of the data, but the tensor before it "
                f"ends at {end}: the offsets leave a gap or overlap"
            )
        end = tensor.end
        counts[tensor.dtype] = counts.get(tensor.dtype, 0) + tensor.elements
        if counts[tensor.dtype] > MAX_FACT:
            raise SafetensorsFormatError("the tensors declare more elements than any model has")
    if end != data_bytes:
        raise SafetensorsFormatError(
            f"the tensors take {end} bytes, but the file holds {data_bytes} bytes of data after its header"
        )
    if not tensors:
        raise SafetensorsFormatError("the file holds no tensors")
    return SafetensorsHeader(counts=counts, tensors=len(tensors))


class _Parser:
    """JSON object hooks: each tensor description becomes a `_Tensor` as soon as it is parsed."""

    def __init__(self) -> None:
        self._objects = 0

    def hook(self, pairs: list[tuple[str, Any]]) -> object:
        self._objects += 1
        if self._objects > MAX_TENSORS + 2:  # the tensors, the metadata and the header itself
            raise _Invalid(f"the header describes more than {MAX_TENSORS} tensors")
        fields = dict(pairs)
        if len(fields) != len(pairs):
            raise _Invalid("an object of the header names a key twice")
        # Bottom-up: string maps (`__metadata__`) and tensors first; the header is what holds them.
        if all(isinstance(value, (str, _Tensor, _Refused, dict)) for value in fields.values()):
            return fields
        try:
            return _tensor(fields)
        except _Invalid as error:
            return _Refused(str(error))


def _tensor(fields: dict[str, Any]) -> _Tensor:
    dtype = dtype_key(fields.get("dtype"))
    shape = fields.get("shape")
    offsets = fields.get("data_offsets")
    if (
        dtype is None
        or set(fields) != {"dtype", "shape", "data_offsets"}
        or not isinstance(shape, list)
        or len(shape) > MAX_DIMENSIONS
        or not all(_count(value) for value in shape)
        or not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_count(value) for value in offsets)
        or offsets[0] > offsets[1]
    ):
        raise _Invalid("it has no valid dtype, shape and data_offsets")
    elements = math.prod(shape)
    start, end = offsets
    length = end - start
    if elements > MAX_FACT:
        raise _Invalid("it declares more elements than any model has")
    bits = DTYPE_BITS.get(dtype)
    if bits is not None and elements * bits != length * 8:
        raise _Invalid(
            f"as {dtype} of shape {shape} it takes {elements * bits / 8:g} bytes, but its data_offsets "
            f"give it {length}"
        )
    # A dtype newer than this table: at least one bit per element, or the count is invented.
    if bits is None and elements > length * 8:
        raise _Invalid(f"{elements} elements of {dtype} cannot fit in its {length} bytes")
    return _Tensor(dtype=dtype, elements=elements, start=start, end=end)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_FACT


def _no_constants(name: str) -> object:
    raise _Invalid(f"the header holds {name}, which JSON does not have")


def _shown(name: str) -> str:
    return repr(name if len(name) <= 120 else name[:117] + "...")
