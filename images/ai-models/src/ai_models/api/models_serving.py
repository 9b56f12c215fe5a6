"""The serving API's shapes (contract: `openapi/serving.yaml`), checked against it by the tests.

The manifest is served as the publisher's `manifest_to_json` writes it (a manifest stored by an
older publisher is served in today's form); `ArtifactManifestView` pins that form, so the contract
describes the bytes clients receive.
"""

from __future__ import annotations

import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from ai_models.api.models import Shape
from ai_models.api.models_lookup import ResolvedProfile
from ai_models.names import SERVING_API_PREFIX, ModelKind, SourceType

SERVING_PREFIX: Final = SERVING_API_PREFIX
MODEL_MANIFEST_PATH: Final = f"{SERVING_PREFIX}/models/{{namespace}}/{{name}}/manifest"
MODEL_FILE_PATH: Final = f"{SERVING_PREFIX}/models/{{namespace}}/{{name}}/files/{{path}}"
CLUSTER_MODEL_MANIFEST_PATH: Final = f"{SERVING_PREFIX}/clustermodels/{{name}}/manifest"
CLUSTER_MODEL_FILE_PATH: Final = f"{SERVING_PREFIX}/clustermodels/{{name}}/files/{{path}}"
SERVING_CONTRACT_PATH: Final = f"{SERVING_PREFIX}/openapi.json"
# The paged listing of Ready ClusterModels another cluster's `AIModels` catalog source reads.
CLUSTER_MODELS_PATH: Final = f"{SERVING_PREFIX}/clustermodels"
DEFAULT_LISTING_PAGE_SIZE: Final = 100
MAX_LISTING_PAGE_SIZE: Final = 500
LISTING_PAGE_TOKEN_PATTERN: Final = r"^[A-Za-z0-9_-]+$"
MAX_LISTING_PAGE_TOKEN: Final = 1024
DIGEST_PATTERN: Final = r"^sha256:[0-9a-f]{64}$"
NAMESPACE_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
OBJECT_NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
MAX_FILE_PATH: Final = 1024
# The paths the publisher writes (`sniff.safe_member_path`): relative, no dot or hidden segments.
FILE_PATH_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,199}(/[A-Za-z0-9][A-Za-z0-9._+-]{0,199})*$"
SHA256_HEX_PATTERN: Final = r"^[0-9a-f]{64}$"


class ArtifactOwnerView(Shape):
    kind: ModelKind
    namespace: str
    name: str
    uid: str


class ArtifactSourceView(Shape):
    type: SourceType
    repository: str | None = None
    revision: str | None = None
    endpoint: str | None = None
    upload_sha256: str | None = Field(default=None, alias="uploadSha256", pattern=SHA256_HEX_PATTERN)


class ArtifactFileView(Shape):
    path: str
    size: int = Field(ge=0)
    sha256: str = Field(pattern=SHA256_HEX_PATTERN)
    store_version: str | None = Field(default=None, alias="storeVersion")


class ArtifactManifestView(Shape):
    # `schema` is a BaseModel attribute; the alias keeps the stored key.
    layout: Literal[1] = Field(alias="schema")
    owner: ArtifactOwnerView
    digest: str = Field(pattern=DIGEST_PATTERN)
    source: ArtifactSourceView
    files: list[ArtifactFileView]
    size_bytes: int = Field(alias="sizeBytes", ge=0)
    resolved: dict[str, Any]
    published_at: datetime.datetime = Field(alias="publishedAt")


class ServedClusterModel(Shape):
    """One Ready ClusterModel as the listing serves it: what a catalog entry of another cluster needs."""

    name: str = Field(min_length=1, max_length=253, pattern=OBJECT_NAME_PATTERN)
    digest: str = Field(pattern=DIGEST_PATTERN)
    size_bytes: int = Field(alias="sizeBytes", ge=0)
    revision: str | None = None
    resolved: ResolvedProfile | None = None


class ClusterModelPage(Shape):
    items: list[ServedClusterModel]
    next_page_token: str | None = Field(default=None, alias="nextPageToken")


class ClusterModelListQuery(BaseModel):
    """The listing's query parameters; unknown ones are refused (a misspelt `page_size` must not
    silently give the default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    page_size: int = Field(
        default=DEFAULT_LISTING_PAGE_SIZE, alias="pageSize", ge=1, le=MAX_LISTING_PAGE_SIZE
    )
    page_token: str | None = Field(
        default=None,
        alias="pageToken",
        min_length=1,
        max_length=MAX_LISTING_PAGE_TOKEN,
        pattern=LISTING_PAGE_TOKEN_PATTERN,
    )


class _Locator(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelManifestLocator(_Locator):
    """Path parameters of a Model's manifest."""

    namespace: str = Field(min_length=1, max_length=63, pattern=NAMESPACE_PATTERN)
    name: str = Field(min_length=1, max_length=253, pattern=OBJECT_NAME_PATTERN)


class ModelFileLocator(ModelManifestLocator):
    """Path parameters of a Model's file."""

    path: str = Field(min_length=1, max_length=MAX_FILE_PATH, pattern=FILE_PATH_PATTERN)


class ClusterModelManifestLocator(_Locator):
    """Path parameters of a ClusterModel's manifest."""

    name: str = Field(min_length=1, max_length=253, pattern=OBJECT_NAME_PATTERN)


class ClusterModelFileLocator(ClusterModelManifestLocator):
    """Path parameters of a ClusterModel's file."""

    path: str = Field(min_length=1, max_length=MAX_FILE_PATH, pattern=FILE_PATH_PATTERN)
