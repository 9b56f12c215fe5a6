"""ModelMetadataCalculated or ModelMetadataPartial: the controller reads completeness back from
`status.resolved` and must agree with the profile that wrote it."""

from __future__ import annotations

from typing import Any

import pytest

from ai_models.domain.artifacts.profile import ProfileInputs, resolve_profile
from ai_models.domain.artifacts.profile import is_complete as metadata_complete
from ai_models.domain.catalog.record import WeightsFormat

QWEN_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "max_position_embeddings": 32768,
    "hidden_size": 896,
    "num_hidden_layers": 24,
}

PROFILES = {
    "chat model": ProfileInputs(
        format=WeightsFormat.SAFETENSORS,
        filenames=["config.json", "model.safetensors"],
        config=QWEN_CONFIG,
        safetensors_counts={"BF16": 494_032_768},
        pipeline_tag="text-generation",
    ),
    "chat model without config.json": ProfileInputs(
        format=WeightsFormat.SAFETENSORS,
        filenames=["model.safetensors"],
        safetensors_counts={"BF16": 494_032_768},
        pipeline_tag="text-generation",
    ),
    "chat model with an unreadable header": ProfileInputs(
        format=WeightsFormat.SAFETENSORS,
        filenames=["config.json", "model.safetensors"],
        config=QWEN_CONFIG,
        safetensors_counts=None,
        pipeline_tag="text-generation",
    ),
    "uploaded causal LM without a pipeline tag": ProfileInputs(
        format=WeightsFormat.SAFETENSORS,
        filenames=["config.json", "model.safetensors"],
        config={
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "max_position_embeddings": 4096,
        },
        safetensors_counts={"F16": 1_100_048_384},
    ),
    "uploaded weights nothing is known about": ProfileInputs(
        format=WeightsFormat.SAFETENSORS,
        filenames=["model.safetensors"],
        safetensors_counts={"F16": 1_000},
    ),
    "embedding model": ProfileInputs(
        format=WeightsFormat.SAFETENSORS,
        filenames=["config.json", "model.safetensors"],
        config={"architectures": ["BertModel"], "model_type": "bert", "max_position_embeddings": 512},
        safetensors_counts={"F32": 109_482_240},
        pipeline_tag="feature-extraction",
    ),
    "embedding model without context": ProfileInputs(
        format=WeightsFormat.SAFETENSORS,
        filenames=["model.safetensors"],
        safetensors_counts={"F32": 109_482_240},
        pipeline_tag="feature-extraction",
    ),
    "speech recognition": ProfileInputs(
        format=WeightsFormat.SAFETENSORS,
        filenames=["config.json", "model.safetensors"],
        config={"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper"},
        safetensors_counts={"F32": 37_760_640},
        pipeline_tag="automatic-speech-recognition",
    ),
    "image classifier": ProfileInputs(
        format=WeightsFormat.SAFETENSORS,
        filenames=["config.json", "model.safetensors"],
        config={"architectures": ["ViTForImageClassification"], "model_type": "vit"},
        safetensors_counts={"F32": 86_567_656},
        pipeline_tag="image-classification",
    ),
    "diffusers pipeline": ProfileInputs(
        format=WeightsFormat.DIFFUSERS,
        filenames=["model_index.json", "unet/diffusion_pytorch_model.safetensors"],
        safetensors_counts={"F16": 2_567_463_684},
        pipeline_tag="text-to-image",
        library_name="diffusers",
    ),
    "uploaded diffusers pipeline": ProfileInputs(
        format=WeightsFormat.DIFFUSERS,
        filenames=["model_index.json", "unet/diffusion_pytorch_model.safetensors"],
        safetensors_counts={"F16": 2_567_463_684},
    ),
    "diffusers pipeline with unreadable headers": ProfileInputs(
        format=WeightsFormat.DIFFUSERS,
        filenames=["model_index.json", "unet/diffusion_pytorch_model.safetensors"],
        pipeline_tag="text-to-image",
    ),
    "gguf chat model": ProfileInputs(
        format=WeightsFormat.GGUF,
        filenames=["qwen2.5-7b-instruct-q4_k_m.gguf"],
        hub_gguf={"total": 7_615_616_512, "architecture": "qwen2", "context_length": 32768},
        pipeline_tag="text-generation",
    ),
    "gguf without a context length": ProfileInputs(
        format=WeightsFormat.GGUF,
        filenames=["model.gguf"],
        hub_gguf={"total": 7_615_616_512, "architecture": "qwen2"},
        pipeline_tag="text-generation",
    ),
}


def test_the_profiles_cover_both_verdicts() -> None:
    verdicts = [resolve_profile(inputs).complete for inputs in PROFILES.values()]
    assert verdicts.count(True) >= 5
    assert verdicts.count(False) >= 5


@pytest.mark.parametrize("inputs", PROFILES.values(), ids=PROFILES.keys())
def test_the_controller_agrees_with_the_profile_it_reads_back(inputs: ProfileInputs) -> None:
    profile = resolve_profile(inputs)
    assert metadata_complete(profile.resolved) is profile.complete


@pytest.mark.parametrize(
    ("resolved", "complete"),
    [
        ({"format": "Safetensors", "parameterCount": 1, "contextWindowTokens": 8}, True),
        ({"format": "Safetensors", "parameterCount": 1}, False),
        ({"format": "Safetensors", "contextWindowTokens": 8}, False),
        ({"format": "Safetensors", "parameterCount": 1, "supportedEndpointTypes": ["Chat"]}, False),
        ({"format": "Safetensors", "parameterCount": 1, "supportedEndpointTypes": ["Rerank"]}, False),
        ({"format": "Safetensors", "parameterCount": 1, "supportedEndpointTypes": ["SpeechToText"]}, True),
        ({"format": "Safetensors", "parameterCount": 1, "supportedEndpointTypes": []}, False),
        ({"format": "Diffusers", "parameterCount": 1}, True),
        ({"format": "Diffusers", "parameterCount": 1, "supportedEndpointTypes": ["ImageGeneration"]}, True),
        ({"format": "Diffusers", "architecture": "StableDiffusionXLPipeline"}, False),
        ({"format": "GGUF", "parameterCount": 1, "supportedEndpointTypes": ["Embeddings"]}, False),
        ({"parameterCount": 1, "contextWindowTokens": 8}, False),
        ({}, False),
    ],
)
def test_completeness_from_status_resolved(resolved: dict[str, Any], complete: bool) -> None:
    assert metadata_complete(resolved) is complete
