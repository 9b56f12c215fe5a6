"""Resource facts of real models, from their public config.json values, computed by hand.

Every expected number is worked out step by step in the comments from the config written in the
test. Parameter counts estimated from a config are asserted EXACTLY against that hand
computation (the formula of `architectures.estimate_parameters`); against the figure the model's
authors publish, we allow 1%: published figures are rounded ("110M", "46.7B", "671B") and may
count heads or buffers differently, and 1% is far below the spread between model sizes a user
picks from. Where the hand computation matches the Hub's exact safetensors count, the comment
says so.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_models.domain.catalog.facts import FactSources, derive_facts
from ai_models.domain.catalog.record import AttentionKind, ResourceFacts, WeightsFormat


def facts(config: dict[str, Any], **sources: Any) -> ResourceFacts:
    return derive_facts(FactSources(config=config, **sources))


def within_one_percent(estimate: int | None, published: float) -> bool:
    return estimate is not None and abs(estimate - published) <= 0.01 * published


# --- configs, as published (keys that do not affect the facts are left out) ---------------------

LLAMA_3_1_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 8.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}

LLAMA_2_7B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "max_position_embeddings": 4096,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "vocab_size": 32000,
}

GPT2: dict[str, Any] = {
    "activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"],
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2",
    "n_ctx": 1024,
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 1024,
    "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
    "vocab_size": 50257,
}

MISTRAL_7B_V0_1: dict[str, Any] = {
    "architectures": ["MistralForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mistral",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "sliding_window": 4096,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 32000,
}

MIXTRAL_8X7B: dict[str, Any] = {
    "architectures": ["MixtralForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mixtral",
    "num_attention_heads": 32,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 32000,
}

QWEN3_30B_A3B: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "attention_bias": False,
    "decoder_sparse_step": 1,
    "head_dim": 128,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "max_position_embeddings": 40960,
    "max_window_layers": 48,
    "mlp_only_layers": [],
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 768,
    "norm_topk_prob": True,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_sliding_window": False,
    "vocab_size": 151936,
}

QWEN1_5_MOE_A2_7B: dict[str, Any] = {
    "architectures": ["Qwen2MoeForCausalLM"],
    "decoder_sparse_step": 1,
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "max_position_embeddings": 8192,
    "max_window_layers": 21,
    "model_type": "qwen2_moe",
    "moe_intermediate_size": 1408,
    "num_attention_heads": 16,
    "num_experts": 60,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "num_key_value_heads": 16,
    "shared_expert_intermediate_size": 5632,
    "sliding_window": 32768,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_sliding_window": False,
    "vocab_size": 151936,
}

DEEPSEEK_V2_LITE: dict[str, Any] = {
    "architectures": ["DeepseekV2ForCausalLM"],
    "attention_bias": False,
    "first_k_dense_replace": 1,
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v2",
    "moe_intermediate_size": 1408,
    "moe_layer_freq": 1,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_attention_heads": 16,
    "num_experts_per_tok": 6,
    "num_hidden_layers": 27,
    "num_key_value_heads": 16,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "tie_word_embeddings": False,
    "topk_method": "greedy",
    "torch_dtype": "bfloat16",
    "v_head_dim": 128,
    "vocab_size": 102400,
}

DEEPSEEK_V3: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "attention_bias": False,
    "first_k_dense_replace": 3,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
    "tie_word_embeddings": False,
    "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16",
    "v_head_dim": 128,
    "vocab_size": 129280,
}

GEMMA_2_9B: dict[str, Any] = {
    "architectures": ["Gemma2ForCausalLM"],
    "attention_bias": False,
    "cache_implementation": "hybrid",
    "head_dim": 256,
    "hidden_size": 3584,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "gemma2",
    "num_attention_heads": 16,
    "num_hidden_layers": 42,
    "num_key_value_heads": 8,
    "query_pre_attn_scalar": 256,
    "sliding_window": 4096,
    "sliding_window_size": 4096,
    "torch_dtype": "float32",
    "vocab_size": 256000,
}

GEMMA_3_1B: dict[str, Any] = {
    "architectures": ["Gemma3ForCausalLM"],
    "attention_bias": False,
    "cache_implementation": "hybrid",
    "head_dim": 256,
    "hidden_size": 1152,
    "intermediate_size": 6912,
    "max_position_embeddings": 32768,
    "model_type": "gemma3_text",
    "num_attention_heads": 4,
    "num_hidden_layers": 26,
    "num_key_value_heads": 1,
    "query_pre_attn_scalar": 256,
    "sliding_window": 512,
    "sliding_window_pattern": 6,
    "torch_dtype": "bfloat16",
    "vocab_size": 262144,
}

# Multimodal: the language model lives in text_config, which states no dtype and no context length.
GEMMA_3_27B_IT: dict[str, Any] = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {
        "head_dim": 128,
        "hidden_size": 5376,
        "intermediate_size": 21504,
        "model_type": "gemma3_text",
        "num_attention_heads": 32,
        "num_hidden_layers": 62,
        "num_key_value_heads": 16,
        "query_pre_attn_scalar": 168,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": 1024,
    },
    "torch_dtype": "bfloat16",
    "vision_config": {
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "model_type": "siglip_vision_model",
        "num_attention_heads": 16,
        "num_hidden_layers": 27,
    },
}

# Multimodal MoE whose text_config mixes Gated-DeltaNet (linear attention) and full-attention
# layers, and names its dtype `dtype` (newer transformers) rather than `torch_dtype`.
QWEN3_5_35B_A3B: dict[str, Any] = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "model_type": "qwen3_5_moe",
    "text_config": {
        "dtype": "bfloat16",
        "full_attention_interval": 4,
        "head_dim": 256,
        "hidden_size": 2048,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 10,
        "max_position_embeddings": 262144,
        "model_type": "qwen3_5_moe_text",
        "moe_intermediate_size": 512,
        "num_attention_heads": 16,
        "num_experts": 256,
        "num_experts_per_tok": 8,
        "num_hidden_layers": 40,
        "num_key_value_heads": 2,
        "shared_expert_intermediate_size": 512,
        "vocab_size": 248320,
    },
    "tie_word_embeddings": False,
    "vision_config": {"depth": 27, "hidden_size": 1152, "model_type": "qwen3_5_moe"},
}

# Flat multimodal config: language keys at the top, a vision tower beside them.
QWEN2_5_VL_7B: dict[str, Any] = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "max_position_embeddings": 128000,
    "max_window_layers": 28,
    "model_type": "qwen2_5_vl",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "sliding_window": 32768,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_sliding_window": False,
    "vision_config": {"depth": 32, "hidden_size": 1280, "out_hidden_size": 3584},
    "vocab_size": 152064,
}

LLAMA_4_SCOUT: dict[str, Any] = {
    "architectures": ["Llama4ForConditionalGeneration"],
    "model_type": "llama4",
    "text_config": {
        "attention_chunk_size": 8192,
        "head_dim": 128,
        "hidden_size": 5120,
        "interleave_moe_layer_step": 1,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "max_position_embeddings": 10485760,
        "model_type": "llama4_text",
        "no_rope_layers": [],
        "num_attention_heads": 40,
        "num_experts_per_tok": 1,
        "num_hidden_layers": 48,
        "num_key_value_heads": 8,
        "num_local_experts": 16,
        "torch_dtype": "bfloat16",
        "vocab_size": 202048,
    },
    "torch_dtype": "bfloat16",
    "vision_config": {"hidden_size": 1408, "model_type": "llama4_vision_model"},
}

JAMBA_V0_1: dict[str, Any] = {
    "architectures": ["JambaForCausalLM"],
    "attn_layer_offset": 4,
    "attn_layer_period": 8,
    "expert_layer_offset": 1,
    "expert_layer_period": 2,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "mamba_d_conv": 4,
    "mamba_d_state": 16,
    "mamba_dt_rank": 256,
    "mamba_expand": 2,
    "max_position_embeddings": 262144,
    "model_type": "jamba",
    "num_attention_heads": 32,
    "num_experts": 16,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 65536,
}

GPT_OSS_20B: dict[str, Any] = {
    "architectures": ["GptOssForCausalLM"],
    "attention_bias": True,
    "experts_per_token": 4,
    "head_dim": 64,
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 12,
    "max_position_embeddings": 131072,
    "model_type": "gpt_oss",
    "num_attention_heads": 64,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "num_key_value_heads": 8,
    "num_local_experts": 32,
    "quantization_config": {
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.embed_tokens", "lm_head"],
        "quant_method": "mxfp4",
    },
    "sliding_window": 128,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 201088,
}

PHI_3_MINI_128K: dict[str, Any] = {
    "architectures": ["Phi3ForCausalLM"],
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "max_position_embeddings": 131072,
    "model_type": "phi3",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096,
    "rope_scaling": {"long_factor": [1.07, 1.12], "short_factor": [1.1, 1.1], "type": "longrope"},
    "sliding_window": 262144,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 32064,
}

FALCON_7B: dict[str, Any] = {
    "alibi": False,
    "architectures": ["FalconForCausalLM"],
    "bias": False,
    "hidden_size": 4544,
    "model_type": "falcon",
    "multi_query": True,
    "new_decoder_architecture": False,
    "num_attention_heads": 71,
    "num_hidden_layers": 32,
    "parallel_attn": True,
    "torch_dtype": "bfloat16",
    "vocab_size": 65024,
}

BERT_BASE_UNCASED: dict[str, Any] = {
    "architectures": ["BertForMaskedLM"],
    "hidden_act": "gelu",
    "hidden_size": 768,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "type_vocab_size": 2,
    "use_cache": True,
    "vocab_size": 30522,
}


# --- GQA, MHA and MQA decoders ----------------------------------------------------------------


def test_llama_3_1_8b_gqa() -> None:
    got = facts(LLAMA_3_1_8B)
    # Parameters (Llama: RMSNorm = weight only, SwiGLU MLP = gate+up+down, untied lm_head):
    #   embed_tokens            128256 x 4096                          =   525,336,576
    #   lm_head (untied)        128256 x 4096                          =   525,336,576
    #   per layer: q 4096x4096 = 16,777,216; k, v 4096x(8x128) = 4,194,304 each; o 16,777,216
    #              -> attention 41,943,040
    #              MLP 3 x 4096 x 14336 = 176,160,768; two norms 2 x 4096 = 8,192
    #              -> 218,112,000 per layer, x 32 layers                = 6,979,584,000
    #   final norm                                                      =         4,096
    #   total                                                           = 8,030,261,248
    # The Hub's exact safetensors count for meta-llama/Llama-3.1-8B is the same 8,030,261,248.
    assert got.parameter_count == 8_030_261_248
    assert within_one_percent(got.parameter_count, 8.03e9)
    # KV: 2 (K, V) x 8 kv heads x 128 head_dim x 2 bytes (bf16) x 32 layers = 131,072 B/token.
    assert got.kv_cache_bytes_per_token == 131_072
    assert (got.attention, got.layers, got.kv_heads, got.head_dim) == (AttentionKind.GQA, 32, 8, 128)
    # max_position_embeddings already states the rope-extended length; rope_scaling adds nothing.
    assert got.context_length == 131_072
    assert (got.architecture, got.family) == ("LlamaForCausalLM", "llama")
    assert got.experts is None
    assert got.active_experts is None
    assert got.quantization is None
    # No safetensors listing and no files: format, dtype and bytes are not known.
    assert (got.format, got.dtype, got.weights_bytes) == (None, None, None)


def test_llama_2_7b_mha() -> None:
    got = facts(LLAMA_2_7B)
    # Parameters:
    #   embed + untied lm_head  2 x 32000 x 4096                       =   262,144,000
    #   per layer: attention 4 x 4096 x 4096 (32 kv heads = MHA)       =    67,108,864
    #              MLP 3 x 4096 x 11008                                =   135,266,304
    #              norms 2 x 4096                                      =         8,192
    #              -> 202,383,360, x 32                                = 6,476,267,520
    #   final norm                                                     =         4,096
    #   total                                                          = 6,738,415,616 ("6.74B" on the Hub)
    assert got.parameter_count == 6_738_415_616
    assert within_one_percent(got.parameter_count, 6.74e9)
    # KV: 2 x 32 x 128 x 2 bytes (fp16) x 32 layers = 524,288 B/token.
    assert got.kv_cache_bytes_per_token == 524_288
    assert (got.attention, got.kv_heads, got.head_dim) == (AttentionKind.MHA, 32, 128)
    assert got.context_length == 4096


def test_gpt2_layernorm_biases_and_learned_positions() -> None:
    got = facts(GPT2)
    # GPT-2: LayerNorm (weight + bias), a bias on every linear layer, learned positions, lm_head
    # tied to wte, n_inner null -> 4 x 768 = 3072.
    #   wte 50257 x 768 = 38,597,376; wpe 1024 x 768 = 786,432
    #   per layer: ln_1 1,536; c_attn 768 x 2304 + 2304 = 1,771,776; c_proj 768 x 768 + 768 = 590,592
    #              ln_2 1,536; c_fc 768 x 3072 + 3072 = 2,362,368; c_proj 3072 x 768 + 768 = 2,360,064
    #              -> 7,087,872, x 12 = 85,054,464
    #   ln_f 1,536
    #   total 124,439,808 ("124M")
    assert got.parameter_count == 124_439_808
    assert within_one_percent(got.parameter_count, 124e6)
    assert (got.attention, got.layers, got.kv_heads, got.head_dim) == (AttentionKind.MHA, 12, 12, 64)
    assert got.context_length == 1024
    # The config names no torch_dtype, so the bytes per KV element are unknown.
    assert got.kv_cache_bytes_per_token is None


def test_gemma_3_1b_mqa_with_explicit_sliding_pattern() -> None:
    got = facts(GEMMA_3_1B)
    # Parameters (Gemma 3: tied embeddings, four norms per layer, q_norm and k_norm over head_dim):
    #   embed 262144 x 1152 = 301,989,888 (no lm_head: tied)
    #   per layer: q 1152 x (4x256) = 1,179,648; k, v 1152 x 256 = 294,912 each; o 1,179,648
    #              q_norm + k_norm 2 x 256 = 512 -> attention 2,949,632
    #              MLP 3 x 1152 x 6912 = 23,887,872; norms 4 x 1152 = 4,608
    #              -> 26,842,112, x 26 = 697,894,912
    #   final norm 1,152
    #   total 999,885,952 ("1B")
    assert got.parameter_count == 999_885_952
    assert within_one_percent(got.parameter_count, 1.0e9)
    # One KV head for four query heads: MQA.
    assert (got.attention, got.kv_heads, got.head_dim) == (AttentionKind.MQA, 1, 256)
    # sliding_window_pattern 6: layers 5, 11, 17, 23 are global (26 // 6 = 4), the rest keep 512.
    # KV: 2 x 1 x 256 x 2 bytes x 4 global layers = 4,096 B/token.
    assert got.kv_cache_bytes_per_token == 4096


def test_falcon_multi_query_flag() -> None:
    got = facts(FALCON_7B)
    # multi_query: true -> one KV head; head_dim 4544 / 71 = 64.
    # KV: 2 x 1 x 64 x 2 bytes x 32 layers = 8,192 B/token.
    assert (got.attention, got.kv_heads, got.head_dim) == (AttentionKind.MQA, 1, 64)
    assert got.kv_cache_bytes_per_token == 8192
    # Falcon's layout is not written down, and its config states no context length.
    assert got.parameter_count is None
    assert got.context_length is None


# --- sliding windows ---------------------------------------------------------------------------


def test_mistral_7b_window_on_every_layer_grows_nothing_per_token() -> None:
    got = facts(MISTRAL_7B_V0_1)
    # Parameters: as Llama-3.1-8B's layers with a 32000 vocabulary:
    #   2 x 32000 x 4096 = 262,144,000; 218,112,000 x 32 = 6,979,584,000; final norm 4,096
    #   total 7,241,732,096 ("7.24B")
    assert got.parameter_count == 7_241_732_096
    assert within_one_percent(got.parameter_count, 7.24e9)
    # sliding_window 4096 < 32768 positions and no global layers: every layer keeps a fixed
    # 4096-token window, so no layer's cache grows with the context: 0 B/token (a derived zero).
    assert got.kv_cache_bytes_per_token == 0
    assert got.attention is AttentionKind.GQA


def test_phi_3_window_covering_the_whole_context_does_not_bind() -> None:
    got = facts(PHI_3_MINI_128K)
    # sliding_window 262144 >= 131072 positions: every layer grows.
    # KV: 2 x 32 x 96 (3072 / 32) x 2 bytes x 32 layers = 393,216 B/token.
    assert got.kv_cache_bytes_per_token == 393_216
    # Parameters: 2 x 32064 x 3072 = 197,001,216; per layer 4 x 3072^2 = 37,748,736 +
    # 3 x 3072 x 8192 = 75,497,472 + 6,144 = 113,252,352, x 32 = 3,624,075,264; + 3,072
    # total 3,821,079,552 ("3.8B")
    assert got.parameter_count == 3_821_079_552
    assert within_one_percent(got.parameter_count, 3.8e9)


def test_gemma_2_9b_counts_only_global_layers() -> None:
    got = facts(GEMMA_2_9B)
    # Gemma 2 alternates sliding (even) and global (odd) layers: 42 // 2 = 21 global layers; the
    # 4096-token window binds because the context is 8192.
    # KV: 2 x 8 x 256 x 4 bytes (this base checkpoint's torch_dtype is float32) x 21 = 344,064 B/token.
    assert got.kv_cache_bytes_per_token == 344_064
    # Parameters (tied, four norms per layer):
    #   embed 256000 x 3584 = 917,504,000
    #   per layer: q 3584 x 4096 = 14,680,064; k, v 3584 x 2048 = 7,340,032 each; o 14,680,064
    #              -> 44,040,192; MLP 3 x 3584 x 14336 = 154,140,672; norms 4 x 3584 = 14,336
    #              -> 198,195,200, x 42 = 8,324,198,400
    #   final norm 3,584
    #   total 9,241,705,984 ("9.24B")
    assert got.parameter_count == 9_241_705_984
    assert within_one_percent(got.parameter_count, 9.24e9)
    assert (got.attention, got.head_dim, got.context_length) == (AttentionKind.GQA, 256, 8192)


# --- multimodal configs: the language model's facts come from text_config ----------------------


def test_gemma_3_27b_multimodal_text_config() -> None:
    got = facts(GEMMA_3_27B_IT)
    assert got.architecture == "Gemma3ForConditionalGeneration"
    assert got.family == "gemma3_text"
    assert (got.layers, got.kv_heads, got.head_dim, got.attention) == (62, 16, 128, AttentionKind.GQA)
    # Gemma 3 keeps one global layer in six (the family default, not restated here): 62 // 6 = 10.
    # dtype only at the top level: bf16.
    # KV: 2 x 16 x 128 x 2 bytes x 10 = 81,920 B/token.
    assert got.kv_cache_bytes_per_token == 81_920
    # Neither text_config nor the top level states max_position_embeddings: absent, not guessed.
    assert got.context_length is None
    # The vision tower is not described well enough to count: absent without a listing.
    assert got.parameter_count is None
    assert facts(GEMMA_3_27B_IT, safetensors_total=27_000_000_001).parameter_count == 27_000_000_001


def test_qwen3_5_moe_linear_attention_hybrid_in_text_config() -> None:
    got = facts(QWEN3_5_35B_A3B)
    assert got.family == "qwen3_5_moe_text"
    # layer_types: 30 linear_attention (fixed state) + 10 full_attention layers.
    # KV: 2 x 2 kv heads x 256 x 2 bytes (text_config `dtype`: bfloat16) x 10 = 20,480 B/token.
    assert got.kv_cache_bytes_per_token == 20_480
    assert (got.attention, got.kv_heads, got.head_dim, got.layers) == (AttentionKind.GQA, 2, 256, 40)
    assert (got.experts, got.active_experts, got.context_length) == (256, 8, 262_144)
    assert got.parameter_count is None


def test_qwen2_5_vl_flat_multimodal_with_an_inert_window() -> None:
    got = facts(QWEN2_5_VL_7B)
    # use_sliding_window: false, so all 28 layers grow.
    # KV: 2 x 4 x 128 (3584 / 28) x 2 bytes x 28 = 57,344 B/token.
    assert got.kv_cache_bytes_per_token == 57_344
    assert got.context_length == 128_000
    # A vision tower beside the language keys: no config estimate.
    assert got.parameter_count is None


def test_llama_4_chunked_attention_without_layer_types_has_no_kv_figure() -> None:
    got = facts(LLAMA_4_SCOUT)
    # attention_chunk_size without `layer_types`: which layers are chunk-local is not stated in a
    # form written down here, so bytes per token are absent rather than a 4x overestimate.
    assert got.kv_cache_bytes_per_token is None
    assert (got.attention, got.kv_heads, got.head_dim, got.layers) == (AttentionKind.GQA, 8, 128, 48)
    assert (got.experts, got.active_experts) == (16, 1)
    assert got.context_length == 10_485_760


# --- mixture of experts ------------------------------------------------------------------------


def test_mixtral_8x7b_moe() -> None:
    got = facts(MIXTRAL_8X7B)
    # Parameters:
    #   embed + untied lm_head 2 x 32000 x 4096                        =    262,144,000
    #   per layer: attention as Llama-3.1-8B                          =     41,943,040
    #              8 experts x 3 x 4096 x 14336 = 8 x 176,160,768     =  1,409,286,144
    #              router 4096 x 8                                     =         32,768
    #              norms 2 x 4096                                      =          8,192
    #              -> 1,451,270,144, x 32                              = 46,440,644,608
    #   final norm                                                     =          4,096
    #   total                                                          = 46,702,792,704 ("46.7B")
    assert got.parameter_count == 46_702_792_704
    assert within_one_percent(got.parameter_count, 46.7e9)
    assert (got.experts, got.active_experts) == (8, 2)
    # KV as Llama-3.1-8B (sliding_window null): 2 x 8 x 128 x 2 x 32 = 131,072.
    assert got.kv_cache_bytes_per_token == 131_072


def test_qwen3_30b_a3b_moe_with_explicit_head_dim() -> None:
    got = facts(QWEN3_30B_A3B)
    # head_dim 128 is explicit, though hidden/heads = 2048/32 = 64.
    # Parameters:
    #   embed + lm_head 2 x 151936 x 2048                              =    622,329,856
    #   per layer: q 2048 x 4096 = 8,388,608; k, v 2048 x 512 = 1,048,576 each; o 8,388,608
    #              q_norm + k_norm 256 -> 18,874,624
    #              128 experts x 3 x 2048 x 768 = 603,979,776; router 2048 x 128 = 262,144
    #              norms 4,096 -> 623,120,640, x 48                    = 29,909,790,720
    #   final norm                                                     =          2,048
    #   total                                                          = 30,532,122,624 ("30.5B")
    assert got.parameter_count == 30_532_122_624
    assert within_one_percent(got.parameter_count, 30.5e9)
    assert (got.head_dim, got.kv_heads, got.experts, got.active_experts) == (128, 4, 128, 8)
    # KV: 2 x 4 x 128 x 2 x 48 = 98,304 B/token (use_sliding_window false).
    assert got.kv_cache_bytes_per_token == 98_304


def test_qwen1_5_moe_shared_expert_and_qkv_biases() -> None:
    got = facts(QWEN1_5_MOE_A2_7B)
    # Parameters (Qwen2-MoE: biases on q, k, v; a shared expert with a one-logit gate):
    #   embed + lm_head 2 x 151936 x 2048                              =    622,329,856
    #   per layer: attention 4 x 2048 x 2048 = 16,777,216 + q/k/v biases 3 x 2048 = 16,783,360
    #              60 experts x 3 x 2048 x 1408 = 519,045,120; router 2048 x 60 = 122,880
    #              shared expert 3 x 2048 x 5632 = 34,603,008 + gate 2048 = 34,605,056
    #              norms 4,096 -> 570,560,512, x 24                    = 13,693,452,288
    #   final norm                                                     =          2,048
    #   total                                                          = 14,315,784,192 ("14.3B")
    assert got.parameter_count == 14_315_784_192
    assert within_one_percent(got.parameter_count, 14.3e9)
    assert (got.experts, got.active_experts, got.attention) == (60, 4, AttentionKind.MHA)
    # use_sliding_window false: all 24 layers grow. KV: 2 x 16 x 128 x 2 x 24 = 196,608 B/token.
    assert got.kv_cache_bytes_per_token == 196_608


# --- multi-head latent attention --------------------------------------------------------------


def test_deepseek_v2_lite_mla() -> None:
    got = facts(DEEPSEEK_V2_LITE)
    # MLA per layer (q_lora_rank null: one query projection):
    #   q_proj 2048 x 16 x (128 + 64) = 6,291,456
    #   kv_a_proj_with_mqa 2048 x (512 + 64) = 1,179,648; kv_a_layernorm 512
    #   kv_b_proj 512 x 16 x (128 + 128) = 2,097,152; o_proj 16 x 128 x 2048 = 4,194,304
    #   -> 13,763,072; with two norms (4,096): 13,767,168, x 27 = 371,713,536
    # MLP: layer 0 dense (first_k_dense_replace 1): 3 x 2048 x 10944 = 67,239,936
    #      26 MoE layers: 64 x 3 x 2048 x 1408 = 553,648,128 routed
    #                     + 2 shared x 3 x 2048 x 1408 = 17,301,504 + router 2048 x 64 = 131,072
    #                     = 571,080,704, x 26 = 14,848,098,304
    # embed + lm_head 2 x 102400 x 2048 = 419,430,400; final norm 2,048
    # total 15,706,484,224 -- the Hub's exact safetensors count for DeepSeek-V2-Lite ("15.7B").
    assert got.parameter_count == 15_706_484_224
    assert within_one_percent(got.parameter_count, 15.7e9)
    # One latent of kv_lora_rank + qk_rope_head_dim = 576 per token per layer, not K and V:
    # KV: 576 x 2 bytes x 27 = 31,104 B/token (the naive GQA formula would say 2 x 16 x 192 x 2 x 27).
    assert (got.attention, got.kv_heads, got.head_dim) == (AttentionKind.MLA, 1, 576)
    assert got.kv_cache_bytes_per_token == 31_104
    assert (got.experts, got.active_experts, got.context_length) == (64, 6, 163_840)


def test_deepseek_v3_mla_fp8() -> None:
    got = facts(DEEPSEEK_V3)
    # KV: (512 + 64) x 2 bytes x 61 layers = 70,272 B/token, though num_key_value_heads says 128.
    assert got.kv_cache_bytes_per_token == 70_272
    assert got.attention is AttentionKind.MLA
    assert got.quantization == "fp8"
    assert (got.experts, got.active_experts) == (256, 8)
    # Parameters of the main model (the MTP layer of num_nextn_predict_layers is not loaded):
    #   MLA per layer with q_lora_rank 1536:
    #     q_a 7168 x 1536 = 11,010,048; q_a_layernorm 1,536; q_b 1536 x 128 x 192 = 37,748,736
    #     kv_a 7168 x 576 = 4,128,768; kv_a_layernorm 512; kv_b 512 x 128 x 256 = 16,777,216
    #     o 128 x 128 x 7168 = 117,440,512 -> 187,107,328; + norms 14,336 = 187,121,664
    #     x 61 = 11,414,421,504
    #   3 dense layers 3 x (3 x 7168 x 18432) = 3 x 396,361,728 = 1,189,085,184
    #   58 MoE layers: 256 x 44,040,192 (3 x 7168 x 2048) = 11,274,289,152 + 1 shared 44,040,192
    #                  + router 7168 x 256 = 1,835,008 + noaux_tc score bias 256
    #                  = 11,320,164,608, x 58 = 656,569,547,264
    #   embed + lm_head 2 x 129280 x 7168 = 1,853,358,080; final norm 7,168
    #   total 671,026,419,200 ("671B")
    assert got.parameter_count == 671_026_419_200
    assert within_one_percent(got.parameter_count, 671e9)


# --- hybrid state-space / attention ------------------------------------------------------------


def test_jamba_counts_only_its_attention_layers() -> None:
    got = facts(JAMBA_V0_1)
    # Attention where i % 8 == 4: layers 4, 12, 20, 28; the other 28 are Mamba (fixed state).
    # KV: 2 x 8 x 128 (4096 / 32) x 2 bytes x 4 = 16,384 B/token.
    assert got.kv_cache_bytes_per_token == 16_384
    assert (got.attention, got.layers, got.kv_heads) == (AttentionKind.GQA, 32, 8)
    assert (got.experts, got.active_experts, got.context_length) == (16, 2, 262_144)
    # Jamba's Mamba layout is not written down here: no estimate.
    assert got.parameter_count is None


def test_gpt_oss_layer_types_and_packed_mxfp4() -> None:
    got = facts(GPT_OSS_20B)
    # layer_types: 12 full_attention + 12 sliding_attention (window 128 << 131072).
    # KV: 2 x 8 x 64 x 2 bytes x 12 = 24,576 B/token.
    assert got.kv_cache_bytes_per_token == 24_576
    assert (got.experts, got.active_experts, got.quantization) == (32, 4, "mxfp4")
    # MXFP4 packs two 4-bit weights per stored U8 element: a stored-element count is not the
    # parameter count, and gpt-oss has no layout written down here, so it stays absent. (The
    # listing is illustrative, shaped like the Hub's: BF16 attention/embeddings, U8 expert blocks.)
    listing = {"BF16": 1_804_459_584, "U8": 11_272_519_680}
    packed = facts(GPT_OSS_20B, safetensors_parameters=listing)
    assert packed.parameter_count is None
    # Bytes stay exact: 1,804,459,584 x 2 + 11,272,519,680 x 1 = 14,881,438,848.
    assert packed.weights_bytes == 14_881_438_848
    assert packed.dtype == "U8"


# --- encoders ---------------------------------------------------------------------------------


def test_bert_base_encoder_has_no_kv_cache() -> None:
    got = facts(BERT_BASE_UNCASED)
    # Parameters of BertForMaskedLM (LayerNorm and biases everywhere, no pooler in this head):
    #   embeddings (30522 + 512 positions + 2 token types) x 768 = 23,835,648; LayerNorm 1,536
    #   per layer: q, k, v, o 4 x (768 x 768 + 768) = 2,362,368; LayerNorm 1,536
    #              768 x 3072 + 3072 = 2,362,368; 3072 x 768 + 768 = 2,360,064; LayerNorm 1,536
    #              -> 7,087,872, x 12 = 85,054,464
    #   MLM head: transform 768 x 768 + 768 = 590,592; LayerNorm 1,536; decoder bias 30,522
    #             (decoder weight tied to the word embeddings) -> 622,650
    #   total 109,514,298 ("110M")
    assert got.parameter_count == 109_514_298
    assert within_one_percent(got.parameter_count, 110e6)
    assert (got.attention, got.layers, got.kv_heads, got.head_dim) == (AttentionKind.MHA, 12, 12, 64)
    assert got.context_length == 512
    assert got.kv_cache_bytes_per_token is None
    # Absent because it is an encoder, not merely for want of a dtype.
    assert facts({**BERT_BASE_UNCASED, "torch_dtype": "float32"}).kv_cache_bytes_per_token is None
    # The bare BertModel carries the pooler instead of the MLM head:
    #   23,837,184 + 85,054,464 + pooler 590,592 = 109,482,240.
    assert facts({**BERT_BASE_UNCASED, "architectures": ["BertModel"]}).parameter_count == 109_482_240


@pytest.mark.parametrize("architecture", ["RobertaForMaskedLM", "XLMRobertaModel", "DistilBertModel"])
def test_other_encoders_have_no_kv_cache(architecture: str) -> None:
    family = {"RobertaForMaskedLM": "roberta", "XLMRobertaModel": "xlm-roberta"}.get(
        architecture, "distilbert"
    )
    config = {
        **BERT_BASE_UNCASED,
        "architectures": [architecture],
        "model_type": family,
        "torch_dtype": "float32",
    }
    assert facts(config).kv_cache_bytes_per_token is None


def test_an_encoder_family_run_as_a_decoder_has_a_kv_cache() -> None:
    config = {
        **BERT_BASE_UNCASED,
        "architectures": ["BertLMHeadModel"],
        "is_decoder": True,
        "torch_dtype": "float32",
    }
    # 2 x 12 x 64 x 4 bytes x 12 layers = 73,728 B/token.
    assert facts(config).kv_cache_bytes_per_token == 73_728


# --- GGUF -------------------------------------------------------------------------------------


def test_gguf_repository_without_config() -> None:
    got = derive_facts(
        FactSources(
            gguf={
                "total": 8_030_261_312,
                "architecture": "llama",
                "context_length": 131072,
                "eos_token": "<|eot_id|>",
            },
            tags=("gguf", "llama-3.1", "text-generation"),
            filenames=(
                "README.md",
                "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
                "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf",
            ),
        )
    )
    assert got.format is WeightsFormat.GGUF
    # GGUF adds rope_freqs (64 values) to the 8,030,261,248 safetensors parameters.
    assert got.parameter_count == 8_030_261_312
    assert (got.architecture, got.context_length) == ("llama", 131_072)
    # Two quantizations on offer: no single file type.
    assert got.quantization is None
    # No config: no attention facts; no safetensors listing: no dtype and bytes.
    assert (got.attention, got.kv_cache_bytes_per_token, got.dtype, got.weights_bytes) == (
        None,
        None,
        None,
        None,
    )


def test_gguf_repository_with_one_file_type() -> None:
    got = derive_facts(
        FactSources(
            gguf={"total": 8_030_261_312, "architecture": "llama"},
            filenames=(
                "Q4_K_M/Meta-Llama-3.1-70B-Instruct-Q4_K_M-00001-of-00002.gguf",
                "Q4_K_M/Meta-Llama-3.1-70B-Instruct-Q4_K_M-00002-of-00002.gguf",
                "mmproj-model-f16.gguf",
            ),
        )
    )
    assert got.quantization == "Q4_K_M"


# --- unrelated garbage changes nothing ---------------------------------------------------------

PUBLIC_CONFIGS = {
    "llama-3.1-8b": LLAMA_3_1_8B,
    "llama-2-7b": LLAMA_2_7B,
    "gpt2": GPT2,
    "mistral-7b": MISTRAL_7B_V0_1,
    "mixtral-8x7b": MIXTRAL_8X7B,
    "qwen3-30b-a3b": QWEN3_30B_A3B,
    "qwen1.5-moe-a2.7b": QWEN1_5_MOE_A2_7B,
    "deepseek-v2-lite": DEEPSEEK_V2_LITE,
    "deepseek-v3": DEEPSEEK_V3,
    "gemma-2-9b": GEMMA_2_9B,
    "gemma-3-1b": GEMMA_3_1B,
    "gemma-3-27b-it": GEMMA_3_27B_IT,
    "qwen3.5-35b-a3b": QWEN3_5_35B_A3B,
    "qwen2.5-vl-7b": QWEN2_5_VL_7B,
    "llama-4-scout": LLAMA_4_SCOUT,
    "jamba-v0.1": JAMBA_V0_1,
    "gpt-oss-20b": GPT_OSS_20B,
    "phi-3-mini-128k": PHI_3_MINI_128K,
    "falcon-7b": FALCON_7B,
    "bert-base-uncased": BERT_BASE_UNCASED,
}

garbage_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=15,
)
# Keys no reader looks at: a prefix no config key of any family uses.
unrelated_keys = st.text(max_size=12).map(lambda key: f"unrelated_{key}")


@pytest.mark.parametrize("name", sorted(PUBLIC_CONFIGS))
@settings(max_examples=10, deadline=None)
@given(garbage=st.dictionaries(unrelated_keys, garbage_values, min_size=1, max_size=6))
def test_unrelated_garbage_keys_leave_every_fact_unchanged(name: str, garbage: dict[str, Any]) -> None:
    config = PUBLIC_CONFIGS[name]
    nested = {**config, **garbage}
    if isinstance(config.get("text_config"), dict):
        nested["text_config"] = {**config["text_config"], **garbage}
    assert facts(nested) == facts(config)
