"""One indexing pass of a catalog source: Hub listing pages in, chunks and a manifest out.

The pass is a small state machine over `_PassState`:

    begin (fresh generation, or resume a checkpoint) -> page, page, ... -> finish

Each page is listed, every filter of the source re-checked on its models (the Hub's query
parameters only narrow the traffic), the configs of the models whose commit or listing changed
since the served generation fetched (the others reuse their served facts, see reuse.py), its
records written as one chunk named by the offset of its first record (with the chunk's reuse
keys beside it), and only then is the checkpoint reported. A crash between the chunk write
and the checkpoint therefore resumes at the same offset and rewrites the same chunk key: nothing
is duplicated and nothing is lost. `finish` writes `manifest.json` last (the atomic flip) and
then removes generations nobody can be reading any more. Until the flip, the source keeps
serving its previous generation, whatever happens to this pass.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ai_models.adapters.hub import HubModel, HubPage
from ai_models.adapters.objectstore import ObjectStore
from ai_models.catalog.cursor import PassPosition
from ai_models.catalog.generations import resumable_ids, serve_generation
from ai_models.catalog.layout import (
    CatalogManifest,
    chunk_key,
    generation_prefix,
    new_generation,
)
from ai_models.catalog.lister import ListingClient, PageLister
from ai_models.catalog.records import build_record, listing_metadata, wants_config
from ai_models.catalog.reuse import (
    ServedFacts,
    encode_keys,
    reuse_key,
    reuse_name,
    reused_record,
)
from ai_models.catalog.sizes import wants_size
from ai_models.catalog.source import SourceSpec
from ai_models.domain.catalog.filters import CatalogFilter
from ai_models.domain.catalog.record import CatalogRecord, ProviderMetadata, ResourceFacts

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """The resume point of a pass; the source's `status.resume {generation, cursor, processedModels}`."""

    generation: str
    cursor: str | None
    processed_models: int


@dataclasses.dataclass(frozen=True)
class PassResult:
    generation: str
    models: int
    chunks: int
    manifest: CatalogManifest


@dataclasses.dataclass
class _PassState:
    generation: str
    position: PassPosition
    written: int  # records in confirmed chunks == offset of the next chunk
    seen: set[str]  # ids written in this pass: a model listed twice is stored once

    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self.generation, self.position.encode(), self.written)


def run_pass(
    *,
    spec: SourceSpec,
    hub: ListingClient,
    store: ObjectStore,
    resume: Checkpoint | None,
    on_checkpoint: Callable[[Checkpoint], None],
    clock: Callable[[], datetime.datetime],
    should_stop: Callable[[], bool] = lambda: False,
) -> PassResult | None:
    """Index `spec` into a generation and serve it; None when `should_stop` ended the pass early.

    `should_stop` is asked before each page. Stopping leaves the last checkpoint valid and the
    previous generation served. Provider and store errors propagate the same way: whatever was
    checkpointed stays usable for `resume`.
    """
    queries = spec.query_count
    state = _begin(spec=spec, store=store, resume=resume, clock=clock)
    served = ServedFacts.load(store, spec.name)
    with PageLister(hub, spec) as lister:
        while state.position.query < queries:
            if should_stop():
                logger.info(
                    "catalog pass stopped before its next page",
                    extra={"source": spec.name, "generation": state.generation, "models": state.written},
                )
                return None
            page = lister.page(state.position)
            quota = _quota(spec, position=state.position, written=state.written, queries=queries)
            if page.next_cursor is not None and (quota is None or quota > len(page.models)):
                # Even if every model of this page is kept, the query goes on to the next page.
                lister.ask_ahead(state.position.next_page(page.next_cursor))
            state = _index_page(
                spec=spec,
                hub=hub,
                store=store,
                state=state,
                page=page,
                quota=quota,
                served=served,
                clock=clock,
            )
            on_checkpoint(state.checkpoint())
    return _finish(spec=spec, store=store, state=state, clock=clock)


def _begin(
    *,
    spec: SourceSpec,
    store: ObjectStore,
    resume: Checkpoint | None,
    clock: Callable[[], datetime.datetime],
) -> _PassState:
    if resume is not None:
        state = _resumed(spec=spec, store=store, resume=resume)
        if state is not None:
            logger.info(
                "catalog pass resumes from its checkpoint",
                extra={"source": spec.name, "generation": state.generation, "models": state.written},
            )
            return state
    generation = new_generation(clock())
    logger.info("catalog pass starts a new generation", extra={"source": spec.name, "generation": generation})
    return _PassState(generation=generation, position=PassPosition(), written=0, seen=set())


def _resumed(*, spec: SourceSpec, store: ObjectStore, resume: Checkpoint) -> _PassState | None:
    """The state a checkpoint describes, or None (with the reason logged) when it cannot be trusted."""
    facts = {"source": spec.name, "generation": resume.generation}
    try:
        position = PassPosition.decode(resume.cursor) if resume.cursor else PassPosition()
    except ValueError:
        logger.warning("checkpoint cursor unreadable, starting a fresh pass", extra=facts)
        return None
    if position.query > spec.query_count or position.start > resume.processed_models:
        logger.warning("checkpoint does not fit this source's spec, starting a fresh pass", extra=facts)
        return None
    # The chunks must be exactly what the checkpoint says (catalog.generations).
    seen = resumable_ids(store, spec.name, resume.generation, resume.processed_models)
    if seen is None:
        return None
    return _PassState(generation=resume.generation, position=position, written=len(seen), seen=seen)


def _page_records(
    spec: SourceSpec,
    candidates: Sequence[tuple[HubModel, ProviderMetadata]],
    *,
    reused: Mapping[str, ResourceFacts],
    configs: Mapping[str, Mapping[str, Any] | None],
    sizes: Mapping[str, int | None],
    quota: int | None,
    indexed_at: datetime.datetime,
) -> tuple[list[CatalogRecord], int]:
    """The page's records: each built from the listing (or reused from the served generation), kept
    when the source's parameter range admits it, at most `quota`; and how many it did not admit."""
    records: list[CatalogRecord] = []
    out_of_range = 0
    for model, metadata in candidates:
        if quota is not None and len(records) >= quota:
            break
        facts = reused.get(model.id)
        if facts is not None:
            record = reused_record(
                source=spec.name, model_id=model.id, metadata=metadata, resources=facts, indexed_at=indexed_at
            )
        else:
            record = build_record(
                source=spec.name,
                model=model,
                config=configs.get(model.id),
                indexed_at=indexed_at,
                weights_bytes=sizes.get(model.id),
            )
        if spec.catalog_filter.admits_parameters(record.resources.parameter_count):
            records.append(record)
        else:
            out_of_range += 1
    return records, out_of_range


def _write_chunk(
    store: ObjectStore,
    spec: SourceSpec,
    state: _PassState,
    records: Sequence[CatalogRecord],
    *,
    keys: Mapping[str, str | None],
) -> None:
    offset_keys = {record.id: key for record in records if (key := keys[record.id]) is not None}
    prefix = generation_prefix(spec.name, state.generation)
    # Keys first: a served chunk always has its keys, and a rewrite after a crash replaces both.
    store.put_bytes(prefix + reuse_name(state.written), encode_keys(offset_keys))
    data = "".join(record.to_json() + "\n" for record in records).encode()
    store.put_bytes(chunk_key(spec.name, state.generation, state.written), data)


def _index_page(
    *,
    spec: SourceSpec,
    hub: ListingClient,
    store: ObjectStore,
    state: _PassState,
    page: HubPage,
    quota: int | None,
    served: ServedFacts,
    clock: Callable[[], datetime.datetime],
) -> _PassState:
    """Index one listed page into one chunk; the returned state is the checkpoint to report."""
    position = state.position
    queries = spec.query_count
    source_filter = spec.catalog_filter
    candidates, rejected = _admitted(page.models, seen=state.seen, source_filter=source_filter)
    if quota is not None and not source_filter.filters_parameters:
        # Without a parameter filter every candidate is kept, so configs past the quota are waste.
        candidates = candidates[:quota]
    authenticated = spec.token is not None
    keys = {
        model.id: reuse_key(model, endpoint=spec.endpoint, authenticated=authenticated)
        for model, _ in candidates
    }
    reused = {
        model.id: facts
        for model, _ in candidates
        if (facts := served.resources(model.id, keys[model.id])) is not None
    }
    # Only models whose commit or listing changed since the served generation cost requests.
    fetch = [model for model, _ in candidates if model.id not in reused]
    configs = hub.fetch_configs(
        [model for model in fetch if wants_config(model, authenticated=authenticated)]
    )
    # A size for every entry the Hub can size: one file-list request per model the listing leaves unsized.
    sizes = hub.fetch_sizes([model for model in fetch if wants_size(model, authenticated=authenticated)])
    records, out_of_range = _page_records(
        spec, candidates, reused=reused, configs=configs, sizes=sizes, quota=quota, indexed_at=clock()
    )
    rejected += out_of_range
    if records:
        _write_chunk(store, spec, state, records, keys=keys)
    written = state.written + len(records)
    logger.debug(
        "catalog page indexed",
        extra={
            "source": spec.name,
            "generation": state.generation,
            "query": position.query,
            "listed": len(page.models),
            "rejected": rejected,
            "reused": len(reused),
            "kept": len(records),
            "configs": len(configs),
            "models": written,
        },
    )
    return dataclasses.replace(
        state,
        position=_advance(spec, position=position, page=page, written=written, queries=queries),
        written=written,
        seen=state.seen.union(record.id for record in records),
    )


def _admitted(
    models: Sequence[HubModel], *, seen: set[str], source_filter: CatalogFilter
) -> tuple[list[tuple[HubModel, ProviderMetadata]], int]:
    """The page's models not yet written that pass every listing filter of the source, each with
    its provider metadata, and how many the filters refused."""
    fresh: dict[str, tuple[HubModel, ProviderMetadata]] = {}
    rejected = 0
    for model in models:
        if model.id in seen or model.id in fresh:
            continue
        metadata = listing_metadata(model)
        if source_filter.listing_rejection(model.id, metadata) is not None:
            rejected += 1
            continue
        fresh[model.id] = (model, metadata)
    return list(fresh.values()), rejected


def _quota(spec: SourceSpec, *, position: PassPosition, written: int, queries: int) -> int | None:
    """How many more models the current query may add; None without maxModels.

    With several queries each gets an equal share of what was left when it began, so the first of
    two broad listings cannot take the whole `maxModels`; a query that lists fewer leaves the
    rest to the ones after it.
    """
    if not spec.max_models:
        return None
    share = math.ceil((spec.max_models - position.start) / (queries - position.query))
    return max(0, min(spec.max_models - written, share - (written - position.start)))


def _advance(
    spec: SourceSpec, *, position: PassPosition, page: HubPage, written: int, queries: int
) -> PassPosition:
    if spec.max_models and written >= spec.max_models:
        return PassPosition.finished(queries=queries, written=written)
    after = dataclasses.replace(position, hub_cursor=page.next_cursor)
    if page.next_cursor is None or _quota(spec, position=after, written=written, queries=queries) == 0:
        return position.next_query(written=written)
    return position.next_page(page.next_cursor)


def _finish(
    *,
    spec: SourceSpec,
    store: ObjectStore,
    state: _PassState,
    clock: Callable[[], datetime.datetime],
) -> PassResult:
    manifest = serve_generation(store, spec.name, state.generation, models=len(state.seen), clock=clock)
    return PassResult(
        generation=state.generation, models=manifest.models, chunks=len(manifest.chunks), manifest=manifest
    )
