"""Where the catalog lives in the object store; the indexer writes it, the api reads it.

    catalog/<source>/manifest.json                               the generation being served
    catalog/<source>/generations/<generation>/chunk-<OFFSET>.jsonl one CatalogRecord per line
    catalog/<source>/generations/<generation>/reuse-<OFFSET>.json  the chunk's reuse keys, read by
                                                                 the next pass only (catalog.reuse)
    catalog/<source>/withdrawn-manifest.json                     the manifest of a deleted source,
                                                                 set aside by the inventory pass

A pass writes a new generation chunk by chunk; only when every chunk is written does it replace
`manifest.json` (one object PUT, atomic in S3 and in the directory store), so readers switch from
one complete generation to the next and never see a partial one. Chunks are numbered from the
offset of their first record in the pass (the checkpoint's processed count when the chunk was
started), so a chunk re-written after a restart replaces itself instead of duplicating. A model
can still appear in two chunks when the provider's order shifts between pages; readers keep one
record per (source, id), the one from the later chunk.
"""

from __future__ import annotations

import datetime
import secrets

from pydantic import BaseModel, ConfigDict, Field

CATALOG_PREFIX = "catalog/"


class CatalogManifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    source: str
    generation: str
    models: int = Field(ge=0)
    chunks: tuple[str, ...]
    completed_at: datetime.datetime = Field(alias="completedAt")


def source_prefix(source: str) -> str:
    return f"{CATALOG_PREFIX}{source}/"


def manifest_key(source: str) -> str:
    return f"{source_prefix(source)}manifest.json"


def withdrawn_manifest_key(source: str) -> str:
    """Where the inventory pass keeps the manifest of a source it found deleted: no reader serves
    the source any more, and the manifest can be put back if the source returns within the grace
    period (`controller.storage.catalogs`)."""
    return f"{source_prefix(source)}withdrawn-manifest.json"


def generation_prefix(source: str, generation: str) -> str:
    return f"{source_prefix(source)}generations/{generation}/"


def chunk_name(offset: int) -> str:
    """Zero-padded so the object store's key order is the pass order."""
    return f"chunk-{offset:09d}.jsonl"


def chunk_key(source: str, generation: str, offset: int) -> str:
    return generation_prefix(source, generation) + chunk_name(offset)


def new_generation(now: datetime.datetime) -> str:
    """Sortable by time; the random tail keeps two passes started in one second apart."""
    return now.astimezone(datetime.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)
