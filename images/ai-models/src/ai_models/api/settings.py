"""Settings of the api process (on top of the shared ones), from `AI_MODELS_*` variables."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from pydantic import Field

from ai_models.settings import Settings

_MIB: Final = 1024 * 1024
DEFAULT_INDEX_CACHE_BYTES: Final = 64 * _MIB


class ApiSettings(Settings):
    api_address: str = Field(
        default="0.0.0.0", description="Listener of the API (what the CLI passes to serve)."
    )
    api_port: int = Field(default=8000, ge=0, le=65535, description="Port of the API; 0 picks a free port.")
    api_metrics_address: str = Field(default="127.0.0.1", description="Listener of /metrics.")
    api_metrics_port: int = Field(default=8080, ge=0, le=65535, description="0 picks a free port.")
    api_index_dir: Path | None = Field(
        default=None, description="Directory of the SQLite catalog index; a private temporary one if unset."
    )
    api_index_refresh_seconds: float = Field(
        default=5.0, gt=0, description="How often the catalog manifests are polled for new generations."
    )
    api_index_retry_base_seconds: float = Field(
        default=10.0, gt=0, description="First wait before re-reading a generation that failed to index."
    )
    api_index_retry_cap_seconds: float = Field(default=300.0, gt=0, description="Longest such wait.")
    api_index_readers: int = Field(default=4, ge=1, le=64, description="Concurrent index readers.")
    api_index_cache_bytes: int | None = Field(
        default=None,
        ge=_MIB,
        description="SQLite page cache of the index in all; derived from the memory limit.",
    )
    memory_limit_bytes: int | None = Field(
        default=None, ge=1, description="The container's memory limit (Downward API limits.memory)."
    )
    api_auth_cache_seconds: float = Field(
        default=10.0, ge=0, description="How long an accepted token and an allowed review are reused."
    )
    api_ledger_max_age_seconds: float = Field(
        default=5.0, ge=0, description="Oldest ledger snapshot download verdicts are computed from."
    )
    api_kubernetes_timeout_seconds: float = Field(
        default=5.0, gt=0, description="Read timeout of one Kubernetes API call (reviews, ledger)."
    )
    api_shutdown_grace_seconds: float = Field(
        default=20.0, ge=0, description="How long in-flight requests may finish after SIGTERM."
    )
    api_internal_port: int = Field(
        default=9443,
        ge=0,
        le=65535,
        description="Port of the internal TLS listener (lookup, and serving for the node plugin).",
    )
    api_tls_cert_file: Path | None = Field(
        default=None,
        description="Certificate (PEM, chain first) of the internal listener; without one it does not start.",
    )
    api_tls_key_file: Path | None = Field(default=None, description="Private key (PEM) of that certificate.")
    api_object_cache_seconds: float = Field(
        default=2.0,
        ge=0,
        description="How long a Model or ClusterModel read for serving or lookup is reused.",
    )
    api_upload_signing_key_cache_seconds: float = Field(
        default=30.0,
        ge=0,
        description="How long the upload and delivery signing keys are reused before they are read again.",
    )
    api_upload_idle_timeout_seconds: float = Field(
        default=300.0, gt=0, description="How long an upload may send nothing before it is cut off."
    )
    api_max_concurrent_uploads: int = Field(
        default=64,
        ge=1,
        le=1024,
        description="Uploads one replica streams at once; one more is refused with 503 and Retry-After.",
    )
    api_upload_min_bytes_per_second: int = Field(
        default=256 * 1024,
        ge=0,
        description="Slowest an upload may be, averaged over each rate window; slower is cut off (0: none).",
    )
    api_upload_rate_window_seconds: float = Field(
        default=60.0, gt=0, description="The window the minimum upload rate is averaged over."
    )
    api_upload_max_seconds: float = Field(
        default=12 * 3600.0,
        gt=0,
        description="Longest an upload may take; sooner for a size the minimum rate sends faster.",
    )

    api_max_concurrent_downloads: int = Field(
        default=256,
        ge=1,
        le=65536,
        description="File downloads one replica streams at once; more are answered 503 with Retry-After.",
    )
    api_max_concurrent_downloads_per_subject: int = Field(
        default=16,
        ge=1,
        le=65536,
        description=(
            "File downloads one subject (a user, or the pod a ServiceAccount token is bound to) has in "
            "flight on one replica; more are answered 429 with Retry-After."
        ),
    )
    api_write_stall_timeout_seconds: float = Field(
        default=60.0,
        gt=0,
        description=(
            "How long a connection may take none of the response bytes waiting for it before it is reset."
        ),
    )
    api_header_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description=(
            "How long a connection may take to send a complete request head before it is closed (408)."
        ),
    )
    api_max_connections: int = Field(
        default=1024,
        ge=1,
        le=65536,
        description="Open connections per listener; a connection past them is answered 503 and closed.",
    )

    def internal_tls(self) -> tuple[Path, Path] | None:
        """The internal listener's certificate and key files, or None when it is not configured."""
        if self.api_tls_cert_file is None or self.api_tls_key_file is None:
            return None
        return self.api_tls_cert_file, self.api_tls_key_file

    def index_cache_bytes(self) -> int:
        """The index's page-cache budget: an eighth of the memory limit, within 16-256 MiB."""
        if self.api_index_cache_bytes is not None:
            return self.api_index_cache_bytes
        if self.memory_limit_bytes is None:
            return DEFAULT_INDEX_CACHE_BYTES
        return max(16 * _MIB, min(self.memory_limit_bytes // 8, 256 * _MIB))


def api_settings(settings: Settings) -> ApiSettings:
    """`settings` as ApiSettings: its values win, the api's own come from the environment."""
    if isinstance(settings, ApiSettings):
        return settings
    return ApiSettings(**settings.model_dump())
