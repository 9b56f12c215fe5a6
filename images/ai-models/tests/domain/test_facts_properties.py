"""Property-based: for any input, `derive_facts` returns, and every fact it states is consistent.

Configs are built from adversarial JSON (nested garbage, NaN/inf, huge and negative numbers,
wrong types under every key the module reads, `text_config` pointing back at its parent) and
from plausibly shaped values, so that both the rejection paths and the arithmetic are reached.
Runs are bounded (200 examples, no deadline) to keep the suite fast.
"""

from __future__ import annotations

import math
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ai_models.domain.catalog.facts import FactSources, derive_facts
from ai_models.domain.catalog.record import AttentionKind, ResourceFacts, WeightsFormat

BOUNDED = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX_FACT = 2**53 - 1
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")

# The config keys the module reads, so that garbage lands where it hurts.
KNOWN_KEYS = (
    "architectures",
    "model_type",
    "hidden_size",
    "n_embd",
    "d_model",
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "num_attention_heads",
    "n_head",
    "num_key_value_heads",
    "num_kv_heads",
    "multi_query",
    "head_dim",
    "vocab_size",
    "intermediate_size",
    "n_inner",
    "max_position_embeddings",
    "n_positions",
    "seq_length",
    "max_seq_len",
    "torch_dtype",
    "dtype",
    "tie_word_embeddings",
    "attention_bias",
    "mlp_bias",
    "type_vocab_size",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "n_routed_experts",
    "num_local_experts",
    "num_experts",
    "num_experts_per_tok",
    "experts_per_token",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "decoder_sparse_step",
    "mlp_only_layers",
    "n_shared_experts",
    "first_k_dense_replace",
    "moe_layer_freq",
    "topk_method",
    "layer_types",
    "sliding_window",
    "use_sliding_window",
    "sliding_window_pattern",
    "max_window_layers",
    "attn_layer_period",
    "attn_layer_offset",
    "full_attention_interval",
    "hybrid_override_pattern",
    "attention_chunk_size",
    "is_decoder",
    "is_encoder_decoder",
    "quantization_config",
    "compression_config",
    "quant_method",
    "load_in_4bit",
    "format",
    "config_groups",
    "text_config",
    "llm_config",
    "language_config",
    "vision_config",
)
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
ENCODER_FAMILIES = ("bert", "roberta", "xlm-roberta", "distilbert", "deberta-v2", "modernbert")
FAMILIES = (
    *ENCODER_FAMILIES,
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3_moe",
    "qwen2_moe",
    "gemma2",
    "gemma3_text",
    "deepseek_v2",
    "deepseek_v3",
    "gpt2",
    "jamba",
)
WORDS = (
    *FAMILIES,
    "LlamaForCausalLM",
    "BertForMaskedLM",
    "GPT2LMHeadModel",
    "BertModel",
    "full_attention",
    "sliding_attention",
    "linear_attention",
    "mamba",
    "bfloat16",
    "float16",
    "float32",
    "float8_e4m3fn",
    "awq",
    "gptq",
    "mxfp4",
    "noaux_tc",
    "pack-quantized",
    "M-M*-",
    "",
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-3, max_value=300)
    | st.integers()
    | st.sampled_from([2**31 - 1, 2**31, 2**53, 2**64, -(2**63), 10**400])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([math.nan, math.inf, -math.inf, 4096.0, -0.0])
    | st.text(max_size=12)
    | st.sampled_from(WORDS)
)
keys = st.sampled_from(KNOWN_KEYS) | st.text(max_size=10)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(keys, children, max_size=6),
    max_leaves=25,
)

# Plausibly shaped values: right types, small ranges, known words; the arithmetic gets exercised.
plausible = (
    st.integers(min_value=0, max_value=64)
    | st.sampled_from([128, 256, 512, 1024, 4096, 32000, 131072])
    | st.booleans()
    | st.sampled_from(WORDS)
    | st.lists(st.sampled_from(["full_attention", "sliding_attention", "linear_attention"]), max_size=8)
    | st.lists(st.integers(min_value=0, max_value=8), max_size=4)
    | st.lists(st.sampled_from(WORDS), min_size=1, max_size=2)
)
ARCHITECTURES = (
    "LlamaForCausalLM",
    "LlamaModel",
    "BertForMaskedLM",
    "BertModel",
    "GPT2LMHeadModel",
    "MixtralForCausalLM",
    "DeepseekV3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "LlamaForSequenceClassification",
)


@st.composite
def shaped_configs(draw: st.DrawFn) -> dict[str, Any]:
    """A decoder or encoder config with mostly consistent dimensions, then up to six known keys
    overwritten with plausibly typed values, and sometimes moved under text_config."""
    heads = draw(st.sampled_from([1, 2, 4, 8, 12, 16, 32]))
    head_dim = draw(st.sampled_from([16, 64, 128]))
    config: dict[str, Any] = {
        "architectures": [draw(st.sampled_from(ARCHITECTURES))],
        "model_type": draw(st.sampled_from(FAMILIES)),
        "hidden_size": heads * head_dim,
        "num_attention_heads": heads,
        "num_key_value_heads": draw(st.sampled_from([1, 2, 3, 4, 8, heads])),
        "num_hidden_layers": draw(st.integers(min_value=1, max_value=64)),
        "intermediate_size": draw(st.integers(min_value=1, max_value=1024)),
        "vocab_size": draw(st.integers(min_value=1, max_value=5000)),
        "max_position_embeddings": draw(st.sampled_from([512, 4096, 131072])),
        "torch_dtype": draw(st.sampled_from(["bfloat16", "float32", "float16", "float8_e4m3fn"])),
    }
    config.update(draw(st.dictionaries(st.sampled_from(KNOWN_KEYS), plausible, max_size=6)))
    if draw(st.booleans()):
        return {"architectures": config["architectures"], "text_config": config, "vision_config": {}}
    return config


@st.composite
def configs(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> dict[Any, Any]:
    config: dict[Any, Any] = draw(st.dictionaries(keys, values, max_size=24))
    nested = draw(st.sampled_from(["none", "garbage", "loop", "inner"]))
    if nested == "loop":
        config["text_config"] = config  # a Python-level loop: no JSON has it, nothing may recurse on it
    elif nested == "garbage":
        config["text_config"] = draw(json_values)
    elif nested == "inner":
        config["text_config"] = draw(st.dictionaries(keys, values, max_size=24))
    return config


any_sources = st.builds(
    FactSources,
    config=st.none() | configs(json_values) | json_values,
    safetensors_parameters=st.none()
    | json_values
    | st.dictionaries(st.text(max_size=8) | st.sampled_from(["BF16", "F32", "I32", "F4"]), scalars),
    safetensors_total=scalars,
    gguf=st.none()
    | json_values
    | st.dictionaries(st.sampled_from(["total", "architecture", "context_length"]), scalars),
    tags=st.lists(st.text(max_size=8) | st.sampled_from(["gguf", "diffusers"]), max_size=4) | json_values,
    library_name=st.none() | st.sampled_from(["gguf", "diffusers", "transformers"]) | json_values,
    filenames=st.none()
    | st.lists(
        st.text(max_size=20) | st.sampled_from(["model_index.json", "m.safetensors", "a-Q4_K_M.gguf"]),
        max_size=5,
    )
    | json_values,
)


def language_config(config: object) -> dict[Any, Any]:
    if not isinstance(config, dict):
        return {}
    for key in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(key), dict):
            return config[key]  # type: ignore[no-any-return]
    return config


def stated_heads(lm: dict[Any, Any]) -> int | None:
    for key in HEAD_KEYS:
        value = lm.get(key)
        if value is not None:
            return value if type(value) is int else None
    return None


def is_encoder(config: object, got: ResourceFacts) -> bool:
    if not isinstance(config, dict):
        return False
    lm = language_config(config)
    if lm.get("is_decoder") is True or config.get("is_encoder_decoder") is True:
        return False
    return got.family in ENCODER_FAMILIES or config.get("model_type") in ENCODER_FAMILIES


def assert_invariants(got: ResourceFacts, sources: FactSources) -> None:
    for field in (
        "parameter_count",
        "context_length",
        "weights_bytes",
        "layers",
        "kv_heads",
        "head_dim",
        "experts",
        "active_experts",
    ):
        value = getattr(got, field)
        # Present means a positive, JSON-safe integer: never 0-as-unknown, never a bool.
        assert value is None or (type(value) is int and 0 < value <= MAX_FACT), (field, value)
    kv = got.kv_cache_bytes_per_token
    # A derived zero is allowed here (every layer windowed); anything else positive and bounded.
    assert kv is None or (type(kv) is int and 0 <= kv <= MAX_FACT)
    for text in (got.architecture, got.family, got.quantization, got.dtype):
        assert text is None or NAME.fullmatch(text)
    assert got.format is None or isinstance(got.format, WeightsFormat)

    lm = language_config(sources.config)
    heads = stated_heads(lm)
    if got.attention is AttentionKind.MLA:
        assert got.kv_heads == 1
    elif got.attention is not None:
        assert got.kv_heads is not None
        assert heads is not None
        assert got.kv_heads <= heads
        assert heads % got.kv_heads == 0
        assert (got.attention is AttentionKind.MHA) == (got.kv_heads == heads)
        assert (got.attention is AttentionKind.MQA) == (got.kv_heads == 1 < heads)
    if got.kv_heads is not None and got.attention is not AttentionKind.MLA:
        # A KV head count is only stated when checked against a valid query-head count.
        assert heads is not None
        assert got.kv_heads <= heads

    if kv is not None:
        assert got.attention is not None
        assert got.layers is not None
        assert got.kv_heads is not None
        assert got.head_dim is not None
        per_layer = (1 if got.attention is AttentionKind.MLA else 2) * got.kv_heads * got.head_dim
        # Whole layers at a whole number of bytes per element, at most 8 (F64), at most every layer.
        assert kv % per_layer == 0
        assert kv <= per_layer * 8 * got.layers
        assert not is_encoder(sources.config, got)

    if got.active_experts is not None:
        assert got.experts is not None
        assert got.active_experts <= got.experts
    if got.dtype is not None or got.weights_bytes is not None:
        assert got.format is not WeightsFormat.GGUF
        assert isinstance(sources.safetensors_parameters, dict)


@BOUNDED
@given(sources=any_sources)
def test_adversarial_sources_never_raise_and_stated_facts_hold(sources: FactSources) -> None:
    assert_invariants(derive_facts(sources), sources)


@BOUNDED
@given(
    config=shaped_configs() | configs(plausible),
    total=st.none() | st.integers(min_value=-1, max_value=2**54),
)
def test_plausibly_shaped_configs_keep_every_invariant(config: dict[Any, Any], total: int | None) -> None:
    sources = FactSources(config=config, safetensors_total=total)
    got = derive_facts(sources)
    assert_invariants(got, sources)
    if got.family in ENCODER_FAMILIES and language_config(config).get("is_decoder") is not True:
        assert got.kv_cache_bytes_per_token is None


# A valid decoder config (Llama-3.1-8B's shape) whose every known key may be replaced by garbage.
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


@BOUNDED
@given(garbage=st.dictionaries(st.sampled_from(KNOWN_KEYS), json_values, min_size=1, max_size=8))
def test_wrong_types_under_known_keys_never_raise(garbage: dict[str, Any]) -> None:
    sources = FactSources(config={**LLAMA, **garbage}, safetensors_parameters={"BF16": 8_030_261_248})
    got = derive_facts(sources)
    assert_invariants(got, sources)
    # Facts whose keys were left alone survive the garbage next to them.
    if not {"num_hidden_layers", "text_config", "llm_config", "language_config"} & garbage.keys():
        assert got.layers == 32
    assert got.dtype == "BF16"
