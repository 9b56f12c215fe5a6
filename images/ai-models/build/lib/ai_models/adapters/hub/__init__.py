"""Hugging Face Hub access for the catalog: listing pages, config.json, and provider errors."""

from ai_models.adapters.hub.client import DEFAULT_CONFIG_CONCURRENCY, HubClient
from ai_models.adapters.hub.errors import (
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
from ai_models.adapters.hub.listing import HubModel, HubPage, HubQuery

__all__ = [
    "DEFAULT_CONFIG_CONCURRENCY",
    "HubClient",
    "HubModel",
    "HubPage",
    "HubQuery",
    "ProviderError",
    "ProviderErrorReason",
    "ProviderForbidden",
    "ProviderInvalidResponse",
    "ProviderNotFound",
    "ProviderRateLimited",
    "ProviderRequestRejected",
    "ProviderUnauthorized",
    "ProviderUnavailable",
]
