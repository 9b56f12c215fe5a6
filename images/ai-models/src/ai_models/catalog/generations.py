"""The generation layout every provider's pass writes (catalog.layout): chunks named by the offset
of their first record, a checkpoint that can be resumed only when its chunks are exactly what it
says, `manifest.json` written last (the atomic flip), and the generations nobody can be reading any
more removed after it.

The Hugging Face pass (catalog.indexing) and the AIModels pass (catalog.remote) both build on these.
"""

from __future__ import annotations

import datetime
import logging
import re
from collections.abc import Callable, Iterable, Mapping

from pydantic import ValidationError

from ai_models.adapters.objectstore import ObjectInfo, ObjectStore, ObjectStoreError
from ai_models.catalog.layout import (
    CatalogManifest,
    chunk_key,
    chunk_name,
    generation_prefix,
    manifest_key,
    source_prefix,
)
from ai_models.catalog.reading import ManifestInvalid, read_manifest
from ai_models.domain.catalog.record import CatalogRecord

logger = logging.getLogger(__name__)

_CHUNK = re.compile(r"chunk-(\d+)\.jsonl")


def served_generation(store: ObjectStore, source: str) -> str | None:
    try:
        manifest = read_manifest(store, source)
    except ManifestInvalid:
        return None
    return manifest.generation if manifest is not None else None


def chunks(store: ObjectStore, prefix: str) -> list[tuple[ObjectInfo, int]]:
    """The chunks under a generation's prefix with their offsets, in offset order."""
    found: list[tuple[ObjectInfo, int]] = []
    for info in store.list(prefix):
        match = _CHUNK.fullmatch(info.key.removeprefix(prefix))
        if match:
            found.append((info, int(match.group(1))))
    return sorted(found, key=lambda item: item[1])


def parse_chunk(data: bytes) -> list[CatalogRecord]:
    return [CatalogRecord.model_validate_json(line) for line in data.splitlines() if line.strip()]


def write_chunk(
    store: ObjectStore, source: str, generation: str, offset: int, records: Iterable[CatalogRecord]
) -> None:
    data = "".join(record.to_json() + "\n" for record in records).encode()
    if data:
        store.put_bytes(chunk_key(source, generation, offset), data)


def resumable_ids(store: ObjectStore, source: str, generation: str, processed: int) -> set[str] | None:
    """The ids a checkpoint of `generation` at `processed` records has written, or None (the reason
    logged) when it cannot be trusted: it names the served generation, a chunk is unreadable, or
    the chunks hold another number of records. Chunks written after the checkpoint are removed
    (the resumed pass writes that page again under the same key)."""
    facts: Mapping[str, object] = {"source": source, "generation": generation}
    if served_generation(store, source) == generation:
        # Continuing would write into the generation readers are using.
        logger.warning("checkpoint names the served generation, starting a fresh pass", extra=facts)
        return None
    seen: set[str] = set()
    for info, offset in chunks(store, generation_prefix(source, generation)):
        if offset >= processed:
            store.delete(info.key)
            continue
        try:
            seen.update(record.id for record in parse_chunk(store.get_bytes(info.key)))
        except ValidationError:
            logger.warning(
                "checkpointed chunk unreadable, starting a fresh pass", extra={**facts, "key": info.key}
            )
            return None
    if len(seen) != processed:
        logger.warning(
            "checkpointed chunks are incomplete, starting a fresh pass",
            extra={**facts, "expected": processed, "found": len(seen)},
        )
        return None
    return seen


def serve_generation(
    store: ObjectStore, source: str, generation: str, *, models: int, clock: Callable[[], datetime.datetime]
) -> CatalogManifest:
    """Flip the source to `generation` (its manifest, written last) and remove older generations."""
    previous = served_generation(store, source)
    prefix = generation_prefix(source, generation)
    names = tuple(chunk_name(offset) for _, offset in chunks(store, prefix))
    manifest = CatalogManifest(
        source=source, generation=generation, models=models, chunks=names, completedAt=clock()
    )
    store.put_bytes(manifest_key(source), manifest.model_dump_json(by_alias=True).encode())
    logger.info(
        "catalog generation served",
        extra={
            "source": source,
            "generation": generation,
            "models": models,
            "chunks": len(names),
            "previous": previous,
        },
    )
    collect_garbage(store, source, keep={generation, previous})
    return manifest


def collect_garbage(store: ObjectStore, source: str, *, keep: set[str | None]) -> None:
    """Remove every generation but the one just served and the one served before it.

    The previous one stays until the next pass: an api replica that read the old manifest a moment
    before the flip may still be loading its chunks. Abandoned partial generations go now. A
    failure here is logged, not raised: the new generation is already served.
    """
    root = source_prefix(source) + "generations/"
    try:
        for prefix in store.list_prefixes(root):
            generation = prefix.removeprefix(root).rstrip("/")
            if generation not in keep:
                removed = store.delete_prefix(prefix)
                logger.info(
                    "old catalog generation removed",
                    extra={"source": source, "generation": generation, "objects": removed},
                )
    except ObjectStoreError as error:
        logger.warning(
            "old catalog generations not removed; the next pass retries",
            extra={"source": source, "error": str(error)},
        )
