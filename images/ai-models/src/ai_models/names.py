"""Every externally visible name of the module, defined once (docs/internal/ARCHITECTURE.md says
where each lives).

Code, tests and documentation tests import these constants instead of repeating the strings.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

MODULE: Final = "ai-models"
MODULE_NAMESPACE: Final = "d8-ai-models"
API_GROUP: Final = "ai.deckhouse.io"
API_VERSION: Final = "v1alpha1"

# Annotations on ModelCatalogSource.
CATALOG_SYNC_ANNOTATION: Final = "ai.deckhouse.io/catalog-sync"
CATALOG_SYNC_ENABLED: Final = "Enabled"
CATALOG_SYNC_REQUESTED_AT_ANNOTATION: Final = "ai.deckhouse.io/catalog-sync-requested-at"
# On a Model or ClusterModel: an RFC 3339 time newer than `status.lastFailureTime` retries a Failed
# object at once.
RETRY_REQUESTED_AT_ANNOTATION: Final = "ai.deckhouse.io/retry-requested-at"
# The controller's finalizer on every ModelCatalogSource (the one kopf wrote before issue 11, so
# sources created then are cleaned up too): removed once the source's index is gone.
CATALOG_FINALIZER: Final = "ai.deckhouse.io/catalog-controller"
# Prefix of the bookkeeping annotations kopf wrote on sources before issue 11; the controller
# removes them once from every source it sees.
KOPF_ANNOTATION_PREFIX: Final = "controller.ai.deckhouse.io/"

# Virtual cluster-scoped resource the catalog API authorizes against.
CATALOG_IMPORTS_RESOURCE: Final = "catalogimports"


class Plural(enum.StrEnum):
    MODELS = "models"
    CLUSTER_MODELS = "clustermodels"
    MODEL_CATALOG_SOURCES = "modelcatalogsources"


class CatalogProvider(enum.StrEnum):
    HUGGING_FACE = "HuggingFace"
    # Another ai-models cluster: its Ready ClusterModels, read through its serving API.
    AI_MODELS = "AIModels"


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
    INVALID_SYNC_REQUEST = "InvalidSyncRequest"


class CatalogSourceEvent(enum.StrEnum):
    INDEXING_STARTED = "IndexingStarted"
    INDEXING_RESUMED = "IndexingResumed"
    INDEXING_SUCCEEDED = "IndexingSucceeded"
    INDEXING_FAILED = "IndexingFailed"
    INVALID_SYNC_REQUEST = "InvalidSyncRequest"


class CatalogSourceStatus(enum.StrEnum):
    """Fields of a ModelCatalogSource's status the controller reads back for its decisions."""

    FAILED_PASSES = "failedPasses"
    RETRY_NOT_BEFORE = "retryNotBefore"


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
# The key delivery tokens (the materializers' credential for the serving API) are signed with: its
# own Secret, so neither key can mint the other's tokens and each rotates alone (D86).
DELIVERY_SIGNING_SECRET: Final = "ai-models-delivery-signing"
DELIVERY_SIGNING_KEY: Final = "key"
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
# On the top-level workload (Deployment, StatefulSet, DaemonSet, CronJob): the models it uses,
# comma-separated (Models of its namespace, ClusterModels), and the delivery report.
MODEL_ANNOTATION: Final = "ai.deckhouse.io/model"
CLUSTER_MODEL_ANNOTATION: Final = "ai.deckhouse.io/clustermodel"
DELIVERY_REASON_ANNOTATION: Final = "ai.deckhouse.io/model-delivery-reason"
DELIVERY_MESSAGE_ANNOTATION: Final = "ai.deckhouse.io/model-delivery-message"
# The pod scheduling gate that holds a workload's pods until its models are delivered.
DELIVERY_SCHEDULING_GATE: Final = "ai.deckhouse.io/model-delivery"
# On the pod template: what the module added to it (JSON), so removing the annotations removes
# exactly that and nothing the user wrote.
DELIVERY_APPLIED_ANNOTATION: Final = "ai.deckhouse.io/model-delivery-applied"
# On the top-level workload while its pod template carries what the module added (the record, the
# gate, the volumes): the controller and the admission webhook set it and take it off again, so the
# after-delete hook binds only these workloads (D158).
DELIVERY_TEMPLATE_LABEL: Final = "ai.deckhouse.io/model-delivery-template"
DELIVERY_TEMPLATE_LABEL_VALUE: Final = "true"
# In every container of a delivering workload.
MODELS_DIR_VARIABLE: Final = "AI_MODELS_MODELS_DIR"
MODELS_VARIABLE: Final = "AI_MODELS_MODELS"
# `ai-models catalog index` of an AIModels source: a token the other ai-models cluster accepts.
SERVING_TOKEN_VARIABLE: Final = "AI_MODELS_SERVING_TOKEN"
# SharedPVC: the pod volume of the shared claim, the claims' name prefix and component label, and
# the claim annotation recording the digests whose materialization completed on it.
SHARED_PVC_VOLUME: Final = "ai-models-shared"
SHARED_CLAIM_PREFIX: Final = "ai-models-"
DELIVERY_COMPONENT: Final = "model-delivery"
MATERIALIZED_DIGESTS_ANNOTATION: Final = "ai.deckhouse.io/materialized-digests"
# The component label of the materialize Jobs (named like the claim they fill, in the workload
# namespace) and of their token Secrets (`<claim>-token`, owned by the Job).
MATERIALIZATION_COMPONENT: Final = "materialization"
# NodeCache: the module's CSI driver (ephemeral inline volumes, one per model), the keys of a
# volume's attributes (written by the module, so a user may write them too: hints, never trust),
# the keys kubelet writes with `podInfoOnMount` (it overwrites pod-supplied ones), and the node
# plugin's readiness label and cache report on each Node it runs on.
NODE_CACHE_DRIVER: Final = "node-cache.ai-models.deckhouse.io"
NODE_CACHE_COMPONENT: Final = "node-cache"
VOLUME_MODEL_ATTRIBUTE: Final = MODEL_ANNOTATION
VOLUME_CLUSTER_MODEL_ATTRIBUTE: Final = CLUSTER_MODEL_ANNOTATION
VOLUME_DIGEST_ATTRIBUTE: Final = "ai.deckhouse.io/artifact-digest"
KUBELET_POD_NAME: Final = "csi.storage.k8s.io/pod.name"
KUBELET_POD_NAMESPACE: Final = "csi.storage.k8s.io/pod.namespace"
KUBELET_POD_UID: Final = "csi.storage.k8s.io/pod.uid"
KUBELET_EPHEMERAL: Final = "csi.storage.k8s.io/ephemeral"
KUBELET_SERVICE_ACCOUNT: Final = "csi.storage.k8s.io/serviceAccount.name"
NODE_CACHE_READY_LABEL: Final = "ai.deckhouse.io/node-cache-runtime-ready"
NODE_CACHE_REPORT_ANNOTATION: Final = "ai.deckhouse.io/node-cache-usage-summary"
# NodeCache: the pod volume of each model is this prefix and 10 hex of a hash of its kind and name.
NODE_CACHE_VOLUME_PREFIX: Final = "ai-models-cache-"


class DeliveryReason(enum.StrEnum):
    """The delivery report's reasons (docs/internal/ARCHITECTURE.md §4, delivery surface); the Events
    on the workload carry the same reasons."""

    DELIVERED = "Delivered"
    MODEL_NOT_READY = "ModelNotReady"
    INVALID_SPEC = "InvalidSpec"
    NODE_CACHE_DELIVERY_DISABLED = "NodeCacheDeliveryDisabled"
    INSUFFICIENT_NODE_CACHE_CAPACITY = "InsufficientNodeCacheCapacity"
    SHARED_PVC_STORAGE_CLASS_MISSING = "SharedPVCStorageClassMissing"
    SHARED_PVC_STORAGE_CLASS_WAIT_FOR_FIRST_CONSUMER = "SharedPVCStorageClassWaitForFirstConsumer"
    SHARED_PVC_CLAIM_PENDING = "SharedPVCClaimPending"
    SHARED_PVC_PROVISIONING_FAILED = "SharedPVCProvisioningFailed"
    SHARED_PVC_PROVISIONING_TIMED_OUT = "SharedPVCProvisioningTimedOut"
    SHARED_PVC_VOLUME_LOST = "SharedPVCVolumeLost"
    SHARED_PVC_MATERIALIZING = "SharedPVCMaterializing"
    SHARED_PVC_MATERIALIZATION_FAILED = "SharedPVCMaterializationFailed"


class DeliveryEvent(enum.StrEnum):
    """Reasons of the other Events the delivery records on a workload."""

    # A ReplicaSet of a Deployment's gated-only template, deleted once the complete one is available.
    STALE_REPLICA_SET_DELETED = "StaleReplicaSetDeleted"
    # A shared claim the workload no longer used, deleted after the grace period (D100).
    SHARED_CLAIM_DELETED = "SharedClaimDeleted"


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
    """Condition reasons of Model and ClusterModel (docs/internal/ARCHITECTURE.md §4); each is set
    somewhere."""

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


class ModelStatus(enum.StrEnum):
    """Fields of a Model's or ClusterModel's status the controller reads back for its decisions."""

    FAILED_ATTEMPTS = "failedAttempts"
    LAST_FAILURE_TIME = "lastFailureTime"
    LAST_FAILURE_DEPENDENCY = "lastFailureDependency"


class ModelEvent(enum.StrEnum):
    """Reasons of the Kubernetes Events recorded on a Model or ClusterModel."""

    UPLOAD_WAITING = "UploadWaiting"
    PUBLICATION_STARTED = "PublicationStarted"
    PUBLICATION_SUCCEEDED = "PublicationSucceeded"
    PUBLICATION_FAILED = "PublicationFailed"
    ARTIFACT_DAMAGED = "ArtifactDamaged"
    CLEANUP_FAILED = "CleanupFailed"
    INVALID_RETRY_REQUEST = "InvalidRetryRequest"


class SourceType(enum.StrEnum):
    """`status.source.resolvedType`; also the source type of a publication request and of an
    artifact manifest, where AIModels (another ai-models cluster's ClusterModel, read through its
    serving API) may appear too: a Model from such a source shows Catalog in its status."""

    HUGGING_FACE = "HuggingFace"
    UPLOAD = "Upload"
    CATALOG = "Catalog"
    AI_MODELS = "AIModels"


# ----- Storage inventory: removal of what no object owns (monitoring contract) -------------------

# Counters (exported with `_total`): what inventory passes removed, each removal also logged.
INVENTORY_REMOVED_ARTIFACTS_METRIC: Final = "d8_ai_models_storage_inventory_removed_artifacts"
INVENTORY_REMOVED_BYTES_METRIC: Final = "d8_ai_models_storage_inventory_removed_bytes"
# Gauges of the last pass: what waits for its grace period or is held back, and whether it was.
INVENTORY_ORPHANED_ARTIFACTS_METRIC: Final = "d8_ai_models_storage_inventory_orphaned_artifacts"
INVENTORY_ORPHANED_BYTES_METRIC: Final = "d8_ai_models_storage_inventory_orphaned_bytes"
INVENTORY_REMOVAL_BLOCKED_METRIC: Final = "d8_ai_models_storage_inventory_removal_blocked"
INVENTORY_REMOVAL_BLOCKED_ALERT: Final = "D8AIModelsStorageMassRemovalBlocked"


# ----- Processes, Jobs and hooks: names an operator sees in the module namespace ----------------

# Labels of every object the module creates itself (the chart's objects carry them too), and the
# namespace Deckhouse keeps the cluster-wide Secrets the hooks copy from.
MODULE_LABEL: Final = "module"
HERITAGE_LABEL: Final = "heritage"
HERITAGE: Final = "deckhouse"
DECKHOUSE_NAMESPACE: Final = "d8-system"
# The controller may write only Secrets that carry these (the chart's ValidatingAdmissionPolicy
# `ai-models-controller-secrets`, D161), so every object it creates carries them.
MODULE_OBJECT_LABELS: Final[Mapping[str, str]] = MappingProxyType(
    {MODULE_LABEL: MODULE, HERITAGE_LABEL: HERITAGE}
)

# Every `ai-models` process reads its settings from variables with this prefix; pydantic-settings
# derives the rest of each name from the settings field (`store_url` is AI_MODELS_STORE_URL), and
# `Settings.variable(field)` spells one for a message.
ENV_PREFIX: Final = "AI_MODELS_"
# The Lease the controller replicas elect their leader with.
CONTROLLER_LEASE: Final = "ai-models-controller"
# Internal base URL of the api Service, from which `status.upload.inCluster` is built.
API_IN_CLUSTER_URL: Final = f"http://{API_SERVICE}.{MODULE_NAMESPACE}.svc"
# The serving API as the node plugin and materializers reach it (D159): the api Service's internal
# TLS port, verified with the module CA; never the plain port.
API_INTERNAL_URL: Final = f"https://{API_SERVICE}.{MODULE_NAMESPACE}.svc"
# The audience of the node plugin's projected token (D159): the serving API on the internal
# listener accepts a Kubernetes token only when its TokenReview names this audience, so a token
# that crosses the network there is useless against the API server.
MODULE_TOKEN_AUDIENCE: Final = "ai-models.deckhouse.io"
# The module CA's certificate (only `tls.crt` of ROOT_CA_SECRET, never its key) for the pods that
# verify the api's internal listener: the node plugin mounts it, the controller copies it into each
# materialize Job's token Secret (under the same key).
MODULE_CA_CONFIGMAP: Final = "ai-models-ca"
MODULE_CA_KEY: Final = "ca.crt"
# Where the node plugin's pod has its module-audience token and the module CA (the chart mounts both).
NODE_CACHE_MODULE_TOKEN_FILE: Final = "/var/run/secrets/ai-models/token"
NODE_CACHE_MODULE_CA_FILE: Final = "/etc/ai-models/module-ca/ca.crt"
# The api's certificate (signed by the module CA) and the CA itself, rendered by the chart from
# `aiModels.internal.apiCert` / `rootCA` and read back by the internal_tls hook.
ROOT_CA_SECRET: Final = "ai-models-root-ca"
# The controller Service and the certificate of its admission webhook listener (every replica).
CONTROLLER_SERVICE: Final = "ai-models-controller"
CONTROLLER_TLS_SECRET: Final = "ai-models-controller-tls"
# The workload admission webhook (issue 12): the MutatingWebhookConfiguration the chart renders, the
# webhook's name in it, the path every controller replica serves it on, and the controller Service
# port that leads there (443 -> the container's `https-webhook`).
DELIVERY_WEBHOOK_CONFIGURATION: Final = "d8-ai-models-delivery"
DELIVERY_WEBHOOK_NAME: Final = "delivery.ai-models.deckhouse.io"
DELIVERY_WEBHOOK_PATH: Final = "/admission/workloads"
DELIVERY_WEBHOOK_PORT_NAME: Final = "https-webhook"
# The materializer pod template Helm renders for the controller (mounted into it), like the publisher's.
MATERIALIZER_TEMPLATE_CONFIGMAP: Final = "ai-models-materializer-template"
API_TLS_SECRET: Final = "ai-models-api-tls"
CA_COMMON_NAME: Final = "ai-models-ca"
# The copy of the object store's CA (setting artifacts.caSecretName), next to the credentials.
ARTIFACTS_CA_SECRET: Final = "ai-models-artifacts-ca"
# The publisher pod template Helm renders for the controller (mounted into it).
PUBLISHER_TEMPLATE_CONFIGMAP: Final = "ai-models-publisher-template"
# The storage ledger (docs/internal/ARCHITECTURE.md §6) and the labels of that Secret.
STORAGE_ACCOUNTING_SECRET: Final = "ai-models-storage-accounting"
STORAGE_ACCOUNTING_COMPONENT: Final = "storage-accounting"
NAME_LABEL: Final = "app.kubernetes.io/name"
# Shared claims of SharedPVC delivery: `SHARED_PVC_LABEL=SHARED_PVC_LABEL_VALUE`.
SHARED_PVC_LABEL: Final = "ai.deckhouse.io/shared-pvc"
SHARED_PVC_LABEL_VALUE: Final = "true"
# When a claim cleanup (a workload's reconcile, or the orphan pass) first found a shared claim
# unreferenced (RFC 3339); removed once it is referenced again. A claim is deleted only on a later
# pass, after the grace period.
SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION: Final = "ai.deckhouse.io/unreferenced-since"
# On a publication Job: the digest of the artifact it publishes.
ARTIFACT_DIGEST_ANNOTATION: Final = "ai.deckhouse.io/artifact-digest"
# Publication Jobs and their token Secrets are named from the owner's UID: `publish-<uid>` and
# `publish-<uid>-token`.
PUBLICATION_JOB_PREFIX: Final = "publish-"
PUBLICATION_TOKEN_SECRET_SUFFIX: Final = "-token"
# Every Secret the module keeps in its namespace is named `ai-models-*` (the chart's, the hooks' and
# the controller's own: signing keys, ledger, CA, certificates, artifact credentials, pull secret)
# or `publish-<uid>-token`; a ModelCatalogSource may name neither as its token (D160).
MODULE_SECRET_PREFIX: Final = "ai-models-"
# The controller's ServiceAccount (in MODULE_NAMESPACE) and the name of the Role and RoleBinding a
# namespace's admin creates to let it read one Secret (`ai-models-read-<secret>`, D160).
CONTROLLER_SERVICE_ACCOUNT: Final = "controller"
SECRET_READ_GRANT_PREFIX: Final = "ai-models-read-"

# Public, serving and internal HTTP APIs (docs/internal/ARCHITECTURE.md §5).
CATALOG_IMPORT_API_PREFIX: Final = "/api/catalog-import/v1"
SERVING_API_PREFIX: Final = "/api/serving/v1"
INTERNAL_API_PREFIX: Final = "/api/internal/v1"
MODELS_LOOKUP_PATH: Final = f"{INTERNAL_API_PREFIX}/models/lookup"


class PublishVariable(enum.StrEnum):
    """What the controller tells a publish Job (`domain.publication.request` writes and reads them)."""

    OWNER_KIND = "AI_MODELS_PUBLISH_OWNER_KIND"
    OWNER_NAMESPACE = "AI_MODELS_PUBLISH_OWNER_NAMESPACE"
    OWNER_NAME = "AI_MODELS_PUBLISH_OWNER_NAME"
    OWNER_UID = "AI_MODELS_PUBLISH_OWNER_UID"
    DIGEST = "AI_MODELS_PUBLISH_DIGEST"
    SOURCE_TYPE = "AI_MODELS_PUBLISH_SOURCE_TYPE"
    REPOSITORY = "AI_MODELS_PUBLISH_REPOSITORY"
    REVISION = "AI_MODELS_PUBLISH_REVISION"
    ENDPOINT = "AI_MODELS_PUBLISH_ENDPOINT"
    FILES = "AI_MODELS_PUBLISH_FILES"
    # AIModels only: the ClusterModel to copy from the serving API at ENDPOINT, and the PEM bundle
    # that API's certificate is checked with (absent: the system's CAs).
    CLUSTER_MODEL = "AI_MODELS_PUBLISH_CLUSTER_MODEL"
    CA_BUNDLE = "AI_MODELS_PUBLISH_CA_BUNDLE"
    TERMINATION_MESSAGE_PATH = "AI_MODELS_PUBLISH_TERMINATION_MESSAGE_PATH"
    REPORT_PROGRESS = "AI_MODELS_PUBLISH_REPORT_PROGRESS"
    # Only ever from the token Secret (secretKeyRef), never a plain value in the Job.
    TOKEN = "AI_MODELS_PUBLISH_TOKEN"


class MaterializeVariable(enum.StrEnum):
    """What the controller tells a materialize Job (`domain.delivery.materialization` writes and
    reads them)."""

    API_URL = "AI_MODELS_MATERIALIZE_API_URL"
    # The module CA's certificate (PEM), from the Job's token Secret (secretKeyRef, D159).
    CA_BUNDLE = "AI_MODELS_MATERIALIZE_CA_BUNDLE"
    TARGET_DIR = "AI_MODELS_MATERIALIZE_TARGET_DIR"
    ARTIFACTS = "AI_MODELS_MATERIALIZE_ARTIFACTS"
    TERMINATION_MESSAGE_PATH = "AI_MODELS_MATERIALIZE_TERMINATION_MESSAGE_PATH"
    # The delivery token: only ever from a Secret in the workload namespace (secretKeyRef).
    TOKEN = "AI_MODELS_MATERIALIZE_TOKEN"


# ----- Metrics (monitoring contract) --------------------------------------------------------------

CONTROLLER_LEADER_METRIC: Final = "d8_ai_models_controller_leader"
# The controller's own work, in the Kubernetes operator convention (controller/metrics.py):
# the `controller` label is a Controller's name; the counters end in _total when exported.
CONTROLLER_WORKQUEUE_DEPTH_METRIC: Final = "d8_ai_models_controller_workqueue_depth"
CONTROLLER_WORKQUEUE_ADDS_METRIC: Final = "d8_ai_models_controller_workqueue_adds"
CONTROLLER_WORKQUEUE_RETRIES_METRIC: Final = "d8_ai_models_controller_workqueue_retries"
CONTROLLER_RECONCILE_METRIC: Final = "d8_ai_models_controller_reconcile"
CONTROLLER_RECONCILE_DURATION_METRIC: Final = "d8_ai_models_controller_reconcile_duration_seconds"
CONTROLLER_ADMISSION_DURATION_METRIC: Final = "d8_ai_models_controller_admission_duration_seconds"
# Every request a process sends to the API server, {verb,resource,code}
# (adapters/kube/request_counting.py): the controller, the api and the node plugin.
CONTROLLER_KUBERNETES_REQUESTS_METRIC: Final = "d8_ai_models_controller_kubernetes_requests"
API_KUBERNETES_REQUESTS_METRIC: Final = "d8_ai_models_api_kubernetes_requests"
NODE_CACHE_KUBERNETES_REQUESTS_METRIC: Final = "d8_ai_models_node_cache_kubernetes_requests"
CATALOG_INDEXED_MODELS_METRIC: Final = "d8_ai_models_catalog_source_indexed_models"
CATALOG_LAST_SUCCESS_METRIC: Final = "d8_ai_models_catalog_source_last_successful_sync_timestamp_seconds"
CATALOG_INDEXING_METRIC: Final = "d8_ai_models_catalog_source_indexing"
CATALOG_SYNC_FAILING_METRIC: Final = "d8_ai_models_catalog_source_sync_failing"
CATALOG_SYNC_FAILURES_METRIC: Final = "d8_ai_models_catalog_source_sync_failures"
STORAGE_CAPACITY_METRIC: Final = "d8_ai_models_storage_capacity_bytes"
STORAGE_LEDGER_PRESENT_METRIC: Final = "d8_ai_models_storage_ledger_present"
STORAGE_LEDGER_CONFIRMED_METRIC: Final = "d8_ai_models_storage_ledger_confirmed"
STORAGE_USED_METRIC: Final = "d8_ai_models_storage_used_bytes"
STORAGE_RESERVED_METRIC: Final = "d8_ai_models_storage_reserved_bytes"
STORAGE_ARTIFACTS_METRIC: Final = "d8_ai_models_storage_artifacts"
INVENTORY_PASS_SUCCESS_METRIC: Final = "d8_ai_models_storage_inventory_pass_success"
INVENTORY_LAST_SUCCESS_METRIC: Final = "d8_ai_models_storage_inventory_last_success_timestamp_seconds"
INVENTORY_PASSES_METRIC: Final = "d8_ai_models_storage_inventory_passes"
PUBLICATIONS_METRIC: Final = "d8_ai_models_publications"
MODELS_METRIC: Final = "d8_ai_models_models"
# Computed by the controller on every scrape and by the storage_prerequisites hook (metric group
# STORAGE_PREREQUISITES_METRIC_GROUP); alert D8AIModelsStoragePrerequisitesNotSatisfied.
STORAGE_PREREQUISITES_METRIC: Final = "d8_ai_models_storage_prerequisites_satisfied"
STORAGE_PREREQUISITES_METRIC_GROUP: Final = "d8_ai_models_storage_prerequisites"
# Every api metric starts with this prefix (api/metrics.py lists them).
API_METRICS_PREFIX: Final = "d8_ai_models_api_"
