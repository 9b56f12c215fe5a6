"""Reading a served catalog source back from the object store (the api and the CLI use this)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from pydantic import ValidationError

from ai_models.adapters.objectstore import ObjectNotFound, ObjectStore
from ai_models.catalog.layout import CatalogManifest, generation_prefix, manifest_key
from ai_models.domain.catalog.record import CatalogRecord

logger = logging.getLogger(__name__)


class ManifestInvalid(ValueError):
    """The manifest object exists but is not a catalog manifest; the message names the key."""


def read_manifest(store: ObjectStore, source: str) -> CatalogManifest | None:
    """The generation `source` serves, or None when it has never completed a pass."""
    key = manifest_key(source)
    try:
        data = store.get_bytes(key)
    except ObjectNotFound:
        return None
    try:
        return CatalogManifest.model_validate_json(data)
    except ValidationError as error:
        raise ManifestInvalid(
            f"{key} in {store.description} is not a catalog manifest ({error.error_count()} errors); "
            "the next completed indexing pass of the source replaces it"
        ) from error


def iter_records(store: ObjectStore, manifest: CatalogManifest) -> Iterator[CatalogRecord]:
    """Every record of the served generation, one per model id; where an id repeats, the later chunk wins.

    A line that does not parse is skipped with a warning: one damaged record must not hide the rest.
    """
    prefix = generation_prefix(manifest.source, manifest.generation)
    records: dict[str, CatalogRecord] = {}
    for chunk in manifest.chunks:
        for number, line in enumerate(store.get_bytes(prefix + chunk).splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = CatalogRecord.model_validate_json(line)
            except ValidationError:
                logger.warning(
                    "catalog record unreadable, skipped",
                    extra={"source": manifest.source, "chunk": chunk, "line": number},
                )
                continue
            records.pop(record.id, None)  # re-insert so iteration follows the winning chunk's order
            records[record.id] = record
    yield from records.values()
