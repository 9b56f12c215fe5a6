"""What the controller asks one publish Job to do: the one typed contract between the two.

The controller builds a `PublicationRequest` from its plan and puts `request.to_env()` into the
Job's container; `ai-models publish` starts with `PublicationRequest.from_env(os.environ)`. The
variable names are `names.PublishVariable`; nothing else spells them.

    OWNER_KIND / OWNER_NAMESPACE / OWNER_NAME / OWNER_UID   whose artifact ("" namespace: ClusterModel)
    DIGEST                       sha256:<hex>, the artifact's directory
    SOURCE_TYPE                  HuggingFace | Upload | AIModels
    REPOSITORY / REVISION / ENDPOINT / FILES (JSON list)     Hugging Face only
    ENDPOINT / CLUSTER_MODEL / FILES / CA_BUNDLE (PEM)       AIModels: a ClusterModel of another
                                 cluster's serving API; FILES carry each file's sha256, DIGEST is
                                 that artifact's digest
    TERMINATION_MESSAGE_PATH     where the outcome goes
    REPORT_PROGRESS              "false" when the owner's status.progress is not patched
    TOKEN                        the Hub token, only ever a secretKeyRef to the Job's token Secret

The source token (the Hub token, or the token another cluster's serving API accepts) is never a
plain value of the request: the request says only that the Job has one (`hub_token`), `to_env()`
references it from the token Secret, and the publisher reads its value with `hub_token_value()`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from ai_models.domain.storage.ledger import Owner
from ai_models.names import (
    PUBLICATION_JOB_PREFIX,
    PUBLICATION_TOKEN_SECRET_SUFFIX,
    ModelKind,
    PublishVariable,
    SourceType,
)

# A ClusterModel name (a DNS subdomain) and a PEM bundle small enough for a container variable.
CLUSTER_MODEL_PATTERN: Final = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
CA_BUNDLE_MAX: Final = 64 * 1024
# Where Kubernetes reads a container's termination message unless told otherwise.
DEFAULT_TERMINATION_MESSAGE_PATH: Final = "/dev/termination-log"
# The key of the token in the Job's token Secret.
TOKEN_SECRET_KEY: Final = "token"
DIGEST_PATTERN: Final = re.compile(r"^sha256:[0-9a-f]{64}$")
REPOSITORY_PATTERN: Final = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,95}/[A-Za-z0-9][-A-Za-z0-9_.]{0,95}$")
NAME_MAX: Final = 253
UID_MAX: Final = 128
_TRUE: Final = frozenset({"true", "1", "yes", "on"})
_FALSE: Final = frozenset({"false", "0", "no", "off"})
_SHOWN_CHARACTERS: Final = 80
_Vocabulary = TypeVar("_Vocabulary", ModelKind, SourceType)


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


_FILES: Final = TypeAdapter(list[FileSpec])


@dataclasses.dataclass(frozen=True)
class HuggingFacePublication:
    repository: str
    revision: str  # the commit the controller listed
    files: tuple[FileSpec, ...]
    endpoint: str | None = None  # None: the publisher's own Hub endpoint setting

    @property
    def type(self) -> SourceType:
        return SourceType.HUGGING_FACE


@dataclasses.dataclass(frozen=True)
class UploadPublication:
    """The staged upload of the owner (its record in the object store names the payload)."""

    @property
    def type(self) -> SourceType:
        return SourceType.UPLOAD


@dataclasses.dataclass(frozen=True)
class AIModelsPublication:
    """A Ready ClusterModel of another ai-models cluster, copied through its serving API: the files
    its manifest lists (each `lfs_sha256` is the file's sha256 there), into an artifact with the
    same digest."""

    endpoint: str  # the other cluster's serving API base URL (spec.aiModels.endpoint)
    cluster_model: str
    files: tuple[FileSpec, ...]
    ca_bundle: str | None = None  # PEM (spec.aiModels.caBundle); None: the system's CAs

    @property
    def type(self) -> SourceType:
        return SourceType.AI_MODELS


PublicationSource = HuggingFacePublication | UploadPublication | AIModelsPublication


@dataclasses.dataclass(frozen=True)
class Problem:
    variable: PublishVariable
    message: str

    def __str__(self) -> str:
        return f"{self.variable.value} {self.message}"


class PublicationRequestError(ValueError):
    """The Job's variables do not make a request; every problem names its variable."""

    def __init__(self, problems: tuple[Problem, ...]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(problem) for problem in problems))


def token_secret_name(owner: Owner) -> str:
    """The Secret next to the Job that holds the Hub token (from the UID, like the Job's name)."""
    return f"{PUBLICATION_JOB_PREFIX}{owner.uid}{PUBLICATION_TOKEN_SECRET_SUFFIX}"


def token_reference(owner: Owner) -> dict[str, Any]:
    """The token variable of the Job: a reference to its token Secret, never the value."""
    return {
        "name": PublishVariable.TOKEN.value,
        "valueFrom": {"secretKeyRef": {"name": token_secret_name(owner), "key": TOKEN_SECRET_KEY}},
    }


def hub_token_value(env: Mapping[str, str]) -> str | None:
    """The Hub token Kubernetes put into the publisher's environment from the token Secret."""
    return env.get(PublishVariable.TOKEN.value) or None


@dataclasses.dataclass(frozen=True)
class PublicationRequest:
    owner: Owner
    digest: str
    source: PublicationSource
    hub_token: bool = False  # the Job gets a Hub token from its token Secret
    termination_message_path: str = DEFAULT_TERMINATION_MESSAGE_PATH
    report_progress: bool = True

    def to_env(self) -> list[dict[str, Any]]:
        """The container variables (Kubernetes EnvVar objects) that carry this request."""
        values: list[tuple[PublishVariable, str]] = [
            (PublishVariable.OWNER_KIND, self.owner.kind),
            (PublishVariable.OWNER_NAMESPACE, self.owner.namespace),
            (PublishVariable.OWNER_NAME, self.owner.name),
            (PublishVariable.OWNER_UID, self.owner.uid),
            (PublishVariable.DIGEST, self.digest),
            (PublishVariable.TERMINATION_MESSAGE_PATH, self.termination_message_path),
            (PublishVariable.SOURCE_TYPE, self.source.type.value),
        ]
        if isinstance(self.source, HuggingFacePublication):
            values += [
                (PublishVariable.REPOSITORY, self.source.repository),
                (PublishVariable.REVISION, self.source.revision),
                (PublishVariable.FILES, _files_json(self.source.files)),
            ]
            if self.source.endpoint is not None:
                values.append((PublishVariable.ENDPOINT, self.source.endpoint))
        if isinstance(self.source, AIModelsPublication):
            values += [
                (PublishVariable.ENDPOINT, self.source.endpoint),
                (PublishVariable.CLUSTER_MODEL, self.source.cluster_model),
                (PublishVariable.FILES, _files_json(self.source.files)),
            ]
            if self.source.ca_bundle is not None:
                values.append((PublishVariable.CA_BUNDLE, self.source.ca_bundle))
        if not self.report_progress:
            values.append((PublishVariable.REPORT_PROGRESS, "false"))
        env: list[dict[str, Any]] = [{"name": name.value, "value": value} for name, value in values]
        if self.hub_token:
            env.append(token_reference(self.owner))
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PublicationRequest:
        """The request in a publisher's environment; `PublicationRequestError` names every bad variable."""
        reader = _Reader(env)
        kind = reader.choice(PublishVariable.OWNER_KIND, ModelKind)
        namespace = reader.text(PublishVariable.OWNER_NAMESPACE, required=False, limit=NAME_MAX)
        if kind is ModelKind.MODEL and not namespace:
            reader.problem(PublishVariable.OWNER_NAMESPACE, "must name the Model's namespace")
        if kind is ModelKind.CLUSTER_MODEL and namespace:
            reader.problem(PublishVariable.OWNER_NAMESPACE, "must be empty for a ClusterModel")
        name = reader.text(PublishVariable.OWNER_NAME, limit=NAME_MAX)
        uid = reader.text(PublishVariable.OWNER_UID, limit=UID_MAX)
        digest = reader.text(PublishVariable.DIGEST)
        if digest and not DIGEST_PATTERN.match(digest):
            reader.problem(PublishVariable.DIGEST, f"must be sha256:<64 hex digits>, got {_shown(digest)}")
        source_type = reader.choice(PublishVariable.SOURCE_TYPE, SourceType)
        source: PublicationSource = UploadPublication()
        if source_type is SourceType.HUGGING_FACE:
            source = reader.hugging_face()
        elif source_type is SourceType.AI_MODELS:
            source = reader.ai_models()
        elif source_type is not None and source_type is not SourceType.UPLOAD:
            reader.problem(
                PublishVariable.SOURCE_TYPE,
                f"must be HuggingFace, Upload or AIModels, got {source_type.value}",
            )
        termination = reader.text(PublishVariable.TERMINATION_MESSAGE_PATH, required=False)
        report_progress = reader.flag(PublishVariable.REPORT_PROGRESS, default=True)
        reader.raise_problems()
        assert kind is not None  # a missing or bad kind is a problem raised above
        return cls(
            owner=Owner(kind=kind.value, namespace=namespace, name=name, uid=uid),
            digest=digest,
            source=source,
            hub_token=hub_token_value(env) is not None,
            termination_message_path=termination or DEFAULT_TERMINATION_MESSAGE_PATH,
            report_progress=report_progress,
        )


def _files_json(files: tuple[FileSpec, ...]) -> str:
    listed = [item.model_dump(by_alias=True) for item in files]
    return json.dumps(listed, separators=(",", ":"))


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN_CHARACTERS else value[:_SHOWN_CHARACTERS] + "...")


class _Reader:
    """Reads the variables one by one and collects every problem, so one run reports them all."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env
        self._problems: list[Problem] = []

    def problem(self, variable: PublishVariable, message: str) -> None:
        self._problems.append(Problem(variable, message))

    def raise_problems(self) -> None:
        if self._problems:
            raise PublicationRequestError(tuple(self._problems))

    def text(self, variable: PublishVariable, *, required: bool = True, limit: int | None = None) -> str:
        value = self._env.get(variable.value, "")
        if required and not value:
            self.problem(variable, "is not set" if variable.value not in self._env else "is empty")
        elif limit is not None and len(value) > limit:
            self.problem(variable, f"has {len(value)} characters, at most {limit} are allowed")
        return value

    def choice(self, variable: PublishVariable, vocabulary: type[_Vocabulary]) -> _Vocabulary | None:
        value = self.text(variable)
        if not value:
            return None
        try:
            return vocabulary(value)
        except ValueError:
            allowed = " or ".join(item.value for item in vocabulary)
            self.problem(variable, f"must be {allowed}, got {_shown(value)}")
            return None

    def flag(self, variable: PublishVariable, *, default: bool) -> bool:
        value = self._env.get(variable.value, "").strip().lower()
        if not value:
            return default
        if value in _TRUE | _FALSE:
            return value in _TRUE
        self.problem(variable, f"must be true or false, got {_shown(value)}")
        return default

    def hugging_face(self) -> HuggingFacePublication:
        repository = self.text(PublishVariable.REPOSITORY)
        if repository and not REPOSITORY_PATTERN.match(repository):
            self.problem(
                PublishVariable.REPOSITORY,
                f"must be a Hugging Face repository id org/name, got {_shown(repository)}",
            )
        revision = self.text(PublishVariable.REVISION)
        endpoint = self._env.get(PublishVariable.ENDPOINT.value) or None
        return HuggingFacePublication(
            repository=repository, revision=revision, files=self._files(), endpoint=endpoint
        )

    def ai_models(self) -> AIModelsPublication:
        endpoint = self.text(PublishVariable.ENDPOINT, limit=2048)
        if endpoint and not endpoint.startswith(("http://", "https://")):
            self.problem(PublishVariable.ENDPOINT, f"must be an http(s) URL, got {_shown(endpoint)}")
        name = self.text(PublishVariable.CLUSTER_MODEL, limit=NAME_MAX)
        if name and not CLUSTER_MODEL_PATTERN.match(name):
            self.problem(PublishVariable.CLUSTER_MODEL, f"must be a ClusterModel name, got {_shown(name)}")
        ca_bundle = self.text(PublishVariable.CA_BUNDLE, required=False, limit=CA_BUNDLE_MAX) or None
        files = self._files()
        if any(item.lfs_sha256 is None for item in files):
            self.problem(PublishVariable.FILES, "must give the sha256 of every file (lfsSha256)")
        return AIModelsPublication(endpoint=endpoint, cluster_model=name, files=files, ca_bundle=ca_bundle)

    def _files(self) -> tuple[FileSpec, ...]:
        text = self.text(PublishVariable.FILES)
        if not text:
            return ()
        try:
            files = tuple(_FILES.validate_json(text))
        except ValidationError as error:
            where = "; ".join(
                f"{'.'.join(str(part) for part in item['loc']) or 'the list'}: {item['msg']}"
                for item in error.errors()[:3]
            )
            self.problem(PublishVariable.FILES, f"is not a JSON list of files ({where})")
            return ()
        if not files:
            self.problem(PublishVariable.FILES, "must list the files to publish")
        paths = [item.path for item in files]
        if len(set(paths)) != len(paths):
            self.problem(PublishVariable.FILES, "lists a path twice")
        return files
