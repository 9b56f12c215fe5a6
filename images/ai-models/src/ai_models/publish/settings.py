"""What a publish Job is told: `AI_MODELS_PUBLISH_*` variables set by the controller.

    AI_MODELS_PUBLISH_OWNER_KIND / _OWNER_NAMESPACE / _OWNER_NAME / _OWNER_UID   whose artifact
    AI_MODELS_PUBLISH_DIGEST                    sha256:<hex>, the artifact's directory
    AI_MODELS_PUBLISH_SOURCE_TYPE               HuggingFace | Upload
    AI_MODELS_PUBLISH_REPOSITORY / _REVISION / _ENDPOINT / _TOKEN / _FILES   (HuggingFace)
    AI_MODELS_PUBLISH_TERMINATION_MESSAGE_PATH  where the outcome goes (/dev/termination-log)
    AI_MODELS_PUBLISH_REPORT_PROGRESS           patch status.progress of the owner (true)

Store settings are the shared `AI_MODELS_STORE_URL` and `AI_MODELS_S3_*`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from ai_models.domain.storage.ledger import Owner
from ai_models.names import ModelKind, SourceType
from ai_models.settings import Settings

DEFAULT_TERMINATION_MESSAGE_PATH = Path("/dev/termination-log")
PUBLISHABLE_SOURCES = frozenset({SourceType.HUGGING_FACE, SourceType.UPLOAD})
_REPOSITORY = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,95}/[A-Za-z0-9][-A-Za-z0-9_.]{0,95}$")


class FileSpec(BaseModel):
    """One file of the controller's selection (an element of AI_MODELS_PUBLISH_FILES)."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    path: str = Field(min_length=1, max_length=1024)
    size: int | None = Field(default=None, ge=0)
    lfs_sha256: str | None = Field(default=None, alias="lfsSha256", pattern=r"^[0-9a-f]{64}$")

    @field_validator("path")
    @classmethod
    def _relative(cls, path: str) -> str:
        # The path becomes part of an object key and, later, of a path on a serving node.
        segments = path.split("/")
        if path.startswith("/") or "\\" in path or any(segment in ("", ".", "..") for segment in segments):
            raise ValueError(
                f"{path!r} is not a relative '/'-separated path without '.', '..' or empty segments"
            )
        if any(ord(char) < 0x20 or ord(char) == 0x7F for char in path):
            raise ValueError(f"{path!r} contains a control character")
        return path


class PublishSettings(Settings):
    """Settings of `ai-models publish`; see the module docstring."""

    publish_owner_kind: ModelKind
    publish_owner_namespace: str = Field(default="", description='"" for a ClusterModel.')
    publish_owner_name: str = Field(min_length=1, max_length=253)
    publish_owner_uid: str = Field(min_length=1, max_length=128)
    publish_digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    publish_source_type: SourceType
    publish_repository: str | None = Field(default=None, description="Hugging Face `org/name`.")
    publish_revision: str | None = Field(default=None, description="The commit to publish.")
    publish_endpoint: str | None = Field(
        default=None, description="Hub URL or mirror; AI_MODELS_HF_ENDPOINT when not set."
    )
    publish_token: SecretStr | None = Field(default=None, description="Hub token, for private or gated ones.")
    publish_files: list[FileSpec] = Field(default_factory=list, description="The files to publish (JSON).")
    publish_termination_message_path: Path = DEFAULT_TERMINATION_MESSAGE_PATH
    publish_report_progress: bool = True

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.publish_source_type not in PUBLISHABLE_SOURCES:
            raise ValueError(
                "AI_MODELS_PUBLISH_SOURCE_TYPE must be HuggingFace or Upload, "
                f"got {self.publish_source_type.value}"
            )
        if self.publish_owner_kind is ModelKind.MODEL and not self.publish_owner_namespace:
            raise ValueError("AI_MODELS_PUBLISH_OWNER_NAMESPACE must name the Model's namespace")
        if self.publish_owner_kind is ModelKind.CLUSTER_MODEL and self.publish_owner_namespace:
            raise ValueError("AI_MODELS_PUBLISH_OWNER_NAMESPACE must be empty for a ClusterModel")
        if self.publish_source_type is SourceType.HUGGING_FACE:
            if not self.publish_repository or not _REPOSITORY.match(self.publish_repository):
                raise ValueError("AI_MODELS_PUBLISH_REPOSITORY must be a Hugging Face repository id org/name")
            if not self.publish_revision:
                raise ValueError("AI_MODELS_PUBLISH_REVISION must name the commit to publish")
            if not self.publish_files:
                raise ValueError("AI_MODELS_PUBLISH_FILES must list the files to publish")
            paths = [item.path for item in self.publish_files]
            if len(set(paths)) != len(paths):
                raise ValueError("AI_MODELS_PUBLISH_FILES lists a path twice")
        return self

    @property
    def owner(self) -> Owner:
        return Owner(
            kind=self.publish_owner_kind.value,
            namespace=self.publish_owner_namespace,
            name=self.publish_owner_name,
            uid=self.publish_owner_uid,
        )

    @property
    def endpoint(self) -> str:
        return (self.publish_endpoint or self.hf_endpoint).rstrip("/")

    @property
    def token(self) -> str | None:
        return self.publish_token.get_secret_value() if self.publish_token else None
