"""What the stored files say about the model, read back from the store for its profile.

Only headers are read, with ranged reads: a safetensors file's 8-byte header length and its JSON
header (exact element counts per dtype), the first MiBs of a GGUF file (its metadata), and a
small config.json. Bounds keep a hostile file from costing memory: headers larger than
`MAX_SAFETENSORS_HEADER` are not read.
"""

from __future__ import annotations

import json
import logging
import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from ai_models.adapters.objectstore import ObjectStore
from ai_models.domain.artifacts.gguf import GgufFormatError, GgufHeader, parse_gguf_header
from ai_models.domain.artifacts.manifest import ArtifactFile
from ai_models.domain.catalog.config_view import MAX_FACT
from ai_models.domain.catalog.dtypes import dtype_key
from ai_models.publish.artifact import ArtifactWriter

logger = logging.getLogger(__name__)

MAX_CONFIG_BYTES = 4 * 1024 * 1024
# Real headers are kilobytes to a few MiB (MoE models with thousands of tensors); the format's
# own limit (100 MiB) would be a lot of memory for a JSON document.
MAX_SAFETENSORS_HEADER = 32 * 1024 * 1024
GGUF_HEADER_BYTES = 32 * 1024 * 1024  # metadata and tensor descriptions of real files fit
MAX_DIMENSIONS = 16  # real tensors have at most 5; a bound keeps the products cheap


class WeightsHeaderError(ValueError):
    """A weights file's header is unreadable; the message names the file and the problem."""


def read_config(writer: ArtifactWriter, files: Sequence[ArtifactFile]) -> Mapping[str, Any] | None:
    item = next((item for item in files if item.path == "config.json"), None)
    if item is None or item.size > MAX_CONFIG_BYTES:
        return None
    try:
        config = json.loads(writer.store.get_bytes(writer.key(item.path)))
    except ValueError:
        return None
    return config if isinstance(config, dict) else None


def safetensors_counts(header: bytes, *, path: str) -> dict[str, int]:
    """Elements per dtype that a safetensors JSON header declares."""
    try:
        document = json.loads(header)
    except ValueError as error:
        raise WeightsHeaderError(f"{path}: the safetensors header is not JSON ({error})") from error
    if not isinstance(document, dict):
        raise WeightsHeaderError(f"{path}: the safetensors header is not a JSON object")
    counts: dict[str, int] = {}
    for name, tensor in document.items():
        if name == "__metadata__":
            continue
        if not isinstance(tensor, dict):
            raise WeightsHeaderError(f"{path}: tensor {name!r} is not described by an object")
        dtype = dtype_key(tensor.get("dtype"))
        shape = tensor.get("shape")
        if (
            dtype is None
            or not isinstance(shape, list)
            or len(shape) > MAX_DIMENSIONS
            or not all(_dimension(value) for value in shape)
        ):
            raise WeightsHeaderError(f"{path}: tensor {name!r} has no valid dtype and shape")
        counts[dtype] = counts.get(dtype, 0) + math.prod(shape)
        if counts[dtype] > MAX_FACT:
            raise WeightsHeaderError(f"{path}: the tensors declare more elements than any model has")
    return counts


def read_safetensors_counts(store: ObjectStore, key: str, *, path: str, size: int) -> dict[str, int]:
    """Elements per dtype of one stored safetensors file (two ranged reads)."""
    if size < 8:
        raise WeightsHeaderError(f"{path}: {size} bytes cannot hold a safetensors header")
    with store.open_range(key, start=0, end=7) as stream:
        (length,) = struct.unpack("<Q", stream.read(8))
    if length < 2 or 8 + length > size:
        raise WeightsHeaderError(f"{path}: the safetensors header length {length} does not fit the file")
    if length > MAX_SAFETENSORS_HEADER:
        raise WeightsHeaderError(
            f"{path}: the safetensors header is {length} bytes, more than the {MAX_SAFETENSORS_HEADER} read"
        )
    with store.open_range(key, start=8, end=8 + length - 1) as stream:
        header = stream.read(length)
    return safetensors_counts(header, path=path)


def total_safetensors_counts(
    writer: ArtifactWriter, files: Sequence[ArtifactFile], *, strict: bool
) -> dict[str, int] | None:
    """Elements per dtype over every stored .safetensors file; None when there are none, or (when
    not `strict`) when a header is unreadable. `strict` raises WeightsHeaderError instead."""
    totals: dict[str, int] = {}
    weights = [item for item in files if item.path.lower().endswith(".safetensors")]
    for item in weights:
        try:
            counts = read_safetensors_counts(
                writer.store, writer.key(item.path), path=item.path, size=item.size
            )
        except WeightsHeaderError as error:
            if strict:
                raise
            logger.warning(
                "safetensors header unreadable; the metadata stays partial", extra={"error": str(error)}
            )
            return None
        for dtype, count in counts.items():
            totals[dtype] = totals.get(dtype, 0) + count
    return totals or None


def read_gguf_headers(
    writer: ArtifactWriter, files: Sequence[ArtifactFile], *, strict: bool
) -> list[GgufHeader]:
    headers = []
    for item in files:
        name = item.path.rsplit("/", 1)[-1].lower()
        # A vision projector (mmproj) is published with its model but describes an image encoder.
        if not name.endswith(".gguf") or name.startswith("mmproj"):
            continue
        if item.size < 24:
            if strict:
                raise WeightsHeaderError(f"{item.path}: {item.size} bytes cannot hold a GGUF header")
            continue
        with writer.store.open_range(
            writer.key(item.path), start=0, end=min(item.size, GGUF_HEADER_BYTES) - 1
        ) as stream:
            data = stream.read()
        try:
            headers.append(parse_gguf_header(data))
        except GgufFormatError as error:
            if strict:
                raise WeightsHeaderError(f"{item.path}: {error}") from error
            logger.warning(
                "GGUF header unreadable; the metadata stays partial",
                extra={"file": item.path, "error": str(error)},
            )
    return headers


def _dimension(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_FACT
