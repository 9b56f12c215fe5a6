"""What one `ai-models publish` run works from: the controller's request and the process settings.

What to publish is the controller's `PublicationRequest` (`domain.publication.request`: the
`AI_MODELS_PUBLISH_*` variables, the Hub token from the Job's token Secret); how to reach the
object store and the Hub are the shared process settings (`AI_MODELS_STORE_URL`, `AI_MODELS_S3_*`,
`AI_MODELS_HF_ENDPOINT`, `AI_MODELS_SOURCES_ALLOW_LINK_LOCAL_ENDPOINTS`) that Helm renders into
the publisher's pod template.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from pydantic import ValidationError

from ai_models.domain.publication.request import (
    HuggingFacePublication,
    PublicationRequest,
    PublicationRequestError,
    hub_token_value,
)
from ai_models.domain.storage.ledger import Owner
from ai_models.names import ENV_PREFIX
from ai_models.settings import Settings


class PublishSettings(Settings):
    """The publisher's process settings: only the shared ones (see the module docstring)."""


class BadSettings(ValueError):
    """The publisher cannot start; each problem names the variable and what is wrong with it."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


@dataclasses.dataclass(frozen=True)
class PublishJob:
    request: PublicationRequest
    settings: PublishSettings
    token: str | None = dataclasses.field(default=None, repr=False)

    @classmethod
    def from_environment(cls) -> PublishJob:
        """Both halves from the process environment; `BadSettings` lists every problem of both."""
        env = os.environ
        problems: list[str] = []
        request: PublicationRequest | None = None
        settings: PublishSettings | None = None
        try:
            request = PublicationRequest.from_env(env)
        except PublicationRequestError as error:
            problems += [str(problem) for problem in error.problems]
        try:
            settings = PublishSettings()
        except ValidationError as error:
            problems += settings_problems(error)
        if request is None or settings is None:
            raise BadSettings(problems)
        return cls(request=request, settings=settings, token=hub_token_value(env))

    @property
    def owner(self) -> Owner:
        return self.request.owner

    @property
    def digest(self) -> str:
        return self.request.digest

    @property
    def termination_message_path(self) -> Path:
        return Path(self.request.termination_message_path)

    @property
    def endpoint(self) -> str:
        """The Hub endpoint the controller listed the files on; the publisher's own when it named none."""
        source = self.request.source
        chosen = source.endpoint if isinstance(source, HuggingFacePublication) else None
        return (chosen or self.settings.hf_endpoint).rstrip("/")


def settings_problems(error: ValidationError) -> list[str]:
    problems = []
    for problem in error.errors():
        field = str(problem["loc"][0]) if problem["loc"] else ""
        known = field in PublishSettings.model_fields
        where = PublishSettings.variable(field) if known else f"the {ENV_PREFIX}* settings"
        problems.append(f"{where}: {problem['msg']}")
    return problems
