"""Every externally visible name of the module, defined once (ARCHITECTURE.md is the contract).

Code, tests and documentation tests import these constants instead of repeating the strings.
"""

from __future__ import annotations

import enum
from typing import Final

MODULE: Final = "ai-models"
MODULE_NAMESPACE: Final = "d8-ai-models"
API_GROUP: Final = "ai.deckhouse.io"
API_VERSION: Final = "v1alpha1"

# Annotations on ModelCatalogSource.
CATALOG_SYNC_ANNOTATION: Final = "ai.deckhouse.io/catalog-sync"
CATALOG_SYNC_ENABLED: Final = "Enabled"
CATALOG_SYNC_REQUESTED_AT_ANNOTATION: Final = "ai.deckhouse.io/catalog-sync-requested-at"

# Virtual cluster-scoped resource the catalog API authorizes against.
CATALOG_IMPORTS_RESOURCE: Final = "catalogimports"


class Plural(enum.StrEnum):
    MODELS = "models"
    CLUSTER_MODELS = "clustermodels"
    MODEL_CATALOG_SOURCES = "modelcatalogsources"


class CatalogProvider(enum.StrEnum):
    HUGGING_FACE = "HuggingFace"


class CatalogSort(enum.StrEnum):
    DOWNLOADS = "Downloads"
    LIKES = "Likes"
    LAST_MODIFIED = "LastModified"
    CREATED_AT = "CreatedAt"
    TRENDING_SCORE = "TrendingScore"


class CatalogConditionType(enum.StrEnum):
    READY = "Ready"
    INDEXING = "Indexing"


class CatalogSourceReason(enum.StrEnum):
    """Condition reasons of a ModelCatalogSource set by the controller (provider failures add the
    reasons of `adapters.hub.errors.ProviderErrorReason`)."""

    CATALOG_SERVED = "CatalogServed"
    WAITING_FOR_OPT_IN = "WaitingForOptIn"
    NOT_INDEXED_YET = "NotIndexedYet"
    INDEXING = "Indexing"
    SUCCEEDED = "Succeeded"
    TOKEN_SECRET_NOT_FOUND = "TokenSecretNotFound"
    OBJECT_STORE_UNAVAILABLE = "ObjectStoreUnavailable"
    INVALID_SPEC = "InvalidSpec"


class CatalogSourceEvent(enum.StrEnum):
    INDEXING_STARTED = "IndexingStarted"
    INDEXING_RESUMED = "IndexingResumed"
    INDEXING_SUCCEEDED = "IndexingSucceeded"
    INDEXING_FAILED = "IndexingFailed"
