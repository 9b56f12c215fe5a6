"""Hugging Face Hub access: catalog listing pages and config.json, one repository's snapshot and
files for publication, and provider errors."""

import logging

from ai_models.adapters.hub.client import DEFAULT_CONFIG_CONCURRENCY, HubClient
from ai_models.adapters.hub.errors import (
    ProviderEndpointRefused,
    ProviderError,
    ProviderErrorReason,
    ProviderForbidden,
    ProviderInvalidResponse,
    ProviderNotFound,
    ProviderRateLimited,
    ProviderRequestRejected,
    ProviderUnauthorized,
    ProviderUnavailable,
)
from ai_models.adapters.hub.http import EndpointPolicy, default_policy, set_default_policy
from ai_models.adapters.hub.listing import HubModel, HubPage, HubQuery
from ai_models.adapters.hub.repository import (
    HubRepository,
    RemoteFile,
    RepositorySnapshot,
    repository_snapshot,
)

# huggingface_hub adds its own stderr handler when imported. The process's root handler already
# formats its records (JSON in a pod); the library's copy would be a second, unformatted line.
logging.getLogger("huggingface_hub").handlers.clear()

__all__ = [
    "DEFAULT_CONFIG_CONCURRENCY",
    "EndpointPolicy",
    "HubClient",
    "HubModel",
    "HubPage",
    "HubQuery",
    "HubRepository",
    "ProviderEndpointRefused",
    "ProviderError",
    "ProviderErrorReason",
    "ProviderForbidden",
    "ProviderInvalidResponse",
    "ProviderNotFound",
    "ProviderRateLimited",
    "ProviderRequestRejected",
    "ProviderUnauthorized",
    "ProviderUnavailable",
    "RemoteFile",
    "RepositorySnapshot",
    "default_policy",
    "repository_snapshot",
    "set_default_policy",
]
