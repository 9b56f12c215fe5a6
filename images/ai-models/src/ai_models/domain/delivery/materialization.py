"""What the controller asks one materialize Job to do, what the Job leaves on the claim, and what it
tells the controller: the typed contract between the two (D87).

The controller builds a `MaterializationRequest` and puts `request.to_env(token_secret=...)` into
the Job's container; `ai-models materialize` starts with `MaterializationRequest.from_env(os.environ)`.
The variable names are `names.MaterializeVariable`; nothing else spells them.

    API_URL                    the serving API's base URL, https only (the api Service's internal
                               TLS port, https://ai-models-api.d8-ai-models.svc, D159)
    CA_BUNDLE                  the module CA's certificate (PEM) that verifies the API's, only ever
                               a secretKeyRef to the token Secret (`ca_bundle_value()` reads it)
    TARGET_DIR                 where the shared claim is mounted in the Job
    ARTIFACTS                  JSON list of {name, ref: {kind, namespace, name}, digest}
    TERMINATION_MESSAGE_PATH   where the outcome goes
    TOKEN                      the delivery token, only ever a secretKeyRef to a Secret of the
                               workload namespace (`delivery_token_value()` reads it)

A tree on the claim counts as delivered when its completion record (`CompletionRecord`, at
`claim_layout.completion_record(digest)`) names its digest and its files.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from ai_models.domain.models.reference import ModelKey
from ai_models.domain.publication.outcome import bounded_message
from ai_models.domain.publication.request import DEFAULT_TERMINATION_MESSAGE_PATH, NAME_MAX
from ai_models.names import MODULE_CA_KEY, MaterializeVariable, ModelKind

# The keys of the token and of the module CA's certificate in the Job's token Secret.
TOKEN_SECRET_KEY: Final = "token"
CA_SECRET_KEY: Final = MODULE_CA_KEY
PEM_CERTIFICATE: Final = "-----BEGIN CERTIFICATE-----"
DIGEST_PATTERN: Final = r"^sha256:[0-9a-f]{64}$"
DNS_LABEL: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# A model's mount name is its object name: a DNS-1123 subdomain ("llama-3.1-8b").
DNS_SUBDOMAIN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_SHOWN_CHARACTERS: Final = 80


class _Shape(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")


class ArtifactReference(_Shape):
    kind: ModelKind
    namespace: str = Field(default="", max_length=63)
    name: str = Field(min_length=1, max_length=NAME_MAX)

    @property
    def key(self) -> ModelKey:
        return ModelKey(self.kind, self.namespace, self.name)


class RequestedArtifact(_Shape):
    """One model of the workload: its mount name, the object and the digest to deliver."""

    name: str = Field(min_length=1, max_length=NAME_MAX, pattern=DNS_SUBDOMAIN)
    ref: ArtifactReference
    digest: str = Field(pattern=DIGEST_PATTERN)

    @classmethod
    def of(cls, name: str, ref: ModelKey, digest: str) -> RequestedArtifact:
        return cls(
            name=name,
            ref=ArtifactReference(kind=ref.kind, namespace=ref.namespace, name=ref.name),
            digest=digest,
        )


_ARTIFACTS: Final = TypeAdapter(list[RequestedArtifact])


@dataclasses.dataclass(frozen=True)
class Problem:
    variable: MaterializeVariable
    message: str

    def __str__(self) -> str:
        return f"{self.variable.value} {self.message}"


class MaterializationRequestError(ValueError):
    """The Job's variables do not make a request; every problem names its variable."""

    def __init__(self, problems: tuple[Problem, ...]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(problem) for problem in problems))


def token_reference(token_secret: str) -> dict[str, Any]:
    """The token variable of the Job: a reference to its token Secret, never the value."""
    return {
        "name": MaterializeVariable.TOKEN.value,
        "valueFrom": {"secretKeyRef": {"name": token_secret, "key": TOKEN_SECRET_KEY}},
    }


def ca_reference(token_secret: str) -> dict[str, Any]:
    """The CA variable of the Job: the module CA's certificate from its token Secret (the controller
    puts it there beside the token: a workload namespace has no other copy of it)."""
    return {
        "name": MaterializeVariable.CA_BUNDLE.value,
        "valueFrom": {"secretKeyRef": {"name": token_secret, "key": CA_SECRET_KEY}},
    }


def ca_bundle_value(env: Mapping[str, str]) -> str | None:
    """The module CA's certificate (PEM) Kubernetes put into the materializer's environment."""
    return env.get(MaterializeVariable.CA_BUNDLE.value) or None


def delivery_token_value(env: Mapping[str, str]) -> str | None:
    """The delivery token Kubernetes put into the materializer's environment from its Secret."""
    return env.get(MaterializeVariable.TOKEN.value) or None


@dataclasses.dataclass(frozen=True)
class MaterializationRequest:
    api_url: str
    target_dir: str
    artifacts: tuple[RequestedArtifact, ...]
    termination_message_path: str = DEFAULT_TERMINATION_MESSAGE_PATH

    def to_env(self, *, token_secret: str) -> list[dict[str, Any]]:
        """The container variables (Kubernetes EnvVar objects) that carry this request; the token
        and the module CA's certificate come from `token_secret` in the Job's namespace."""
        values: list[tuple[MaterializeVariable, str]] = [
            (MaterializeVariable.API_URL, self.api_url),
            (MaterializeVariable.TARGET_DIR, self.target_dir),
            (MaterializeVariable.ARTIFACTS, _artifacts_json(self.artifacts)),
            (MaterializeVariable.TERMINATION_MESSAGE_PATH, self.termination_message_path),
        ]
        env: list[dict[str, Any]] = [{"name": name.value, "value": value} for name, value in values]
        env.append(token_reference(token_secret))
        env.append(ca_reference(token_secret))
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> MaterializationRequest:
        """The request in a materializer's environment; `MaterializationRequestError` names every
        bad variable (a missing token or CA certificate too). The API is reached over https only,
        verified with the module CA: there is no fallback to plain http (D159)."""
        problems: list[Problem] = []

        def text(variable: MaterializeVariable) -> str:
            value = env.get(variable.value, "")
            if not value:
                problems.append(Problem(variable, "is not set" if variable.value not in env else "is empty"))
            return value

        api_url = text(MaterializeVariable.API_URL).rstrip("/")
        if api_url and not api_url.startswith("https://"):
            problems.append(
                Problem(
                    MaterializeVariable.API_URL,
                    f"must be an https URL (the api's internal TLS port), got {_shown(api_url)}",
                )
            )
        target_dir = text(MaterializeVariable.TARGET_DIR)
        if target_dir and not target_dir.startswith("/"):
            problems.append(
                Problem(MaterializeVariable.TARGET_DIR, f"must be an absolute path, got {_shown(target_dir)}")
            )
        artifacts = _artifacts(text(MaterializeVariable.ARTIFACTS), problems)
        if delivery_token_value(env) is None:
            problems.append(
                Problem(MaterializeVariable.TOKEN, "is not set (the Job's token Secret gives it)")
            )
        ca_bundle = ca_bundle_value(env)
        if ca_bundle is None:
            problems.append(
                Problem(MaterializeVariable.CA_BUNDLE, "is not set (the Job's token Secret gives it)")
            )
        elif PEM_CERTIFICATE not in ca_bundle:
            problems.append(Problem(MaterializeVariable.CA_BUNDLE, "is not a PEM certificate"))
        if problems:
            raise MaterializationRequestError(tuple(problems))
        return cls(
            api_url=api_url,
            target_dir=target_dir,
            artifacts=artifacts,
            termination_message_path=env.get(MaterializeVariable.TERMINATION_MESSAGE_PATH.value)
            or DEFAULT_TERMINATION_MESSAGE_PATH,
        )


def _artifacts(text: str, problems: list[Problem]) -> tuple[RequestedArtifact, ...]:
    if not text:
        return ()
    variable = MaterializeVariable.ARTIFACTS
    try:
        artifacts = tuple(_ARTIFACTS.validate_json(text))
    except ValidationError as error:
        where = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or 'the list'}: {item['msg']}"
            for item in error.errors()[:3]
        )
        problems.append(Problem(variable, f"is not a JSON list of artifacts ({where})"))
        return ()
    if not artifacts:
        problems.append(Problem(variable, "must list the artifacts to materialize"))
    names = [item.name for item in artifacts]
    if len(set(names)) != len(names):
        problems.append(Problem(variable, "lists a name twice"))
    for item in artifacts:
        ref = item.ref
        if (ref.kind is ModelKind.MODEL) != bool(ref.namespace):
            problems.append(
                Problem(variable, f"{item.name}: a Model has a namespace and a ClusterModel none")
            )
    return artifacts


def _artifacts_json(artifacts: tuple[RequestedArtifact, ...]) -> str:
    return json.dumps([item.model_dump(mode="json") for item in artifacts], separators=(",", ":"))


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN_CHARACTERS else value[:_SHOWN_CHARACTERS] + "...")


# ----- What a materialization leaves on the claim ---------------------------------------------------


class RecordedFile(_Shape):
    path: str
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class CompletionRecord(_Shape):
    """Written, atomically, after every file of `object_dir(digest)` matched its manifest."""

    digest: str = Field(pattern=DIGEST_PATTERN)
    files: tuple[RecordedFile, ...]
    size_bytes: int = Field(alias="bytes", ge=0)
    completed_at: str = Field(alias="completedAt")

    def to_json(self) -> bytes:
        return self.model_dump_json(by_alias=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> CompletionRecord | None:
        """The record, or None for anything that is not one (a torn or foreign file)."""
        try:
            return cls.model_validate_json(data)
        except ValidationError:
            return None

    @field_validator("files")
    @classmethod
    def _distinct(cls, files: tuple[RecordedFile, ...]) -> tuple[RecordedFile, ...]:
        if len({item.path for item in files}) != len(files):
            raise ValueError("a path is recorded twice")
        return files


# ----- What the Job tells the controller ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MaterializationOutcome:
    """The termination message: `succeeded`, the digests delivered, and for a failure why and
    whether a new Job may succeed (`retryable`: the API or the network failed for now)."""

    succeeded: bool
    message: str
    delivered: tuple[str, ...] = ()
    retryable: bool = False

    def to_json(self) -> str:
        return json.dumps(
            {
                "succeeded": self.succeeded,
                "message": bounded_message(self.message),
                "delivered": list(self.delivered),
                "retryable": self.retryable,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | None) -> MaterializationOutcome | None:
        """The outcome, or None when the message is absent or not ours (a killed Pod)."""
        if not text:
            return None
        try:
            document = json.loads(text)
            succeeded = document["succeeded"]
            delivered = document.get("delivered", [])
            if not isinstance(succeeded, bool) or not isinstance(delivered, list):
                return None
            return cls(
                succeeded=succeeded,
                message=str(document.get("message", "")),
                delivered=tuple(str(item) for item in delivered),
                retryable=bool(document.get("retryable", False)),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
