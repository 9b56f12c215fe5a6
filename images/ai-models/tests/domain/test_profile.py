"""The resolved profile of a published model: `status.resolved` from what the artifact holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ai_models.domain.artifacts.gguf import parse_gguf_header
from ai_models.domain.artifacts.profile import (
    ENDPOINTS_BY_PIPELINE,
    FEATURES_BY_PIPELINE,
    ProfileInputs,
    ResolvedProfile,
    resolve_profile,
)
from ai_models.domain.catalog.facts import FactSources, derive_facts
from ai_models.domain.catalog.record import WeightsFormat
from fakes.model_files import GGML_F32, GGUF_UINT32, TINY_GGUF_PARAMETERS, Typed, gguf_bytes, tiny_gguf

CRDS = Path(__file__).resolve().parents[4] / "crds"

LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 8192,
    "head_dim": 64,
    "max_position_embeddings": 131072,
    "vocab_size": 128256,
    "torch_dtype": "bfloat16",
}
LLAMA_COUNTS = {"BF16": 1_235_814_400}


def resolved_schema(kind_file: str) -> dict[str, Any]:
    document = yaml.safe_load((CRDS / kind_file).read_text())
    schema: dict[str, Any] = document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    resolved: dict[str, Any] = schema["properties"]["status"]["properties"]["resolved"]
    return resolved


def profile(**inputs: Any) -> ResolvedProfile:
    inputs.setdefault("format", WeightsFormat.SAFETENSORS)
    inputs.setdefault("filenames", ["config.json", "model.safetensors"])
    return resolve_profile(ProfileInputs(**inputs))


def test_a_safetensors_text_model_has_a_complete_profile() -> None:
    result = profile(config=LLAMA, safetensors_counts=LLAMA_COUNTS, pipeline_tag="text-generation")

    assert result.complete
    assert result.resolved == {
        "format": "Safetensors",
        "family": "llama",
        "architecture": "LlamaForCausalLM",
        "parameterCount": 1_235_814_400,
        "contextWindowTokens": 131072,
        "supportedEndpointTypes": ["Chat", "TextGeneration"],
        "resources": derive_facts(
            FactSources(
                config=LLAMA,
                safetensors_parameters=LLAMA_COUNTS,
                filenames=("config.json", "model.safetensors"),
            )
        ).model_dump(by_alias=True, exclude_none=True, mode="json"),
    }
    assert result.resolved["resources"]["dtype"] == "BF16"
    assert result.resolved["resources"]["weightsBytes"] == 2 * 1_235_814_400


@pytest.mark.parametrize("crd", ["ai.deckhouse.io_models.yaml", "ai.deckhouse.io_clustermodels.yaml"])
def test_every_endpoint_type_and_feature_is_one_the_crd_allows(crd: str) -> None:
    schema = resolved_schema(crd)
    endpoints = set(schema["properties"]["supportedEndpointTypes"]["items"]["enum"])
    features = set(schema["properties"]["supportedFeatures"]["items"]["enum"])
    for values in ENDPOINTS_BY_PIPELINE.values():
        assert set(values) <= endpoints
    for values in FEATURES_BY_PIPELINE.values():
        assert set(values) <= features


@pytest.mark.parametrize(
    ("pipeline_tag", "endpoints", "features"),
    [
        ("text-generation", ["Chat", "TextGeneration"], None),
        ("text2text-generation", ["Chat", "TextGeneration"], None),
        ("conversational", ["Chat", "TextGeneration"], None),
        ("feature-extraction", ["Embeddings"], None),
        ("sentence-similarity", ["Embeddings"], None),
        ("text-ranking", ["Rerank"], None),
        ("automatic-speech-recognition", ["SpeechToText"], ["AudioInput"]),
        ("text-to-speech", ["TextToSpeech"], ["AudioOutput"]),
        ("image-text-to-text", ["Chat", "ImageToText"], ["VisionInput", "MultiModalInput"]),
        ("image-to-text", ["Chat", "ImageToText"], ["VisionInput", "MultiModalInput"]),
        ("text-to-image", ["ImageGeneration"], ["ImageOutput"]),
        ("fill-mask", None, None),
    ],
)
def test_the_pipeline_tag_says_what_the_model_serves(
    pipeline_tag: str, endpoints: list[str] | None, features: list[str] | None
) -> None:
    resolved = profile(config=LLAMA, safetensors_counts=LLAMA_COUNTS, pipeline_tag=pipeline_tag).resolved
    assert resolved.get("supportedEndpointTypes") == endpoints
    assert resolved.get("supportedFeatures") == features


@pytest.mark.parametrize("crd", ["ai.deckhouse.io_models.yaml", "ai.deckhouse.io_clustermodels.yaml"])
def test_the_profile_fits_the_status_schema(crd: str) -> None:
    schema = resolved_schema(crd)
    examples = [
        profile(config=LLAMA, safetensors_counts=LLAMA_COUNTS, pipeline_tag="image-text-to-text").resolved,
        profile(
            format=WeightsFormat.GGUF,
            filenames=["m-Q4_K_M.gguf"],
            gguf_headers=[parse_gguf_header(tiny_gguf())],
        ).resolved,
        profile(
            format=WeightsFormat.DIFFUSERS, filenames=["model_index.json"], safetensors_counts={"F16": 10}
        ).resolved,
    ]
    for resolved in examples:
        assert set(resolved) <= set(schema["properties"])
        assert set(resolved["resources"]) <= set(schema["properties"]["resources"]["properties"])
        assert resolved["format"] in schema["properties"]["format"]["enum"]
        for key, value in resolved.items():
            if schema["properties"][key]["type"] == "integer":
                assert isinstance(value, int)
                assert value >= 0


def test_the_format_is_the_selections() -> None:
    # A repository the Hub files under the gguf library, published as its safetensors weights.
    result = profile(config=LLAMA, safetensors_counts=LLAMA_COUNTS, library_name="gguf")
    assert result.resolved["format"] == "Safetensors"
    assert result.resolved["resources"]["format"] == "Safetensors"


def test_a_gguf_profile_comes_from_the_file_header() -> None:
    header = parse_gguf_header(
        gguf_bytes(
            metadata={
                "general.architecture": "qwen2",
                "general.file_type": Typed(GGUF_UINT32, 17),
                "qwen2.context_length": Typed(GGUF_UINT32, 32768),
                "qwen2.block_count": Typed(GGUF_UINT32, 28),
                "qwen2.embedding_length": Typed(GGUF_UINT32, 3584),
                "qwen2.attention.head_count": Typed(GGUF_UINT32, 28),
                "qwen2.attention.head_count_kv": Typed(GGUF_UINT32, 4),
            },
            tensors={"token_embd.weight": (GGML_F32, (16, 8))},
        )
    )
    result = profile(
        format=WeightsFormat.GGUF,
        filenames=["qwen2.5-7b-instruct.gguf"],
        gguf_headers=[header],
        hub_gguf={"total": 7_615_616_512, "architecture": "qwen2", "context_length": 32768},
        pipeline_tag="text-generation",
    )

    assert result.complete
    resolved = result.resolved
    assert resolved["format"] == "GGUF"
    assert resolved["family"] == "qwen2"
    assert resolved["quantization"] == "Q5_K_M"  # the file name says nothing; the header does
    assert resolved["parameterCount"] == 16 * 8  # the stored file's tensors, before the Hub's total
    assert resolved["contextWindowTokens"] == 32768
    assert resolved["resources"]["layers"] == 28
    assert resolved["resources"]["kvHeads"] == 4
    assert resolved["resources"]["attention"] == "GQA"
    assert resolved["resources"]["headDim"] == 128


def test_split_gguf_files_add_up() -> None:
    shards = [parse_gguf_header(tiny_gguf()), parse_gguf_header(tiny_gguf(name="second"))]
    result = profile(
        format=WeightsFormat.GGUF,
        filenames=["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"],
        gguf_headers=shards,
    )
    assert result.resolved["parameterCount"] == 2 * TINY_GGUF_PARAMETERS


def test_an_upload_without_a_pipeline_tag_gets_what_the_weights_make_certain() -> None:
    causal = profile(config=LLAMA, safetensors_counts=LLAMA_COUNTS)
    assert causal.resolved["supportedEndpointTypes"] == ["Chat", "TextGeneration"]

    multimodal = profile(
        config={**LLAMA, "vision_config": {"hidden_size": 1024}}, safetensors_counts=LLAMA_COUNTS
    )
    assert "supportedEndpointTypes" not in multimodal.resolved

    gguf_llm = profile(
        format=WeightsFormat.GGUF, filenames=["m.gguf"], gguf_headers=[parse_gguf_header(tiny_gguf())]
    )
    assert gguf_llm.resolved["supportedEndpointTypes"] == ["Chat", "TextGeneration"]

    embedder = parse_gguf_header(
        gguf_bytes(
            metadata={"general.architecture": "bert", "bert.context_length": Typed(GGUF_UINT32, 512)},
            tensors={"token_embd.weight": (GGML_F32, (16, 8))},
        )
    )
    gguf_bert = profile(format=WeightsFormat.GGUF, filenames=["e.gguf"], gguf_headers=[embedder])
    assert gguf_bert.resolved["supportedEndpointTypes"] == ["Embeddings"]


def test_missing_facts_make_the_profile_partial() -> None:
    no_config = profile(filenames=["model.safetensors"], safetensors_counts={"F16": 1000})
    assert no_config.resolved["parameterCount"] == 1000
    assert "contextWindowTokens" not in no_config.resolved
    assert not no_config.complete

    # Unreadable headers: the count the config implies, as for a catalog entry.
    unread = profile(config=LLAMA, safetensors_counts=None, pipeline_tag="text-generation")
    assert unread.resolved["parameterCount"] == derive_facts(FactSources(config=LLAMA)).parameter_count
    assert unread.complete

    nothing = profile(filenames=["model.safetensors"])
    assert nothing.resolved == {"format": "Safetensors", "resources": {"format": "Safetensors"}}
    assert not nothing.complete


def test_models_without_a_context_window_are_complete_with_a_parameter_count() -> None:
    diffusers = profile(
        format=WeightsFormat.DIFFUSERS,
        filenames=["model_index.json", "unet/diffusion_pytorch_model.safetensors"],
        safetensors_counts={"F16": 2_567_463_684},
        pipeline_tag="text-to-image",
        library_name="diffusers",
    )
    assert diffusers.complete
    assert diffusers.resolved["format"] == "Diffusers"
    assert diffusers.resolved["supportedFeatures"] == ["ImageOutput"]

    speech = profile(
        config={"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper"},
        safetensors_counts={"F32": 37_760_640},
        pipeline_tag="automatic-speech-recognition",
    )
    assert speech.complete
    assert speech.resolved["supportedEndpointTypes"] == ["SpeechToText"]


def test_packed_quantization_is_named_and_its_counts_are_not_taken_as_parameters() -> None:
    gptq = {**LLAMA, "quantization_config": {"quant_method": "gptq", "bits": 4}}
    result = profile(config=gptq, safetensors_counts={"I32": 100_000_000, "F16": 300_000_000})
    assert result.resolved["quantization"] == "gptq"
    assert result.resolved.get("parameterCount") != 400_000_000
