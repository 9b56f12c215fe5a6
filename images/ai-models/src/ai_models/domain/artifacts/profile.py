"""The published model's profile: the object's `status.resolved`, from what the artifact holds (pure).

The publisher reads a few things back from the files it stored (config.json, the safetensors
headers' exact element counts per dtype, the GGUF headers' metadata) and passes them here with
what the source says about the model (pipeline tag, tags, library). The resource facts come from
the catalog's own engine, `derive_facts`, so a published model and its catalog entry are sized
alike; this module adds the top-level summary and the endpoint types and features the pipeline
tag implies. A fact that cannot be derived is absent, never guessed.

`complete` tells the controller whether to report the metadata as calculated or partial: a
format and a parameter count are always needed, and a text model also needs its context window.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ai_models.domain.artifacts.gguf import GgufHeader
from ai_models.domain.catalog.config_view import ConfigView
from ai_models.domain.catalog.facts import FactSources, derive_facts
from ai_models.domain.catalog.record import WeightsFormat

# Values of the CRD's `supportedEndpointTypes` and `supportedFeatures` enums that a pipeline tag
# implies. Tags not listed imply nothing.
ENDPOINTS_BY_PIPELINE: Final[Mapping[str, tuple[str, ...]]] = {
    "text-generation": ("Chat", "TextGeneration"),
    "text2text-generation": ("Chat", "TextGeneration"),
    "conversational": ("Chat", "TextGeneration"),
    "feature-extraction": ("Embeddings",),
    "sentence-similarity": ("Embeddings",),
    "text-ranking": ("Rerank",),
    "automatic-speech-recognition": ("SpeechToText",),
    "text-to-speech": ("TextToSpeech",),
    "text-to-audio": ("AudioGeneration",),
    "translation": ("Translation",),
    "image-text-to-text": ("Chat", "ImageToText"),
    "image-to-text": ("Chat", "ImageToText"),
    "visual-question-answering": ("VisualQuestionAnswering",),
    "image-classification": ("ImageClassification",),
    "object-detection": ("ObjectDetection",),
    "image-segmentation": ("ImageSegmentation",),
    "text-to-image": ("ImageGeneration",),
    "text-to-video": ("VideoGeneration",),
}
FEATURES_BY_PIPELINE: Final[Mapping[str, tuple[str, ...]]] = {
    "automatic-speech-recognition": ("AudioInput",),
    "text-to-speech": ("AudioOutput",),
    "text-to-audio": ("AudioOutput",),
    "image-text-to-text": ("VisionInput", "MultiModalInput"),
    "image-to-text": ("VisionInput", "MultiModalInput"),
    "visual-question-answering": ("VisionInput", "MultiModalInput"),
    "text-to-image": ("ImageOutput",),
    "text-to-video": ("VideoOutput",),
}
# Endpoint types of models whose size depends on a context window.
TEXT_ENDPOINTS: Final = frozenset({"Chat", "TextGeneration", "Embeddings", "Rerank"})
# GGUF architectures of encoders (embedding models); llama.cpp's names.
GGUF_ENCODERS: Final = frozenset(
    {
        "bert",
        "nomic-bert",
        "nomic-bert-moe",
        "jina-bert-v2",
        "jina-bert-v3",
        "neo-bert",
        "modern-bert",
        "t5encoder",
    }
)


@dataclasses.dataclass(frozen=True)
class ProfileInputs:
    format: WeightsFormat  # the selection's format: what was published
    filenames: Sequence[str]  # the artifact's files
    config: Mapping[str, Any] | None = None  # parsed config.json at the artifact's root
    # Elements per dtype over every stored .safetensors file; None when any header was unreadable.
    safetensors_counts: Mapping[str, int] | None = None
    gguf_headers: Sequence[GgufHeader] = ()  # one per stored .gguf file (shards of one model)
    hub_gguf: Mapping[str, Any] | None = None  # the Hub's `gguf` summary, for Hugging Face sources
    pipeline_tag: str | None = None
    tags: Sequence[str] = ()
    library_name: str | None = None


@dataclasses.dataclass(frozen=True)
class ResolvedProfile:
    resolved: Mapping[str, Any]  # `status.resolved`, camelCase, only known facts
    complete: bool  # every fact a model of this kind needs is known


def resolve_profile(inputs: ProfileInputs) -> ResolvedProfile:
    is_gguf = inputs.format is WeightsFormat.GGUF
    gguf = _gguf_summary(inputs.gguf_headers, inputs.hub_gguf) if is_gguf else None
    config = inputs.config
    if config is None and is_gguf:
        config = _config_from_gguf(inputs.gguf_headers)
    facts = derive_facts(
        FactSources(
            config=config,
            safetensors_parameters=None if is_gguf else inputs.safetensors_counts,
            gguf=gguf,
            tags=tuple(inputs.tags),
            library_name=inputs.library_name,
            filenames=tuple(inputs.filenames),
        )
    )
    resources = facts.model_dump(by_alias=True, exclude_none=True, mode="json")
    resources["format"] = inputs.format.value
    header = _first_with_architecture(inputs.gguf_headers) if is_gguf else None
    pipeline = inputs.pipeline_tag or _implied_pipeline(inputs.config, header)
    endpoints = list(ENDPOINTS_BY_PIPELINE.get(pipeline or "", ()))
    features = list(FEATURES_BY_PIPELINE.get(pipeline or "", ()))
    quantization = facts.quantization or (_file_type(inputs.gguf_headers) if is_gguf else None)
    resolved: dict[str, Any] = {
        "format": inputs.format.value,
        "family": facts.family or (header.architecture if header is not None else None),
        "architecture": facts.architecture,
        "parameterCount": facts.parameter_count,
        "quantization": quantization,
        "contextWindowTokens": facts.context_length,
        "supportedEndpointTypes": endpoints or None,
        "supportedFeatures": features or None,
        "resources": resources,
    }
    resolved = {key: value for key, value in resolved.items() if value is not None}
    return ResolvedProfile(resolved=resolved, complete=is_complete(resolved))


def is_complete(resolved: Mapping[str, Any]) -> bool:
    """Whether a profile (`status.resolved`) has every fact a model of its kind needs.

    A format and a parameter count always; a context window for a text model (one with a text
    endpoint, or with no endpoint at all unless it is a Diffusers pipeline). The controller reads
    it back from the manifest to choose ModelMetadataCalculated or ModelMetadataPartial.
    """
    return not missing_facts(resolved)


def missing_facts(resolved: Mapping[str, Any]) -> tuple[str, ...]:
    """The `status.resolved` fields a complete profile of this kind has and this one lacks, so the
    ModelMetadataPartial message can name them instead of only saying that some are missing."""
    required = ["format", "parameterCount"]
    endpoints = set(resolved.get("supportedEndpointTypes") or ())
    text_model = bool(TEXT_ENDPOINTS & endpoints) or (
        not endpoints and resolved.get("format") != WeightsFormat.DIFFUSERS.value
    )
    if text_model:
        required.append("contextWindowTokens")
    return tuple(name for name in required if name not in resolved)


def _first_with_architecture(headers: Sequence[GgufHeader]) -> GgufHeader | None:
    return next((header for header in headers if header.architecture), None)


def _file_type(headers: Sequence[GgufHeader]) -> str | None:
    return next((header.file_type for header in headers if header.file_type), None)


def _gguf_summary(headers: Sequence[GgufHeader], hub: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The `gguf` fact source in the Hub's shape, from the stored files first, then the Hub's."""
    summary: dict[str, Any] = {
        key: hub[key] for key in ("total", "architecture", "context_length") if hub and key in hub
    }
    header = _first_with_architecture(headers)
    if header is not None:
        summary["architecture"] = header.architecture
        if header.context_length is not None:
            summary["context_length"] = header.context_length
    # Split files each describe their own tensors: the model is their sum, if all were read.
    if headers and all(item.tensor_elements for item in headers):
        summary["total"] = sum(item.tensor_elements or 0 for item in headers)
    elif header is not None and header.parameter_count is not None and len(headers) == 1:
        summary["total"] = header.parameter_count
    return summary or None


# llama.cpp metadata keys (after `<arch>.`) and the config.json keys that mean the same.
_GGUF_CONFIG_KEYS: Final = (
    ("block_count", "num_hidden_layers"),
    ("context_length", "max_position_embeddings"),
    ("embedding_length", "hidden_size"),
    ("feed_forward_length", "intermediate_size"),
    ("attention.head_count", "num_attention_heads"),
    ("attention.head_count_kv", "num_key_value_heads"),
    ("attention.key_length", "head_dim"),
    ("expert_count", "num_local_experts"),
    ("expert_used_count", "num_experts_per_tok"),
)


def _config_from_gguf(headers: Sequence[GgufHeader]) -> dict[str, Any] | None:
    """A config.json equivalent of a GGUF file's metadata, so the one facts engine reads both."""
    header = _first_with_architecture(headers)
    if header is None or header.architecture is None:
        return None
    config: dict[str, Any] = {"model_type": header.architecture}
    for gguf_key, config_key in _GGUF_CONFIG_KEYS:
        value = header.metadata.get(f"{header.architecture}.{gguf_key}")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            config[config_key] = value
    return config


def _implied_pipeline(config: Mapping[str, Any] | None, header: GgufHeader | None) -> str | None:
    """For sources without a pipeline tag (uploads): what the weights themselves make certain."""
    view = ConfigView.of(config)
    if view is not None:
        architectures = view.raw.get("architectures")
        first = architectures[0] if isinstance(architectures, list) and architectures else None
        if isinstance(first, str) and first.endswith("ForCausalLM") and not view.is_multimodal():
            return "text-generation"
        return None
    if header is not None and header.architecture is not None and header.context_length is not None:
        return "feature-extraction" if header.architecture in GGUF_ENCODERS else "text-generation"
    return None
