"""What a re-sync takes over from the generation the source serves, so it costs the list pages only.

A record's resource facts come from the listing and from requests pinned to the model's commit
(config.json, sizes). When the new listing shows the same commit (`sha`) and the same listing
facts, those requests would answer what they answered last time, so the pass reuses the served
record's `resources` and rebuilds only its metadata (downloads, likes, tags) from the new listing.

Which listing facts "did not change" is decided by a key written beside each chunk:

    catalog/<source>/generations/<generation>/reuse-<OFFSET>.json   {"format": 1, "keys": {id: key}}

The key hashes everything the Hub listed about the model except its popularity counters
(downloads, likes change every day without changing a file), plus what else decides the facts:
the endpoint, whether the pass had a token (gated configs), and the module version (a release
that derives facts differently rebuilds every record once). A record without a key (a model
without a commit, a generation written before keys existed) is fetched again.

The served generation is read once when a pass starts, one chunk at a time, keeping per model
only the key and the resources' JSON (a few hundred bytes): about 50 MB for 100,000 models. A
generation that cannot be read only costs requests: the pass fetches everything, as a first pass.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

from pydantic import ValidationError

from ai_models import __version__
from ai_models.adapters.hub import HubModel
from ai_models.adapters.objectstore import ObjectNotFound, ObjectStore, ObjectStoreError
from ai_models.catalog.layout import generation_prefix
from ai_models.catalog.reading import ManifestInvalid, read_manifest
from ai_models.domain.catalog.record import CatalogRecord, ProviderMetadata, ResourceFacts
from ai_models.names import CatalogProvider

logger = logging.getLogger(__name__)

REUSE_FORMAT: Final = 1
# Listing fields that change without a commit and feed no resource fact.
_VOLATILE: Final = frozenset({"downloads", "likes"})
_FIELDS: Final = tuple(field.name for field in dataclasses.fields(HubModel) if field.name not in _VOLATILE)


def reuse_name(offset: int) -> str:
    """Beside `chunk-<OFFSET>.jsonl`, with the same zero-padded offset."""
    return f"reuse-{offset:09d}.json"


def reuse_key(model: HubModel, *, endpoint: str, authenticated: bool) -> str | None:
    """The key under which `model`'s facts may be reused; None without a commit to pin them to."""
    if model.sha is None:
        return None
    listed = {name: getattr(model, name) for name in _FIELDS}
    payload = json.dumps(
        [REUSE_FORMAT, __version__, endpoint, authenticated, listed],
        sort_keys=True,
        separators=(",", ":"),
        default=_plain,
    )
    return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()


def encode_keys(keys: Mapping[str, str]) -> bytes:
    return json.dumps({"format": REUSE_FORMAT, "keys": dict(keys)}, separators=(",", ":")).encode()


def reused_record(
    *,
    source: str,
    model_id: str,
    metadata: ProviderMetadata,
    resources: ResourceFacts,
    indexed_at: datetime.datetime,
) -> CatalogRecord:
    return CatalogRecord(
        source=source,
        id=model_id,
        provider=CatalogProvider.HUGGING_FACE,
        metadata=metadata,
        resources=resources,
        indexedAt=indexed_at,
    )


class ServedFacts:
    """The reusable facts of the generation a source serves: model id -> (key, resources JSON)."""

    def __init__(
        self, entries: Mapping[str, tuple[str, str]] | None = None, generation: str | None = None
    ) -> None:
        self._entries = dict(entries or {})
        self.generation = generation

    def __len__(self) -> int:
        return len(self._entries)

    def resources(self, model_id: str, key: str | None) -> ResourceFacts | None:
        """The served record's facts when its key is `key`; None when anything differs."""
        if key is None:
            return None
        entry = self._entries.get(model_id)
        if entry is None or entry[0] != key:
            return None
        try:
            return ResourceFacts.model_validate_json(entry[1])
        except ValidationError:
            return None  # a fact the current schema refuses: derive it again

    @classmethod
    def load(cls, store: ObjectStore, source: str) -> ServedFacts:
        """The served generation's keys and facts; empty (with the reason logged) when unreadable."""
        try:
            manifest = read_manifest(store, source)
        except ManifestInvalid as error:
            logger.warning(
                "served catalog unreadable, the pass fetches every model", extra={"error": str(error)}
            )
            return cls()
        if manifest is None:
            return cls()
        prefix = generation_prefix(source, manifest.generation)
        entries: dict[str, tuple[str, str]] = {}
        try:
            for chunk in manifest.chunks:
                entries.update(_chunk_entries(store, prefix, chunk))
        except ObjectStoreError as error:
            logger.warning(
                "served catalog unreadable, the pass fetches every model",
                extra={"source": source, "generation": manifest.generation, "error": str(error)},
            )
            return cls()
        logger.info(
            "catalog pass may reuse the served generation's facts",
            extra={"source": source, "generation": manifest.generation, "models": len(entries)},
        )
        return cls(entries, manifest.generation)


def _chunk_entries(store: ObjectStore, prefix: str, chunk: str) -> Iterable[tuple[str, tuple[str, str]]]:
    offset = chunk.removeprefix("chunk-").removesuffix(".jsonl")
    if not offset.isdigit():
        return ()
    try:
        keys = _keys(store.get_bytes(prefix + reuse_name(int(offset))))
    except ObjectNotFound:
        return ()  # written before reuse keys existed: its models are fetched again
    if not keys:
        return ()
    found: list[tuple[str, tuple[str, str]]] = []
    for line in store.get_bytes(prefix + chunk).splitlines():
        try:
            record = json.loads(line)
            model_id, resources = record["id"], record["resources"]
        except (ValueError, KeyError, TypeError):
            continue
        key = keys.get(model_id) if isinstance(model_id, str) else None
        if key is not None and isinstance(resources, dict):
            found.append((model_id, (key, json.dumps(resources, separators=(",", ":")))))
    return found


def _keys(data: bytes) -> dict[str, str]:
    try:
        document = json.loads(data)
    except ValueError:
        return {}
    if not isinstance(document, dict) or document.get("format") != REUSE_FORMAT:
        return {}
    keys = document.get("keys")
    if not isinstance(keys, dict):
        return {}
    return {name: value for name, value in keys.items() if isinstance(name, str) and isinstance(value, str)}


def _plain(value: object) -> Any:
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return dict(value)
    return str(value)
