"""A catalog record: one model of one source, as the indexer stores it and the catalog API serves it.

The catalog API adds `downloadVerdict` when serving (it depends on the storage ledger at that
moment, so it is never stored). Field names are the entry shape of docs/internal/ARCHITECTURE.md §5.
"""

from __future__ import annotations

import datetime
import enum

from pydantic import BaseModel, ConfigDict, Field


class Gated(enum.StrEnum):
    NONE = "None"
    AUTO = "Auto"
    MANUAL = "Manual"


class WeightsFormat(enum.StrEnum):
    SAFETENSORS = "Safetensors"
    GGUF = "GGUF"
    DIFFUSERS = "Diffusers"


class AttentionKind(enum.StrEnum):
    MHA = "MHA"
    GQA = "GQA"
    MQA = "MQA"
    MLA = "MLA"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ProviderMetadata(_Model):
    """What the provider says about the model; absent when the provider does not say."""

    author: str | None = None
    sha: str | None = None
    pipeline_tag: str | None = Field(default=None, alias="pipelineTag")
    library_name: str | None = Field(default=None, alias="libraryName")
    tags: tuple[str, ...] = ()
    license: str | None = None
    gated: Gated = Gated.NONE
    downloads: int | None = Field(default=None, ge=0)
    likes: int | None = Field(default=None, ge=0)
    created_at: datetime.datetime | None = Field(default=None, alias="createdAt")
    last_modified: datetime.datetime | None = Field(default=None, alias="lastModified")


class ResourceFacts(_Model):
    """Facts for sizing inference resources. A fact that cannot be derived is None, never guessed."""

    format: WeightsFormat | None = None
    architecture: str | None = None
    family: str | None = None
    parameter_count: int | None = Field(default=None, alias="parameterCount", ge=0)
    dtype: str | None = None
    quantization: str | None = None
    context_length: int | None = Field(default=None, alias="contextLength", ge=0)
    weights_bytes: int | None = Field(default=None, alias="weightsBytes", ge=0)
    attention: AttentionKind | None = None
    layers: int | None = Field(default=None, ge=0)
    kv_heads: int | None = Field(default=None, alias="kvHeads", ge=0)
    head_dim: int | None = Field(default=None, alias="headDim", ge=0)
    kv_cache_bytes_per_token: int | None = Field(default=None, alias="kvCacheBytesPerToken", ge=0)
    experts: int | None = Field(default=None, ge=0)
    active_experts: int | None = Field(default=None, alias="activeExperts", ge=0)


class CatalogRecord(_Model):
    """One indexed model. Keyed by (source, id): two sources never share a record."""

    source: str
    id: str
    provider: str
    metadata: ProviderMetadata
    resources: ResourceFacts
    indexed_at: datetime.datetime = Field(alias="indexedAt")

    def to_json(self) -> str:
        """The stored form: camelCase keys, absent facts left out (never written as null or 0)."""
        return self.model_dump_json(by_alias=True, exclude_none=True)
