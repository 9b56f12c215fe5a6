"""The internal lookup API's shapes (contract: `openapi/internal-lookup.yaml`), checked against it
by the tests; `status.resolved` and `status.conditions` are also checked against the CRDs."""

from __future__ import annotations

import datetime
import enum
from typing import Final

from pydantic import Field

from ai_models.api.models import Shape
from ai_models.domain.catalog.record import ResourceFacts, WeightsFormat
from ai_models.names import INTERNAL_API_PREFIX, MODELS_LOOKUP_PATH, ModelKind, ModelPhase

LOOKUP_PREFIX: Final = INTERNAL_API_PREFIX
LOOKUP_PATH: Final = MODELS_LOOKUP_PATH
LOOKUP_CONTRACT_PATH: Final = f"{LOOKUP_PREFIX}/openapi.json"
DIGEST_PATTERN: Final = r"^sha256:[a-f0-9]{64}$"
NAMESPACE_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
OBJECT_NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class EndpointType(enum.StrEnum):
    """`status.resolved.supportedEndpointTypes` items, as the CRDs spell them."""

    CHAT = "Chat"
    TEXT_GENERATION = "TextGeneration"
    EMBEDDINGS = "Embeddings"
    RERANK = "Rerank"
    SPEECH_TO_TEXT = "SpeechToText"
    TEXT_TO_SPEECH = "TextToSpeech"
    TRANSLATION = "Translation"
    IMAGE_CLASSIFICATION = "ImageClassification"
    OBJECT_DETECTION = "ObjectDetection"
    IMAGE_SEGMENTATION = "ImageSegmentation"
    IMAGE_TO_TEXT = "ImageToText"
    VISUAL_QUESTION_ANSWERING = "VisualQuestionAnswering"
    IMAGE_GENERATION = "ImageGeneration"
    VIDEO_GENERATION = "VideoGeneration"
    AUDIO_GENERATION = "AudioGeneration"


class ModelFeature(enum.StrEnum):
    """`status.resolved.supportedFeatures` items, as the CRDs spell them."""

    VISION_INPUT = "VisionInput"
    AUDIO_INPUT = "AudioInput"
    AUDIO_OUTPUT = "AudioOutput"
    IMAGE_OUTPUT = "ImageOutput"
    VIDEO_INPUT = "VideoInput"
    VIDEO_OUTPUT = "VideoOutput"
    MULTI_MODAL_INPUT = "MultiModalInput"
    TOOL_CALLING = "ToolCalling"


class ConditionStatus(enum.StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ArtifactView(Shape):
    uri: str
    digest: str = Field(pattern=DIGEST_PATTERN)
    size_bytes: int | None = Field(default=None, alias="sizeBytes", ge=0)
    size: str | None = Field(default=None, max_length=32)


class ResolvedProfile(Shape):
    format: WeightsFormat | None = None
    family: str | None = None
    architecture: str | None = None
    parameter_count: int | None = Field(default=None, alias="parameterCount", ge=0)
    quantization: str | None = None
    context_window_tokens: int | None = Field(default=None, alias="contextWindowTokens", ge=0)
    supported_endpoint_types: list[EndpointType] | None = Field(default=None, alias="supportedEndpointTypes")
    supported_features: list[ModelFeature] | None = Field(default=None, alias="supportedFeatures")
    resources: ResourceFacts | None = None


class ConditionView(Shape):
    type: str
    status: ConditionStatus
    observed_generation: int | None = Field(default=None, alias="observedGeneration", ge=0)
    last_transition_time: datetime.datetime = Field(alias="lastTransitionTime")
    reason: str
    message: str


class Delivery(Shape):
    path: str
    manifest_url: str = Field(alias="manifestURL", json_schema_extra={"format": "uri"})


class ModelLookup(Shape):
    kind: ModelKind
    namespace: str | None = None
    name: str
    uid: str
    phase: ModelPhase
    artifact: ArtifactView | None = None
    resolved: ResolvedProfile | None = None
    conditions: list[ConditionView] | None = None
    delivery: Delivery


class LookupQuery(Shape):
    """The lookup operation's query parameters; which combinations are valid is checked on top."""

    kind: ModelKind
    namespace: str | None = Field(default=None, min_length=1, max_length=63, pattern=NAMESPACE_PATTERN)
    name: str = Field(min_length=1, max_length=253, pattern=OBJECT_NAME_PATTERN)
