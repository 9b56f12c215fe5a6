"""Settings of the controller process (on top of the shared ones)."""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any, Final

from pydantic import Field, field_validator

from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.names import (
    API_IN_CLUSTER_URL,
    API_INTERNAL_URL,
    CONTROLLER_LEASE,
    DELIVERY_WEBHOOK_PATH,
    MATERIALIZER_TEMPLATE_CONFIGMAP,
    MODULE_CA_CONFIGMAP,
    PUBLISHER_TEMPLATE_CONFIGMAP,
)
from ai_models.settings import Settings, parse_quantity

# A Go-style duration as ModuleConfig settings spell them: "90s", "10m", "1h30m".
_DURATION: Final = re.compile(r"^(?:(?P<h>[0-9]+)h)?(?:(?P<m>[0-9]+)m)?(?:(?P<s>[0-9]+)s)?$")


def parse_duration(value: Any) -> Any:
    """ "1h30m" -> timedelta; numbers are seconds; anything else is left to pydantic to refuse."""
    if isinstance(value, str) and value.isdigit():
        return datetime.timedelta(seconds=int(value))
    if isinstance(value, str) and value:
        match = _DURATION.match(value)
        if match is None:
            raise ValueError(f"{value!r} is not a duration such as 90s, 10m or 1h30m")
        parts = {key: int(found or 0) for key, found in match.groupdict().items()}
        return datetime.timedelta(hours=parts["h"], minutes=parts["m"], seconds=parts["s"])
    return value


class ControllerSettings(Settings):
    controller_lease_name: str = Field(default=CONTROLLER_LEASE, description="Lease of the leader.")
    controller_lease_duration_seconds: int = Field(default=15, ge=2)
    controller_renew_deadline_seconds: int = Field(default=10, ge=1)
    controller_retry_period_seconds: int = Field(default=2, ge=1)
    controller_health_address: str = Field(default="0.0.0.0", description="Listener of /healthz and /readyz.")
    controller_health_port: int = Field(default=8081, ge=0, le=65535)
    controller_metrics_address: str = Field(default="127.0.0.1", description="Listener of /metrics.")
    controller_metrics_port: int = Field(default=8080, ge=0, le=65535)
    catalog_retry_base_seconds: float = Field(
        default=10.0, gt=0, description="First backoff after a failure."
    )
    catalog_retry_cap_seconds: float = Field(default=600.0, gt=0, description="Longest backoff.")
    catalog_hub_timeout_seconds: float = Field(
        default=30.0, gt=0, description="Connect and read timeout of a catalog request to a Hub endpoint."
    )
    catalog_listing_deadline_seconds: float = Field(
        default=120.0, gt=0, description="Longest a Hub endpoint may take to send one listing page."
    )
    delivery_mode: DeliveryMode = Field(default=DeliveryMode.SHARED_PVC, description="Setting delivery.mode.")
    delivery_shared_pvc_storage_class: str | None = Field(
        default=None, description="Setting delivery.sharedPVCStorageClassName."
    )
    delivery_global_storage_class: str | None = Field(
        default=None, description="Deckhouse's global storage class (global.defaultClusterStorageClass)."
    )
    delivery_node_cache_size: str | None = Field(default=None, description="Setting delivery.nodeCache.size.")
    delivery_node_cache_selector: dict[str, str] = Field(
        default_factory=dict, description="Setting delivery.nodeCache.nodeSelector (JSON)."
    )
    delivery_node_cache_unavailable: str | None = Field(
        default=None,
        description="Why the release runs no NodeCache node plugin (the chart's words, D162).",
    )
    delivery_max_concurrent_materializations: int = Field(
        default=2, ge=1, le=64, description="Setting delivery.maxConcurrentMaterializations."
    )
    delivery_provisioning_timeout: datetime.timedelta = Field(
        default=datetime.timedelta(minutes=10),
        gt=datetime.timedelta(0),
        description="Setting delivery.provisioningTimeout: how long a shared claim may stay unbound.",
    )
    delivery_materialization_retry_seconds: float = Field(
        default=300.0, gt=0, description="How long a failed materialization waits before it is tried again."
    )
    delivery_api_url: str = Field(
        default=API_INTERNAL_URL,
        description="The serving API as materialize Jobs reach it: the api's internal TLS port (D159).",
    )
    delivery_api_ca_file: Path | None = Field(
        default=None,
        description=f"The module CA's certificate (ConfigMap {MODULE_CA_CONFIGMAP}), copied into each "
        "materialize Job's token Secret; without it no materialize Job starts.",
    )
    delivery_materializer_template_file: Path | None = Field(
        default=None,
        description=f"The materializer pod template (ConfigMap {MATERIALIZER_TEMPLATE_CONFIGMAP}).",
    )
    delivery_registry_secret: str | None = Field(
        default=None,
        description="The module's image pull Secret (module namespace), copied beside each materialize Job.",
    )
    delivery_workers: int = Field(default=2, ge=1, le=64, description="Workloads reconciled at once.")
    delivery_claim_grace_seconds: float = Field(
        default=3600.0,
        ge=0,
        description="How long a shared claim its workload no longer uses is kept before it is deleted.",
    )
    delivery_orphan_pass_seconds: float = Field(
        default=900.0,
        gt=0,
        description="How often the leader looks for shared claims whose workload is gone (D152).",
    )
    controller_webhook_address: str = Field(
        default="0.0.0.0", description="Listener of the admission webhook."
    )
    controller_webhook_port: int = Field(default=9443, ge=0, le=65535)
    controller_webhook_cert_dir: Path | None = Field(
        default=None, description="tls.crt and tls.key of the webhook listener; no webhook when not set."
    )
    controller_webhook_path: str = Field(default=DELIVERY_WEBHOOK_PATH)
    publish_pod_template_file: Path | None = Field(
        default=None, description=f"The publisher pod template (ConfigMap {PUBLISHER_TEMPLATE_CONFIGMAP})."
    )
    publication_max_concurrent: int = Field(
        default=4, ge=1, description="Setting publication.maxConcurrentPublications: publish Jobs at once."
    )
    publication_backoff_limit: int = Field(default=3, ge=0, description="Pod retries of one publish Job.")
    publication_deadline_seconds: int = Field(
        default=86400, ge=60, description="Longest run of one publish Job."
    )
    publication_retry_seconds: float = Field(
        default=300.0, gt=0, description="How long a failed publication waits before it is tried again."
    )
    upload_token_ttl_seconds: int = Field(default=3600, ge=60, description="Validity of an upload URL.")
    upload_poll_seconds: float = Field(
        default=3.0, gt=0, description="How often an awaited upload is looked for."
    )
    upload_in_cluster_url: str = Field(
        default=API_IN_CLUSTER_URL, description="Base of status.upload.inCluster."
    )
    upload_public_url: str | None = Field(
        default=None, description="Base of status.upload.external (https://ai-models.<public domain>)."
    )
    model_workers: int = Field(default=4, ge=1, le=64, description="Models reconciled at once.")
    model_resync_seconds: float = Field(default=300.0, gt=0, description="Full re-reconcile period.")
    inventory_interval_seconds: float = Field(
        default=3600.0, gt=0, description="Period of the inventory pass."
    )
    inventory_orphan_grace_seconds: float = Field(
        default=86400.0,
        ge=0,
        description="How long what no object owns stays in the store, across passes, before removal.",
    )
    inventory_max_removal_fraction: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="Share of the stored bytes above which a pass removes nothing and reports it instead.",
    )

    @property
    def delivery_node_cache_size_bytes(self) -> int | None:
        """delivery.nodeCache.size in bytes (None: not set)."""
        return parse_quantity(self.delivery_node_cache_size) if self.delivery_node_cache_size else None

    @field_validator("delivery_node_cache_size")
    @classmethod
    def _node_cache_size(cls, value: str | None) -> str | None:
        if value:
            parse_quantity(value)  # a typo fails at start, naming the variable
        return value

    @field_validator("delivery_provisioning_timeout", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return parse_duration(value)
