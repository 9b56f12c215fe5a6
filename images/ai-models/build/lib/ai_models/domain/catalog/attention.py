"""Attention facts of a language-model config and the KV-cache bytes each new token adds.

kvCacheBytesPerToken counts only the layers whose cache grows with the context: sliding-window
and chunked layers keep a fixed window, Mamba/linear-attention layers a fixed state. Layer
patterns the config does not spell out in a form written down here give no figure at all.
"""

from __future__ import annotations

import dataclasses

from ai_models.domain.catalog.architectures import (
    DEFAULT_GLOBAL_LAYER_PERIOD,
    ENCODER_FAMILIES,
    SLIDING_WINDOW_OPT_IN,
    head_dim_of,
)
from ai_models.domain.catalog.config_view import HEADS, KV_HEADS, LAYERS, ConfigView
from ai_models.domain.catalog.record import AttentionKind

# `layer_types` entries whose cache grows with every token, and those bounded by a window.
_FULL_LAYERS = frozenset({"full_attention", "attention", "global_attention", "global", "full"})
_WINDOW_LAYERS = frozenset({"sliding_attention", "sliding_window", "sliding", "local_attention", "local"})
# Entries that never grow: a chunk-local window or a fixed recurrent / convolution state.
_FIXED_LAYERS = frozenset(
    {"chunked_attention", "linear_attention", "mamba", "mamba2", "ssm", "conv", "short_conv", "recurrent"}
)
# Characters of Nemotron-H's `hybrid_override_pattern`: `*` attention, `M` Mamba-2, `-` MLP, `E` MoE.
_PATTERN_CHARS = frozenset("*M-E")
# Keys announcing a mix of layer kinds in a form not decoded here (Llama 4 chunked layers,
# GPT-Neo local/global lists, Zamba block lists): without `layer_types` the count is unknown.
_UNDECODED_LAYER_MIX = ("attention_chunk_size", "attention_layers", "attention_types", "layers_block_type")


@dataclasses.dataclass(frozen=True)
class Attention:
    kind: AttentionKind | None = None
    layers: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None


def attention_of(lm: ConfigView) -> Attention:
    """Layers, attention kind, KV heads and head width of the language model."""
    layers = lm.integer(*LAYERS)
    if lm.has("kv_lora_rank"):
        return _latent(lm, layers)
    heads = lm.integer(*HEADS)
    kv_heads = _kv_heads(lm, heads)
    return Attention(
        kind=_kind(heads, kv_heads),
        layers=layers,
        kv_heads=kv_heads,
        head_dim=head_dim_of(lm, heads=heads),
    )


def _latent(lm: ConfigView, layers: int | None) -> Attention:
    """MLA (DeepSeek-V2/V3): each token caches one latent of kv_lora_rank plus the decoupled rope
    key, shared by all heads -- one "KV head" of that width, as vLLM sizes it. The config's
    num_key_value_heads (128 for DeepSeek-V3) describes the decompressed heads, not the cache."""
    rank = lm.integer("kv_lora_rank")
    rope = lm.integer("qk_rope_head_dim")
    if rank is None:
        return Attention(layers=layers)
    width = None if rope is None else rank + rope
    return Attention(kind=AttentionKind.MLA, layers=layers, kv_heads=1, head_dim=width)


def _kv_heads(lm: ConfigView, heads: int | None) -> int | None:
    """num_key_value_heads, `multi_query: true` (Falcon, GPT-BigCode) = 1, else one per query
    head. Only checked against a valid query-head count: a value that cannot group the query
    heads evenly, or one with nothing to check it against, is no answer."""
    if heads is None:
        return None
    if lm.has(*KV_HEADS):
        kv_heads = lm.integer(*KV_HEADS)
    elif lm.flag("multi_query") is True:
        kv_heads = 1
    else:
        kv_heads = heads
    if kv_heads is None:
        return None
    return kv_heads if kv_heads <= heads and heads % kv_heads == 0 else None


def _kind(heads: int | None, kv_heads: int | None) -> AttentionKind | None:
    if heads is None or kv_heads is None:
        return None
    if kv_heads == heads:
        return AttentionKind.MHA  # checked first: one head with one KV head is plain MHA
    return AttentionKind.MQA if kv_heads == 1 else AttentionKind.GQA


def has_kv_cache(config: ConfigView, lm: ConfigView, *, architecture: str | None) -> bool:
    """Encoders attend bidirectionally over a fixed input and cache nothing; encoder-decoders
    cache cross-attention per input, not per generated token, so no per-token figure fits them."""
    if config.flag("is_encoder_decoder") is True:
        return False
    if lm.flag("is_decoder") is True:
        return True  # an encoder family run as a causal decoder (BertLMHeadModel)
    if {lm.name("model_type"), config.name("model_type")} & ENCODER_FAMILIES:
        return False
    return not (architecture or "").endswith("ForMaskedLM")


def kv_cache_bytes_per_token(
    lm: ConfigView, attention: Attention, *, dtype_bytes: int | None, context_length: int | None
) -> int | None:
    """2 (K and V) x kv_heads x head_dim x bytes x growing layers; MLA caches one latent, not K
    and V, so its factor is 1."""
    if attention.layers is None or dtype_bytes is None or attention.kv_heads is None:
        return None
    if attention.head_dim is None or attention.kind is None:
        return None
    growing = growing_layers(lm, layers=attention.layers, context_length=context_length)
    if growing is None:
        return None
    entries = 1 if attention.kind is AttentionKind.MLA else 2
    return entries * attention.kv_heads * attention.head_dim * dtype_bytes * growing


def growing_layers(lm: ConfigView, *, layers: int, context_length: int | None) -> int | None:
    """How many layers keep every token's K and V. The first rule the config speaks to decides."""
    if lm.has("layer_types"):
        return _listed(lm, layers=layers, context_length=context_length)
    if lm.has("hybrid_override_pattern"):
        return _pattern(lm, layers=layers)
    if lm.has("attn_layer_period", "attn_layer_offset"):
        # Jamba: layer i attends when i % attn_layer_period == attn_layer_offset; the rest are Mamba.
        period = lm.integer("attn_layer_period")
        offset = lm.integer("attn_layer_offset", minimum=0)
        if period is None or offset is None or offset >= period:
            return None
        return every_nth(layers, period=period, offset=offset)
    if lm.has("full_attention_interval"):
        # Qwen3-Next style: every n-th layer (1-based) is full attention, the rest linear.
        interval = lm.integer("full_attention_interval")
        return None if interval is None else every_nth(layers, period=interval, offset=interval - 1)
    if lm.has(*_UNDECODED_LAYER_MIX):
        return None
    return _windowed(lm, layers=layers, context_length=context_length)


def every_nth(layers: int, *, period: int, offset: int) -> int:
    """How many i in [0, layers) have i % period == offset (0 <= offset < period)."""
    return 0 if offset >= layers else (layers - 1 - offset) // period + 1


def _listed(lm: ConfigView, *, layers: int, context_length: int | None) -> int | None:
    kinds = lm.strings("layer_types")
    if kinds is None or len(kinds) != layers:
        return None
    full = sum(kind in _FULL_LAYERS for kind in kinds)
    windowed = sum(kind in _WINDOW_LAYERS for kind in kinds)
    if full + windowed + sum(kind in _FIXED_LAYERS for kind in kinds) != layers:
        return None  # a layer kind not written down here
    if not windowed:
        return full
    if not lm.has("sliding_window"):
        return None  # sliding layers without a window size: how far they reach is unknown
    binds = _window_binds(lm, context_length=context_length)
    return None if binds is None else full + (0 if binds else windowed)


def _pattern(lm: ConfigView, *, layers: int) -> int | None:
    pattern = lm.text("hybrid_override_pattern")
    if pattern is None or len(pattern) != layers or not set(pattern) <= _PATTERN_CHARS:
        return None
    return pattern.count("*")


def _window_binds(lm: ConfigView, *, context_length: int | None) -> bool | None:
    """Does a sliding window bound the cache: not when there is none, when it is switched off,
    or when it covers the whole context (Phi-3-128k ships 262144 over 131072 positions); None
    when the config's values are malformed."""
    if not lm.has("sliding_window"):
        return False
    window = lm.integer("sliding_window")
    switched_on = lm.flag("use_sliding_window", default=lm.name("model_type") not in SLIDING_WINDOW_OPT_IN)
    if window is None or switched_on is None:
        return None
    return switched_on and (context_length is None or window < context_length)


def _windowed(lm: ConfigView, *, layers: int, context_length: int | None) -> int | None:
    """With a binding sliding window: only the periodic global layers (Gemma 2/3, from
    `sliding_window_pattern` or the family's default), only the layers below `max_window_layers`
    (Qwen), or none at all when the window applies to every layer (Mistral-7B-v0.1)."""
    binds = _window_binds(lm, context_length=context_length)
    if not binds:
        return None if binds is None else layers
    if lm.has("sliding_window_pattern"):
        period = lm.integer("sliding_window_pattern")
        return None if period is None else every_nth(layers, period=period, offset=period - 1)
    period = DEFAULT_GLOBAL_LAYER_PERIOD.get(lm.name("model_type") or "")
    if period is not None:
        return every_nth(layers, period=period, offset=period - 1)
    if lm.has("max_window_layers"):
        full_layers = lm.integer("max_window_layers", minimum=0)
        return None if full_layers is None else min(full_layers, layers)
    return 0
