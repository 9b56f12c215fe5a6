"""What the stored files say about the model, read back from the store for its profile.

Only headers are read, with ranged reads: a safetensors file's 8-byte header length and its JSON
header, the first MiBs of a GGUF file (its metadata and tensor descriptions), and a small
config.json. Each weights header is checked against its file by the domain parsers
(`domain.artifacts.safetensors`, `domain.artifacts.gguf`): a file that fails is not a model, and
`WeightsHeaderError` says which file and why, for uploads and Hugging Face files alike. Bounds
keep a hostile file from costing memory: no header is read past its parser's limit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ai_models.adapters.objectstore import ObjectStore
from ai_models.domain.artifacts.gguf import GgufFormatError, GgufHeader, parse_gguf_header
from ai_models.domain.artifacts.manifest import ArtifactFile
from ai_models.domain.artifacts.safetensors import (
    PREFIX_BYTES,
    SafetensorsFormatError,
    header_length,
    parse_safetensors_header,
)
from ai_models.publish.artifact import ArtifactWriter

logger = logging.getLogger(__name__)

MAX_CONFIG_BYTES = 4 * 1024 * 1024
GGUF_HEADER_BYTES = 32 * 1024 * 1024  # metadata and tensor descriptions of real files fit in 10


class WeightsHeaderError(ValueError):
    """A weights file's header is not valid; the message names the file and the problem."""


def read_config(writer: ArtifactWriter, files: Sequence[ArtifactFile]) -> Mapping[str, Any] | None:
    item = next((item for item in files if item.path == "config.json"), None)
    if item is None or item.size > MAX_CONFIG_BYTES:
        return None
    try:
        config = json.loads(writer.store.get_bytes(writer.key(item.path)))
    except ValueError:
        return None
    return config if isinstance(config, dict) else None


def read_safetensors_counts(store: ObjectStore, key: str, *, path: str, size: int) -> dict[str, int]:
    """Elements per dtype of one stored safetensors file (two ranged reads), once its header is
    shown to describe the file."""
    try:
        prefix = b""
        if size >= PREFIX_BYTES:
            with store.open_range(key, start=0, end=PREFIX_BYTES - 1) as stream:
                prefix = stream.read(PREFIX_BYTES)
        length = header_length(prefix, file_size=size)
        with store.open_range(key, start=PREFIX_BYTES, end=PREFIX_BYTES + length - 1) as stream:
            header = stream.read(length)
        return dict(parse_safetensors_header(header, file_size=size).counts)
    except SafetensorsFormatError as error:
        raise WeightsHeaderError(f"{path} is not a valid safetensors file: {error}") from error


def total_safetensors_counts(writer: ArtifactWriter, files: Sequence[ArtifactFile]) -> dict[str, int] | None:
    """Elements per dtype over every stored .safetensors file; None when there are none. A file
    whose header is not valid raises WeightsHeaderError."""
    totals: dict[str, int] = {}
    weights = [item for item in files if item.path.lower().endswith(".safetensors")]
    for item in weights:
        counts = read_safetensors_counts(writer.store, writer.key(item.path), path=item.path, size=item.size)
        for dtype, count in counts.items():
            totals[dtype] = totals.get(dtype, 0) + count
    return totals or None


def read_gguf_headers(writer: ArtifactWriter, files: Sequence[ArtifactFile]) -> list[GgufHeader]:
    """The header of every stored GGUF model file (vision projectors aside); a file whose header is
    not valid raises WeightsHeaderError."""
    headers = []
    for item in files:
        name = item.path.rsplit("/", 1)[-1].lower()
        # A vision projector (mmproj) is published with its model but describes an image encoder.
        if not name.endswith(".gguf") or name.startswith("mmproj"):
            continue
        data = b""
        if item.size > 0:
            with writer.store.open_range(
                writer.key(item.path), start=0, end=min(item.size, GGUF_HEADER_BYTES) - 1
            ) as stream:
                data = stream.read()
        try:
            headers.append(parse_gguf_header(data, file_size=item.size))
        except GgufFormatError as error:
            raise WeightsHeaderError(f"{item.path} is not a valid GGUF file: {error}") from error
    return headers
