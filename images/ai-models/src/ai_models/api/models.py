"""The catalog-import API's shapes as pydantic models, checked against the contract by the tests,
and the problem shape every API of the api process answers errors with.

`openapi/catalog-import.yaml` is the source of truth; `tests/api/test_contract.py` compares every
schema there with these models' JSON schemas both ways (properties, types, formats, enums,
bounds, required), so a change on either side without the other fails. The other APIs' shapes
live in `upload.models`, `models_serving` and `models_lookup`, checked the same way.

An entry's `metadata` and `resources` are the stored record's own models (the record is the entry
minus `downloadVerdict`), so the contract also pins what the indexer stores.
"""

from __future__ import annotations

import datetime
import enum
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from ai_models.domain.catalog.record import ProviderMetadata, ResourceFacts
from ai_models.domain.storage.ledger import Scope
from ai_models.domain.storage.verdict import Verdict, VerdictReason
from ai_models.names import CATALOG_IMPORT_API_PREFIX, CatalogProvider

API_PREFIX: Final = CATALOG_IMPORT_API_PREFIX
SEARCH_PATH: Final = f"{API_PREFIX}/models"
SOURCES_PATH: Final = f"{API_PREFIX}/sources"
# `{id}` takes the rest of the path, so ids keep their `/` (`org/name`).
ENTRY_PATH: Final = f"{API_PREFIX}/sources/{{source}}/models/{{id}}"
STORAGE_SUMMARY_PATH: Final = f"{API_PREFIX}/storage-summary"
CONTRACT_PATH: Final = f"{API_PREFIX}/openapi.json"
# Where the catalog's contract was first served; kept so existing clients keep working (D146).
LEGACY_CONTRACT_PATH: Final = "/openapi.json"
HEALTH_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"

SOURCE_NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
MODEL_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$"
PAGE_TOKEN_PATTERN: Final = r"^[A-Za-z0-9_-]+$"
# SQLite integers are 64-bit; a larger bound would overflow before the query runs.
INT64_MAX: Final = 2**63 - 1
DEFAULT_PAGE_SIZE: Final = 50
MAX_PAGE_SIZE: Final = 500


class SearchSort(enum.StrEnum):
    """What search results are ordered by, largest or newest first."""

    DOWNLOADS = "Downloads"
    LIKES = "Likes"
    LAST_MODIFIED = "LastModified"
    CREATED_AT = "CreatedAt"
    PARAMETER_COUNT = "ParameterCount"
    WEIGHTS_BYTES = "WeightsBytes"


class ProblemType(enum.StrEnum):
    INVALID_PARAMETER = "urn:ai-models:problem:invalid-parameter"
    INVALID_PAGE_TOKEN = "urn:ai-models:problem:invalid-page-token"
    UNAUTHENTICATED = "urn:ai-models:problem:unauthenticated"
    FORBIDDEN = "urn:ai-models:problem:forbidden"
    NOT_FOUND = "urn:ai-models:problem:not-found"
    METHOD_NOT_ALLOWED = "urn:ai-models:problem:method-not-allowed"
    KUBERNETES_ERROR = "urn:ai-models:problem:kubernetes-error"
    KUBERNETES_UNAVAILABLE = "urn:ai-models:problem:kubernetes-unavailable"
    NOT_READY = "urn:ai-models:problem:not-ready"
    INTERNAL_ERROR = "urn:ai-models:problem:internal-error"
    UPLOAD_TOKEN_INVALID = "urn:ai-models:problem:upload-token-invalid"
    UPLOAD_TOKEN_EXPIRED = "urn:ai-models:problem:upload-token-expired"
    OBJECT_GONE = "urn:ai-models:problem:object-gone"
    WRONG_PHASE = "urn:ai-models:problem:wrong-phase"
    UPLOAD_CONFLICT = "urn:ai-models:problem:upload-conflict"
    LENGTH_REQUIRED = "urn:ai-models:problem:length-required"
    UNSUPPORTED_PAYLOAD = "urn:ai-models:problem:unsupported-payload"
    INSUFFICIENT_STORAGE = "urn:ai-models:problem:insufficient-storage"
    STORAGE_USAGE_UNKNOWN = "urn:ai-models:problem:storage-usage-unknown"
    UPLOAD_INCOMPLETE = "urn:ai-models:problem:upload-incomplete"
    OBJECT_STORE_ERROR = "urn:ai-models:problem:object-store-error"
    RANGE_NOT_SATISFIABLE = "urn:ai-models:problem:range-not-satisfiable"
    TOO_MANY_DOWNLOADS = "urn:ai-models:problem:too-many-downloads"
    REPLICA_BUSY = "urn:ai-models:problem:replica-busy"
    REQUEST_TIMEOUT = "urn:ai-models:problem:request-timeout"


class Shape(BaseModel):
    """A response shape: closed like the contract's `additionalProperties: false`."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class DownloadVerdictView(Shape):
    verdict: Verdict
    reason: VerdictReason
    required_bytes: int | None = Field(default=None, alias="requiredBytes", ge=0)


class Entry(Shape):
    source: str
    id: str
    provider: CatalogProvider
    metadata: ProviderMetadata
    resources: ResourceFacts
    download_verdict: DownloadVerdictView = Field(alias="downloadVerdict")
    indexed_at: datetime.datetime = Field(alias="indexedAt")


class SearchPage(Shape):
    items: list[Entry]
    next_page_token: str | None = Field(default=None, alias="nextPageToken")


class Source(Shape):
    name: str
    provider: CatalogProvider | None = None
    generation: str
    models: int = Field(ge=0)
    completed_at: datetime.datetime = Field(alias="completedAt")


class SourceList(Shape):
    items: list[Source]


class ScopeUsageView(Shape):
    scope: Scope
    used_bytes: int = Field(alias="usedBytes", ge=0)
    reserved_bytes: int = Field(alias="reservedBytes", ge=0)
    artifacts: int = Field(ge=0)


class StorageSummary(Shape):
    """Unknown numbers are None here and left out of the JSON (`exclude_none`), never 0."""

    capacity_known: bool = Field(alias="capacityKnown")
    usage_known: bool = Field(alias="usageKnown")
    capacity_bytes: int | None = Field(default=None, alias="capacityBytes", ge=0)
    used_bytes: int | None = Field(default=None, alias="usedBytes", ge=0)
    reserved_bytes: int | None = Field(default=None, alias="reservedBytes", ge=0)
    available_bytes: int | None = Field(default=None, alias="availableBytes", ge=0)
    scopes: list[ScopeUsageView] | None = None
    snapshot_at: datetime.datetime = Field(alias="snapshotAt")


class Problem(Shape):
    type: ProblemType
    title: str
    status: int = Field(ge=400, le=599)
    detail: str


class HealthStatus(enum.StrEnum):
    ALIVE = "Alive"


class ReadinessStatus(enum.StrEnum):
    READY = "Ready"


class Health(Shape):
    status: HealthStatus


class Readiness(Shape):
    status: ReadinessStatus
    first_index_pass_complete: bool = Field(alias="firstIndexPassComplete")
    sources: int = Field(ge=0)


class SearchQuery(BaseModel):
    """The search operation's query parameters.

    Unknown parameters are refused: a misspelt filter (`pipeline_tag`) must not silently widen
    the result to the whole catalog.
    """

    # Aliases only: `pipeline_tag=` is not the contract's spelling and must be refused.
    model_config = ConfigDict(extra="forbid", frozen=True)

    q: str | None = Field(default=None, max_length=200)
    source: str | None = Field(default=None, min_length=1, max_length=253, pattern=SOURCE_NAME_PATTERN)
    pipeline_tag: str | None = Field(default=None, alias="pipelineTag", min_length=1, max_length=200)
    library: str | None = Field(default=None, min_length=1, max_length=200)
    author: str | None = Field(default=None, min_length=1, max_length=200)
    min_parameters: int | None = Field(default=None, alias="minParameters", ge=0, le=INT64_MAX)
    max_parameters: int | None = Field(default=None, alias="maxParameters", ge=0, le=INT64_MAX)
    max_weights_bytes: int | None = Field(default=None, alias="maxWeightsBytes", ge=0, le=INT64_MAX)
    verdict: Verdict | None = None
    sort: SearchSort = SearchSort.DOWNLOADS
    page_size: int = Field(default=DEFAULT_PAGE_SIZE, alias="pageSize", ge=1, le=MAX_PAGE_SIZE)
    page_token: str | None = Field(
        default=None, alias="pageToken", min_length=1, max_length=2048, pattern=PAGE_TOKEN_PATTERN
    )


class EntryLocator(BaseModel):
    """The entry operation's path parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(min_length=1, max_length=253, pattern=SOURCE_NAME_PATTERN)
    id: str = Field(min_length=1, max_length=256, pattern=MODEL_ID_PATTERN)
