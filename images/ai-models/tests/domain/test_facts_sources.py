"""Which source each fact comes from: safetensors listings, quantization, format, and the rules
that make a fact absent instead of guessed."""

from __future__ import annotations

from typing import Any

import pytest

from ai_models.domain.catalog.facts import FactSources, derive_facts
from ai_models.domain.catalog.record import AttentionKind, ResourceFacts, WeightsFormat

# Llama-3.1-8B's public config (see test_facts_models.py for its hand-computed facts).
LLAMA: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}
LLAMA_PARAMETERS = 8_030_261_248


def facts(config: dict[str, Any] | None = None, **sources: Any) -> ResourceFacts:
    return derive_facts(FactSources(config=config, **sources))


# --- safetensors listings --------------------------------------------------------------------


def test_exact_safetensors_total_wins_over_the_config_estimate() -> None:
    # A (synthetic) listing that differs from the estimate, so the winner is visible.
    got = facts(LLAMA, safetensors_total=8_030_000_001, safetensors_parameters={"BF16": 8_030_000_001})
    assert got.parameter_count == 8_030_000_001
    # Without the total, the per-dtype sum is just as exact.
    assert facts(LLAMA, safetensors_parameters={"BF16": 7, "F32": 5}).parameter_count == 12
    assert facts(LLAMA).parameter_count == LLAMA_PARAMETERS


def test_dtype_and_weights_bytes_from_the_listing() -> None:
    got = facts(LLAMA, safetensors_parameters={"BF16": LLAMA_PARAMETERS}, safetensors_total=LLAMA_PARAMETERS)
    assert got.format is WeightsFormat.SAFETENSORS
    assert got.dtype == "BF16"
    # 8,030,261,248 x 2 bytes.
    assert got.weights_bytes == 16_060_522_496


def test_dominant_dtype_is_by_element_count_and_bytes_sum_every_dtype() -> None:
    got = facts(safetensors_parameters={"BF16": 300, "F8_E4M3": 600, "F32": 100})
    assert got.dtype == "F8_E4M3"
    # 600 x 1 + 300 x 2 + 100 x 4 = 1,600.
    assert got.weights_bytes == 1600
    # A tie goes to the wider type, whatever the listing's order.
    assert facts(safetensors_parameters={"BF16": 10, "F32": 10}).dtype == "F32"
    assert facts(safetensors_parameters={"F32": 10, "BF16": 10}).dtype == "F32"


def test_sub_byte_dtypes_pack_into_bytes() -> None:
    # F4: 2 per byte; 1,001 elements take 501 bytes (a partial byte rounds up).
    assert facts(safetensors_parameters={"F4": 1001}).weights_bytes == 501


def test_an_unknown_dtype_keeps_its_name_but_has_no_size() -> None:
    got = facts(safetensors_parameters={"F2_E1M0": 100, "BF16": 1})
    assert got.dtype == "F2_E1M0"
    assert got.weights_bytes is None
    assert got.parameter_count == 101


@pytest.mark.parametrize(
    "listing",
    [
        {"BF16": -1},
        {"BF16": True},
        {"BF16": "8030261248"},
        {"BF16": 1.5},
        {"BF16": 2**80},
        {"not a dtype!": 3},
        {7: 3},
        {},
    ],
)
def test_a_malformed_listing_gives_no_dtype_and_no_bytes(listing: dict[Any, Any]) -> None:
    got = facts(LLAMA, safetensors_parameters=listing)
    assert (got.dtype, got.weights_bytes) == (None, None)
    # The config's estimate still stands.
    assert got.parameter_count == LLAMA_PARAMETERS


@pytest.mark.parametrize("total", [-5, 0, True, "123", float("nan"), 2**70])
def test_a_malformed_total_is_ignored(total: object) -> None:
    assert facts(LLAMA, safetensors_total=total).parameter_count == LLAMA_PARAMETERS


# --- quantization ----------------------------------------------------------------------------


def awq(config: dict[str, Any]) -> dict[str, Any]:
    quantization = {
        "bits": 4,
        "group_size": 128,
        "quant_method": "awq",
        "version": "gemm",
        "zero_point": True,
    }
    return {**config, "quantization_config": quantization, "torch_dtype": "float16"}


def test_packed_int4_counts_defer_to_the_config_estimate() -> None:
    # The listing the AWQ GEMM layout implies for Llama-3.1-8B (computed here):
    #   the 7 projections of a layer hold 218,103,808 weights (41,943,040 + 176,160,768)
    #   qweight I32: 218,103,808 / 8 per element = 27,262,976; qzeros I32: / (128 x 8) = 212,992
    #   -> I32 27,475,968 per layer, x 32 = 879,230,976
    #   scales F16: 218,103,808 / 128 = 1,703,936 per layer, x 32 = 54,525,952
    #   F16 also: embed + lm_head 1,050,673,152, norms 32 x 8,192 + 4,096 = 266,240
    #   -> F16 1,105,465,344
    listing = {"I32": 879_230_976, "F16": 1_105_465_344}
    got = facts(awq(LLAMA), safetensors_parameters=listing, safetensors_total=1_984_696_320)
    # 1,984,696,320 stored elements understate 8 billion parameters: the estimate wins.
    assert got.parameter_count == LLAMA_PARAMETERS
    assert got.quantization == "awq"
    assert got.dtype == "F16"
    # 879,230,976 x 4 + 1,105,465,344 x 2 = 3,516,923,904 + 2,210,930,688 = 5,727,854,592.
    assert got.weights_bytes == 5_727_854_592
    # KV in the config's float16: 2 x 8 x 128 x 2 x 32 = 131,072.
    assert got.kv_cache_bytes_per_token == 131_072


def test_packed_counts_without_a_known_layout_give_no_parameter_count() -> None:
    config = {**LLAMA, "model_type": "exaone", "quantization_config": {"quant_method": "gptq", "bits": 4}}
    got = facts(config, safetensors_total=1_000)
    assert got.parameter_count is None
    assert got.quantization == "gptq"


@pytest.mark.parametrize(
    ("quantization", "packed"),
    [
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, True),
        ({"quant_method": "bitsandbytes", "load_in_8bit": True}, False),
        ({"load_in_4bit": True}, True),  # before transformers wrote quant_method
        ({"quant_method": "compressed-tensors", "format": "pack-quantized"}, True),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"format": "pack-quantized"}},
            },
            True,
        ),
        ({"quant_method": "compressed-tensors", "format": "float-quantized"}, False),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, True),
        ({"quant_method": "fp8", "fmt": "e4m3"}, False),
    ],
)
def test_which_methods_pack_weights(quantization: dict[str, Any], packed: bool) -> None:
    got = facts({**LLAMA, "quantization_config": quantization}, safetensors_total=1_000)
    assert got.parameter_count == (LLAMA_PARAMETERS if packed else 1_000)
    assert got.quantization == quantization.get("quant_method", "bitsandbytes")


def test_quantization_method_is_a_lower_case_name_or_absent() -> None:
    assert facts({**LLAMA, "quantization_config": {"quant_method": "GPTQ"}}).quantization == "gptq"
    assert facts({**LLAMA, "quantization_config": {"quant_method": "x" * 500}}).quantization is None
    assert facts({**LLAMA, "quantization_config": "awq"}).quantization is None
    assert facts({**LLAMA, "compression_config": {"quant_method": "compressed-tensors"}}).quantization == (
        "compressed-tensors"
    )


def test_storage_only_compute_dtype_gives_no_kv_size() -> None:
    # Qwen3-8B-FP8 states torch_dtype float8_e4m3fn: that is how weights are stored, not what
    # the KV cache is kept in.
    assert facts({**LLAMA, "torch_dtype": "float8_e4m3fn"}).kv_cache_bytes_per_token is None
    assert facts({**LLAMA, "torch_dtype": "torch.float32"}).kv_cache_bytes_per_token == 262_144
    assert facts({**LLAMA, "torch_dtype": "auto"}).kv_cache_bytes_per_token is None
    assert facts({k: v for k, v in LLAMA.items() if k != "torch_dtype"}).kv_cache_bytes_per_token is None


# --- format ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        (
            {"filenames": ("model_index.json", "unet/diffusion_pytorch_model.safetensors")},
            WeightsFormat.DIFFUSERS,
        ),
        ({"library_name": "diffusers", "safetensors_total": 10}, WeightsFormat.DIFFUSERS),
        ({"library_name": "gguf", "safetensors_total": 10}, WeightsFormat.GGUF),
        (
            {"safetensors_total": 10, "gguf": {"total": 10}, "filenames": ("m.gguf",)},
            WeightsFormat.SAFETENSORS,
        ),
        ({"gguf": {"total": 10}}, WeightsFormat.GGUF),
        ({"filenames": ("model-00001-of-00002.safetensors", "model.Q4_0.gguf")}, WeightsFormat.SAFETENSORS),
        ({"filenames": ("model.Q4_0.GGUF",)}, WeightsFormat.GGUF),
        ({"tags": ("gguf",)}, WeightsFormat.GGUF),
        ({"filenames": ("pytorch_model.bin", "config.json")}, None),
        ({}, None),
    ],
)
def test_format(sources: dict[str, Any], expected: WeightsFormat | None) -> None:
    assert derive_facts(FactSources(**sources)).format is expected


def test_a_gguf_repository_reports_no_safetensors_dtype_or_bytes() -> None:
    got = facts(library_name="gguf", safetensors_parameters={"BF16": 10}, gguf={"total": 12})
    assert got.format is WeightsFormat.GGUF
    assert (got.dtype, got.weights_bytes) == (None, None)


def test_gguf_fields_fill_in_only_what_the_config_does_not_say() -> None:
    gguf = {"total": 5, "architecture": "llama", "context_length": 999}
    got = facts(LLAMA, gguf=gguf)
    assert (got.architecture, got.context_length) == ("LlamaForCausalLM", 131072)
    assert facts({"model_type": "llama"}, gguf=gguf).context_length == 999


@pytest.mark.parametrize(
    ("names", "label"),
    [
        (("llama-2-7b.Q4_K_M.gguf",), "Q4_K_M"),
        (("model-q8_0.gguf", "README.md"), "Q8_0"),
        (("Qwen3-8B-UD-IQ2_XXS.gguf",), "IQ2_XXS"),
        (("gpt-oss-20b-MXFP4.gguf",), "MXFP4"),
        (("gemma-2b.BF16.gguf",), "BF16"),
        (("a-Q4_K_M.gguf", "a-Q5_K_M.gguf"), None),
        (("model.gguf",), None),
    ],
)
def test_gguf_file_type_from_file_names(names: tuple[str, ...], label: str | None) -> None:
    assert facts(gguf={"total": 1}, filenames=names).quantization == label


# --- absent rather than guessed --------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("n_positions", 2048, 2048),
        ("seq_length", 8192, 8192),
        ("max_seq_len", 4096, 4096),
        ("sliding_window", 4096, None),
        ("max_position_embeddings", "4096", None),
    ],
)
def test_context_length_keys(key: str, value: object, expected: int | None) -> None:
    assert facts({"model_type": "x", key: value}).context_length == expected


@pytest.mark.parametrize("kv_heads", [64, 5, 0, -8, "8", True])
def test_inconsistent_or_malformed_kv_heads_give_no_attention_facts(kv_heads: object) -> None:
    got = facts({**LLAMA, "num_key_value_heads": kv_heads})
    assert (got.attention, got.kv_heads, got.kv_cache_bytes_per_token) == (None, None, None)
    # An unstated count defaults to one per query head, a null one too.
    assert facts({**LLAMA, "num_key_value_heads": None}).attention is AttentionKind.MHA


def test_qwen_max_window_layers_when_the_window_is_switched_on() -> None:
    # Layers below max_window_layers use full attention; the rest keep the window.
    config = {**LLAMA, "model_type": "qwen2", "sliding_window": 4096, "max_window_layers": 21}
    assert facts({**config, "use_sliding_window": True}).kv_cache_bytes_per_token == 2 * 8 * 128 * 2 * 21
    # Qwen's config class leaves the window off unless switched on: all 32 layers.
    assert facts(config).kv_cache_bytes_per_token == 131_072


@pytest.mark.parametrize(
    "layer_types",
    [
        ["full_attention"] * 31 + ["fancy_attention"],  # a kind not written down here
        ["full_attention"] * 31,  # one short of num_hidden_layers
        "full_attention",
        [["full_attention"]] * 32,
    ],
)
def test_undecodable_layer_types_give_no_kv_size(layer_types: object) -> None:
    got = facts({**LLAMA, "layer_types": layer_types})
    assert got.kv_cache_bytes_per_token is None
    assert got.attention is AttentionKind.GQA


def test_sliding_layer_types_need_a_window_size() -> None:
    layer_types = ["sliding_attention", "full_attention"] * 16
    assert facts({**LLAMA, "layer_types": layer_types}).kv_cache_bytes_per_token is None
    with_window = facts({**LLAMA, "layer_types": layer_types, "sliding_window": 4096})
    assert with_window.kv_cache_bytes_per_token == 131_072 // 2


def test_nemotron_h_hybrid_pattern_counts_attention_layers() -> None:
    # nvidia/Nemotron-H-8B-Base-8K: 52 layers, 4 of them attention ("*").
    pattern = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
    config = {
        **LLAMA,
        "model_type": "nemotron_h",
        "num_hidden_layers": 52,
        "hybrid_override_pattern": pattern,
    }
    # 2 x 8 x 128 x 2 bytes x 4 = 16,384 B/token.
    assert facts(config).kv_cache_bytes_per_token == 16_384
    assert facts({**config, "hybrid_override_pattern": pattern[:-1]}).kv_cache_bytes_per_token is None


def test_expert_facts() -> None:
    # `top_k` in old configs is a sampling parameter, never read as the router width.
    assert facts({**LLAMA, "num_local_experts": 8, "top_k": 50}).active_experts is None
    assert facts({**LLAMA, "num_local_experts": 8, "num_experts_per_tok": 9}).active_experts is None
    assert facts({**LLAMA, "num_experts_per_tok": 2}).active_experts is None
    assert facts({**LLAMA, "num_experts": 0}).experts is None


@pytest.mark.parametrize(
    "architectures",
    [["LlamaForSequenceClassification"], [], None, "LlamaForCausalLM", [{"a": 1}], ["x" * 1000]],
)
def test_unknown_heads_and_architectures_give_no_estimate(architectures: object) -> None:
    got = facts({**LLAMA, "architectures": architectures})
    assert got.parameter_count is None
    assert got.kv_cache_bytes_per_token == 131_072


def test_the_bare_model_has_no_lm_head() -> None:
    # LlamaModel (embedding models built on Llama): 8,030,261,248 - 525,336,576 lm_head.
    assert facts({**LLAMA, "architectures": ["LlamaModel"]}).parameter_count == 7_504_924_672


def test_a_config_claiming_absurd_sizes_gives_no_facts_beyond_the_bounds() -> None:
    huge = {**LLAMA, "num_hidden_layers": 2**31 - 1, "vocab_size": 2**31 - 1, "hidden_size": 2**30}
    got = facts(huge)
    # head_dim 2**30 / 32 = 2**25 is consistent, but the products exceed 2**53: absent, not a
    # number JSON clients would corrupt.
    assert got.head_dim == 2**25
    assert (got.parameter_count, got.kv_cache_bytes_per_token) == (None, None)
    assert got.layers == 2**31 - 1
    # Beyond int32 a config value is garbage.
    assert facts({**LLAMA, "num_hidden_layers": 2**31}).layers is None
