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


# ----- Model and ClusterModel ---------------------------------------------------------------------

MODEL_FINALIZER: Final = "ai.deckhouse.io/model-cleanup"
# Labels on the publication Jobs (and their token Secrets) the controller creates in the module
# namespace: which object they publish for, so an event on a Job maps back to its owner.
PUBLICATION_COMPONENT: Final = "publication"
OWNER_KIND_LABEL: Final = "ai.deckhouse.io/owner-kind"
OWNER_NAMESPACE_LABEL: Final = "ai.deckhouse.io/owner-namespace"
OWNER_NAME_LABEL: Final = "ai.deckhouse.io/owner-name"
OWNER_UID_LABEL: Final = "ai.deckhouse.io/owner-uid"
# An object name may have 253 characters, a label value 63: the owner-name label holds the name
# when it fits and a derived value (its first characters and a hash) when not; this annotation,
# on the same Jobs and Secrets, always holds the whole name.
OWNER_NAME_ANNOTATION: Final = "ai.deckhouse.io/owner-name"
COMPONENT_LABEL: Final = "app.kubernetes.io/component"
UPLOAD_SIGNING_SECRET: Final = "ai-models-upload-signing"
UPLOAD_SIGNING_KEY: Final = "key"
ARTIFACTS_CREDENTIALS_SECRET: Final = "ai-models-artifacts-credentials"
# Where the api takes uploads: the controller builds `status.upload` URLs from it.
UPLOAD_API_PREFIX: Final = "/api/upload/v1"
UPLOADS_PATH: Final = f"{UPLOAD_API_PREFIX}/uploads/"
# Who writes the controller's Events (source.component and reportingComponent), and where Events
# about cluster-scoped objects go: `kubectl describe` finds them in `default`.
EVENTS_COMPONENT: Final = "ai-models-controller"
CLUSTER_EVENTS_NAMESPACE: Final = "default"
# The Service of the api in the module namespace (serving, upload and internal lookup).
API_SERVICE: Final = "ai-models-api"
# Workload delivery contract: where each model appears in containers.
MODELS_DIR: Final = "/data/modelcache/models"


class ModelKind(enum.StrEnum):
    MODEL = "Model"
    CLUSTER_MODEL = "ClusterModel"

    @property
    def plural(self) -> Plural:
        return Plural.MODELS if self is ModelKind.MODEL else Plural.CLUSTER_MODELS


class ModelPhase(enum.StrEnum):
    PENDING = "Pending"
    WAIT_FOR_UPLOAD = "WaitForUpload"
    PUBLISHING = "Publishing"
    READY = "Ready"
    FAILED = "Failed"
    DELETING = "Deleting"


class ModelConditionType(enum.StrEnum):
    ARTIFACT_RESOLVED = "ArtifactResolved"
    METADATA_RESOLVED = "MetadataResolved"
    READY = "Ready"


class ModelReason(enum.StrEnum):
    """Condition reasons of Model and ClusterModel (ARCHITECTURE.md section 4); each is set somewhere."""

    PENDING = "Pending"
    WAITING_FOR_USER_UPLOAD = "WaitingForUserUpload"
    PUBLISHING = "Publishing"
    ARTIFACT_PUBLISHED = "ArtifactPublished"
    PUBLICATION_FAILED = "PublicationFailed"
    INSUFFICIENT_STORAGE = "InsufficientStorage"
    STORAGE_USAGE_UNKNOWN = "StorageUsageUnknown"
    UNSUPPORTED_SOURCE = "UnsupportedSource"
    SOURCE_NOT_FOUND = "SourceNotFound"
    CATALOG_ENTRY_NOT_FOUND = "CatalogEntryNotFound"
    ARTIFACT_DAMAGED = "ArtifactDamaged"
    MODEL_METADATA_CALCULATED = "ModelMetadataCalculated"
    MODEL_METADATA_PARTIAL = "ModelMetadataPartial"
    READY = "Ready"
    FAILED = "Failed"


class ModelEvent(enum.StrEnum):
    """Reasons of the Kubernetes Events recorded on a Model or ClusterModel."""

    UPLOAD_WAITING = "UploadWaiting"
    PUBLICATION_STARTED = "PublicationStarted"
    PUBLICATION_SUCCEEDED = "PublicationSucceeded"
    PUBLICATION_FAILED = "PublicationFailed"
    ARTIFACT_DAMAGED = "ArtifactDamaged"
    CLEANUP_FAILED = "CleanupFailed"


class SourceType(enum.StrEnum):
    """`status.source.resolvedType`."""

    HUGGING_FACE = "HuggingFace"
    UPLOAD = "Upload"
    CATALOG = "Catalog"


# ----- Storage inventory: removal of what no object owns (monitoring contract) -------------------

# Counters (exported with `_total`): what inventory passes removed, each removal also logged.
INVENTORY_REMOVED_ARTIFACTS_METRIC: Final = "d8_ai_models_storage_inventory_removed_artifacts"
INVENTORY_REMOVED_BYTES_METRIC: Final = "d8_ai_models_storage_inventory_removed_bytes"
# Gauges of the last pass: what waits for its grace period or is held back, and whether it was.
INVENTORY_ORPHANED_ARTIFACTS_METRIC: Final = "d8_ai_models_storage_inventory_orphaned_artifacts"
INVENTORY_ORPHANED_BYTES_METRIC: Final = "d8_ai_models_storage_inventory_orphaned_bytes"
INVENTORY_REMOVAL_BLOCKED_METRIC: Final = "d8_ai_models_storage_inventory_removal_blocked"
INVENTORY_REMOVAL_BLOCKED_ALERT: Final = "D8AIModelsStorageMassRemovalBlocked"
