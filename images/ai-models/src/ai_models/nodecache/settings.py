"""Settings of `ai-models node-cache` (on top of the shared ones), from AI_MODELS_NODE_CACHE_* variables.

The command line names what differs per node (socket, node name, cache root: the chart passes them
as arguments); everything the module settings decide comes from the environment.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from ai_models.names import NODE_CACHE_MODULE_CA_FILE, NODE_CACHE_MODULE_TOKEN_FILE
from ai_models.settings import Settings, parse_quantity


class NodeCacheSettings(Settings):
    node_cache_size: int = Field(
        ge=1,
        description="Setting delivery.nodeCache.size: the budget on each node (capped by free space).",
    )
    node_cache_api_url: str = Field(
        description="The serving API the cache downloads from: https only (in the chart the api "
        "Service's internal TLS port, D159).",
    )
    node_cache_api_ca_file: str = Field(
        default=NODE_CACHE_MODULE_CA_FILE,
        description="PEM bundle that signed the serving API's certificate (the module CA).",
    )
    node_cache_token_file: Path = Field(
        default=Path(NODE_CACHE_MODULE_TOKEN_FILE),
        description="The plugin's projected ServiceAccount token for the module audience, read again "
        "for every download (it rotates); never the API server's token, which stays for the Kubernetes API.",
    )
    node_cache_kubelet_dir: Path = Field(
        default=Path("/var/lib/kubelet"),
        description="kubelet's directory on the node: publish targets must be under its pods/.",
    )
    node_cache_publish_wait_seconds: float = Field(
        default=30.0,
        ge=0,
        le=100,
        description="How long NodePublishVolume waits for a download before it answers 'retry' "
        "(kubelet gives the call 120 s).",
    )
    node_cache_eviction_grace_seconds: float = Field(
        default=600.0, ge=0, description="How long an unreferenced tree stays before it may be evicted."
    )
    node_cache_max_concurrent_downloads: int = Field(default=2, ge=1, le=16)
    node_cache_health_address: str = Field(default="0.0.0.0", description="Listener of /healthz.")
    node_cache_health_port: int = Field(default=9808, ge=0, le=65535)

    @field_validator("node_cache_api_url")
    @classmethod
    def _https(cls, value: str) -> str:
        # The plugin sends a token with every download: never over plain http, not even as a fallback.
        if not value.startswith("https://"):
            raise ValueError(
                f"must be an https URL (the api Service's internal TLS port, verified with the module CA), "
                f"got {value[:80]!r}"
            )
        return value

    @field_validator("node_cache_size", mode="before")
    @classmethod
    def _size(cls, value: object) -> object:
        # Helm passes the module setting as written (`500Gi`); the cache needs bytes.
        if isinstance(value, str) and value.strip():
            return parse_quantity(value)
        return value
