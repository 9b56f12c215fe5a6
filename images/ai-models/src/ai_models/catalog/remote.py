"""One indexing pass of an `AIModels` source: another ai-models cluster's Ready ClusterModels, read
page by page from its serving API, written as the same generation layout a Hugging Face pass
writes (catalog.generations), so search, entries and verdicts work the same way.

An entry's id is the ClusterModel's name. Its resources are the remote's `status.resolved` facts
(`resources`, completed by the profile's own format, architecture, family, parameter count,
quantization and context window), and `weightsBytes` is the remote artifact's size: a Model made
from the entry copies exactly that artifact, so the size the entry shows is what its publication
reserves. `metadata.sha` is the remote artifact's digest (the entry's revision: a ClusterModel
published again there is a changed entry here), and the profile's endpoint types and features are
its tags.

Each page becomes one chunk named by the offset of its first record, and the checkpoint (the
remote's page token, which does not expire) is reported only after the chunk is written, so a
restart resumes at the same offset and nothing is duplicated or lost.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from pydantic import BaseModel, ValidationError

from ai_models.adapters.objectstore import ObjectStore
from ai_models.adapters.serving.listing import RemoteClusterModel, RemotePage
from ai_models.catalog.generations import resumable_ids, serve_generation, write_chunk
from ai_models.catalog.indexing import Checkpoint, PassResult
from ai_models.catalog.layout import new_generation
from ai_models.catalog.source import DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE
from ai_models.domain.catalog.record import CatalogRecord, ProviderMetadata, ResourceFacts
from ai_models.names import CatalogProvider

logger = logging.getLogger(__name__)

# Checkpoint cursors of this pass; a Hugging Face cursor (or anything else) never resumes one.
CURSOR_PREFIX: Final = "aimodels:"
FIRST_PAGE: Final = f"{CURSOR_PREFIX}first"
LAST_PAGE: Final = f"{CURSOR_PREFIX}end"
PAGE_AFTER: Final = f"{CURSOR_PREFIX}after:"
MAX_PAGE_SIZE: Final = 500  # the serving listing's bound
# status.resolved facts that complete `resources` when it lacks them.
_PROFILE_FACTS: Final = {
    "format": "format",
    "architecture": "architecture",
    "family": "family",
    "parameterCount": "parameterCount",
    "quantization": "quantization",
    "contextWindowTokens": "contextLength",
}
# What the profile's endpoint types say in the Hub's pipeline-tag words, so `pipelineTag` search
# finds entries of both providers; only the unambiguous ones.
_PIPELINE_TAGS: Final = (
    ("TextGeneration", "text-generation"),
    ("Chat", "text-generation"),
    ("Embeddings", "feature-extraction"),
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RemoteSourceSpec:
    name: str
    endpoint: str  # spec.aiModels.endpoint
    token: str = dataclasses.field(repr=False)
    ca_bundle: str | None = dataclasses.field(default=None, repr=False)
    chunk_size: int = DEFAULT_CHUNK_SIZE

    def __post_init__(self) -> None:
        if not 1 <= self.chunk_size <= MAX_CHUNK_SIZE:
            raise ValueError(f"chunkSize must be between 1 and {MAX_CHUNK_SIZE}, got {self.chunk_size}")
        if not self.endpoint.startswith(("https://", "http://")):
            raise ValueError(f"spec.aiModels.endpoint must be an http or https URL, got {self.endpoint!r}")

    @classmethod
    def from_resource(cls, obj: Mapping[str, Any], *, token: str) -> RemoteSourceSpec:
        spec = obj.get("spec") or {}
        remote = spec.get("aiModels") or {}
        chunk = spec.get("chunkSize")
        return cls(
            name=str(obj["metadata"]["name"]),
            endpoint=str(remote.get("endpoint") or "").rstrip("/"),
            token=token,
            ca_bundle=str(remote["caBundle"]) if remote.get("caBundle") else None,
            chunk_size=DEFAULT_CHUNK_SIZE if chunk is None else int(str(chunk)),
        )

    @property
    def page_size(self) -> int:
        """ClusterModels asked per page: one page is one chunk, within the listing's bound."""
        return min(self.chunk_size, MAX_PAGE_SIZE)


class RemoteListing(Protocol):
    """What the pass needs from the other cluster; `ServingListingClient` is the HTTP one."""

    def list_page(self, page_token: str | None, page_size: int) -> RemotePage: ...


def _known(model: type[BaseModel], values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` without the keys `model` does not know: a newer remote may serve more facts."""
    names = {field.alias or name for name, field in model.model_fields.items()}
    return {key: value for key, value in values.items() if key in names}


def remote_facts(item: RemoteClusterModel) -> ResourceFacts:
    """The entry's resources from the remote profile; a fact that does not read is absent."""
    profile = item.resolved
    raw = profile.get("resources")
    values = _known(ResourceFacts, raw) if isinstance(raw, Mapping) else {}
    for profile_key, fact_key in _PROFILE_FACTS.items():
        if values.get(fact_key) is None and profile.get(profile_key) is not None:
            values[fact_key] = profile[profile_key]
    values["weightsBytes"] = item.size_bytes
    try:
        return ResourceFacts.model_validate(values)
    except ValidationError as error:
        bad = {str(problem["loc"][0]) for problem in error.errors() if problem["loc"]}
        logger.info(
            "facts of a remote ClusterModel that do not read are left out",
            extra={"clustermodel": item.name, "facts": sorted(bad)},
        )
        return ResourceFacts.model_validate({k: v for k, v in values.items() if k not in bad})


def _strings(values: object) -> tuple[str, ...]:
    if not isinstance(values, list):
        return ()
    return tuple(str(value) for value in values if isinstance(value, str) and value)


def build_remote_record(
    *, source: str, item: RemoteClusterModel, indexed_at: datetime.datetime
) -> CatalogRecord:
    endpoint_types = _strings(item.resolved.get("supportedEndpointTypes"))
    features = _strings(item.resolved.get("supportedFeatures"))
    pipeline_tag = next((tag for kind, tag in _PIPELINE_TAGS if kind in endpoint_types), None)
    return CatalogRecord(
        source=source,
        id=item.name,
        provider=CatalogProvider.AI_MODELS,
        metadata=ProviderMetadata(
            sha=item.digest,
            pipelineTag=pipeline_tag,
            tags=tuple(dict.fromkeys((*endpoint_types, *features))),
        ),
        resources=remote_facts(item),
        indexedAt=indexed_at,
    )


@dataclasses.dataclass
class _State:
    generation: str
    cursor: str
    written: int
    seen: set[str]

    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self.generation, self.cursor, self.written)


def run_remote_pass(
    *,
    spec: RemoteSourceSpec,
    listing: RemoteListing,
    store: ObjectStore,
    resume: Checkpoint | None,
    on_checkpoint: Callable[[Checkpoint], None],
    clock: Callable[[], datetime.datetime],
    should_stop: Callable[[], bool] = lambda: False,
) -> PassResult | None:
    """Index the remote cluster's Ready ClusterModels into a generation and serve it; None when
    `should_stop` ended the pass early (the last checkpoint stays valid, the old generation served).
    Provider and store errors propagate; whatever was checkpointed stays usable for `resume`."""
    state = _begin(spec=spec, store=store, resume=resume, clock=clock)
    while state.cursor != LAST_PAGE:
        if should_stop():
            logger.info(
                "catalog pass stopped before its next page",
                extra={"source": spec.name, "generation": state.generation, "models": state.written},
            )
            return None
        token = state.cursor.removeprefix(PAGE_AFTER) if state.cursor.startswith(PAGE_AFTER) else None
        page = listing.list_page(token, spec.page_size)
        indexed_at = clock()
        records: list[CatalogRecord] = []
        for item in page.items:
            if item.name in state.seen or any(record.id == item.name for record in records):
                continue  # a remote that repeats itself: stored once
            records.append(build_remote_record(source=spec.name, item=item, indexed_at=indexed_at))
        write_chunk(store, spec.name, state.generation, state.written, records)
        state = _State(
            generation=state.generation,
            cursor=f"{PAGE_AFTER}{page.next_page_token}" if page.next_page_token else LAST_PAGE,
            written=state.written + len(records),
            seen=state.seen.union(record.id for record in records),
        )
        logger.debug(
            "remote catalog page indexed",
            extra={
                "source": spec.name,
                "generation": state.generation,
                "listed": len(page.items),
                "skipped": page.skipped,
                "kept": len(records),
                "models": state.written,
            },
        )
        on_checkpoint(state.checkpoint())
    manifest = serve_generation(store, spec.name, state.generation, models=len(state.seen), clock=clock)
    return PassResult(
        generation=state.generation, models=manifest.models, chunks=len(manifest.chunks), manifest=manifest
    )


def _begin(
    *,
    spec: RemoteSourceSpec,
    store: ObjectStore,
    resume: Checkpoint | None,
    clock: Callable[[], datetime.datetime],
) -> _State:
    if resume is not None and (resume.cursor or "").startswith(CURSOR_PREFIX):
        seen = resumable_ids(store, spec.name, resume.generation, resume.processed_models)
        if seen is not None:
            logger.info(
                "catalog pass resumes from its checkpoint",
                extra={"source": spec.name, "generation": resume.generation, "models": len(seen)},
            )
            return _State(
                generation=resume.generation, cursor=str(resume.cursor), written=len(seen), seen=seen
            )
    elif resume is not None:
        logger.warning(
            "checkpoint is not one of an AIModels pass, starting a fresh pass",
            extra={"source": spec.name, "generation": resume.generation},
        )
    generation = new_generation(clock())
    logger.info("catalog pass starts a new generation", extra={"source": spec.name, "generation": generation})
    return _State(generation=generation, cursor=FIRST_PAGE, written=0, seen=set())
