"""Typed process settings, read from `AI_MODELS_*` environment variables.

The Helm templates set these variables from module values; `make dev` sets them for the local
stack. One place parses and checks them, so a typo fails at start with the variable's name.
"""

from __future__ import annotations

import decimal
import enum
import os
import re
import socket

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ai_models.names import ENV_PREFIX, MODULE_NAMESPACE

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_SUFFIXES: dict[str | None, int] = {
    None: 1,
    **{suffix: 1024 ** (index + 1) for index, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    **{suffix: 1000 ** (index + 1) for index, suffix in enumerate(("k", "M", "G", "T", "P", "E"))},
}


def parse_quantity(text: str) -> int:
    """Bytes of a Kubernetes quantity such as `500Gi` or `1.5T` (the forms the settings schema allows)."""
    match = _QUANTITY.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a quantity such as 500Gi or 2T")
    number, suffix = match.groups()
    return int(decimal.Decimal(number) * _SUFFIXES[suffix])


class LogLevel(enum.StrEnum):
    """The module setting `aiModels.logLevel`; same spelling as in the ModuleConfig."""

    DEBUG = "Debug"
    INFO = "Info"
    WARN = "Warn"
    ERROR = "Error"


class LogFormat(enum.StrEnum):
    JSON = "json"
    TEXT = "text"
    AUTO = "auto"


class Settings(BaseSettings):
    """Settings shared by every `ai-models` sub-command."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, case_sensitive=False, extra="ignore")

    log_level: LogLevel = Field(default=LogLevel.INFO, description="Verbosity of logs.")
    log_format: LogFormat = Field(
        default=LogFormat.AUTO,
        description="`json` for log collectors, `text` for people; `auto` picks JSON inside a pod.",
    )

    store_url: str | None = Field(
        default=None,
        description=(
            "Object store: `s3://<bucket>` (endpoint and credentials below and in AWS_* variables) "
            "or `file:///<directory>` (the local stack)."
        ),
    )
    s3_endpoint: str | None = Field(default=None, description="URL of the S3-compatible endpoint.")
    s3_region: str = Field(default="us-east-1", description="Region of the bucket.")
    s3_use_path_style: bool = Field(default=True, description="Address the bucket by path, not by host.")
    s3_insecure: bool = Field(default=False, description="Skip TLS verification of the S3 endpoint.")
    s3_ca_file: str | None = Field(default=None, description="CA bundle that signed the S3 endpoint.")
    hf_endpoint: str = Field(
        default="https://huggingface.co",
        description="Hugging Face endpoint (module setting sources.huggingFace.endpoint).",
    )
    sources_allow_link_local_endpoints: bool = Field(
        default=False,
        description=(
            "Setting sources.allowLinkLocalEndpoints: Hub endpoints (and their redirects) may be "
            "link-local addresses (169.254.0.0/16, fe80::/10); cloud metadata addresses never are."
        ),
    )
    capacity_limit_bytes: int | None = Field(
        default=None,
        ge=1,
        description="Storage budget (setting artifacts.capacityLimit): bytes or a Kubernetes quantity.",
    )
    namespace: str = Field(default=MODULE_NAMESPACE, description="Namespace of the module's own objects.")

    pod_name: str = Field(
        default_factory=socket.gethostname, description="This replica's identity (leader election, logs)."
    )

    @field_validator("capacity_limit_bytes", mode="before")
    @classmethod
    def _quantity(cls, value: object) -> object:
        # Helm passes the module setting as written (`500Gi`); the process needs bytes.
        if isinstance(value, str) and value.strip():
            return parse_quantity(value)
        return None if value == "" else value

    @classmethod
    def variable(cls, field: str) -> str:
        """The environment variable of a settings field, for messages that tell what to change."""
        if field not in cls.model_fields:
            raise KeyError(f"{cls.__name__} has no setting {field!r}")
        return f"{ENV_PREFIX}{field.upper()}"

    def effective_log_format(self) -> LogFormat:
        if self.log_format is not LogFormat.AUTO:
            return self.log_format
        # Every pod gets KUBERNETES_SERVICE_HOST from the kubelet; a developer's shell does not.
        return LogFormat.JSON if os.environ.get("KUBERNETES_SERVICE_HOST") else LogFormat.TEXT
