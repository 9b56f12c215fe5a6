"""What the module knows about model families, and the parameter count a config implies.

The count is computed only for families whose weight layout is written down here, and only for
heads it knows (a causal-LM head, a bare base model, a masked-LM head for encoders). Anything
else -- unknown families, multimodal configs (the vision tower is not described in enough
detail), classification heads -- gives no count rather than a near miss.
"""

from __future__ import annotations

import dataclasses
import enum

from ai_models.domain.catalog.config_view import (
    HEADS,
    HIDDEN_SIZE,
    INTERMEDIATE,
    KV_HEADS,
    LAYERS,
    VOCAB,
    ConfigView,
)

# Encoder families: bidirectional attention, no KV cache during inference.
ENCODER_FAMILIES = frozenset(
    {
        "albert",
        "bert",
        "camembert",
        "deberta",
        "deberta-v2",
        "distilbert",
        "electra",
        "ernie",
        "esm",
        "megatron-bert",
        "mobilebert",
        "modernbert",
        "mpnet",
        "nomic_bert",
        "roberta",
        "roformer",
        "xlm",
        "xlm-roberta",
        "xlm-roberta-xl",
    }
)

# Families whose sliding-window layers follow a fixed period when the config does not list
# `layer_types` or `sliding_window_pattern`: every n-th layer (1-based) is a global one. These are
# the defaults of the families' transformers config classes (Gemma 2 alternates; Gemma 3 keeps
# one global layer in six; Command R7B one in four).
DEFAULT_GLOBAL_LAYER_PERIOD = {"gemma2": 2, "gemma3": 6, "gemma3_text": 6, "cohere2": 4}

# Families whose config class defaults `use_sliding_window` to false: their `sliding_window`
# value is inert unless the config turns it on (Qwen ships 32768/131072 there, unused).
SLIDING_WINDOW_OPT_IN = frozenset(
    {"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text", "qwen3", "qwen3_moe"}
)


class MoeStyle(enum.Enum):
    MIXTRAL = "mixtral"  # every layer routes over `num_local_experts` experts of `intermediate_size`
    QWEN = "qwen"  # `num_experts` of `moe_intermediate_size`, optional shared expert with a gate
    DEEPSEEK = "deepseek"  # routed + shared experts after `first_k_dense_replace` dense layers


@dataclasses.dataclass(frozen=True)
class Layout:
    """How a family lays out its weights. Defaults describe a Llama-style decoder."""

    norm: int = 1  # parameters per hidden unit of one norm: RMSNorm 1, LayerNorm 2 (with bias)
    layer_norms: int = 2  # norms per layer (Gemma 2/3 have four)
    qkv_bias: bool = False  # biases on q, k, v only (Qwen2)
    qk_norm: bool = False  # RMSNorm over head_dim on queries and keys (Qwen3, Gemma 3)
    gated_mlp: bool = True  # gate, up and down projections; else one in, one out
    linear_bias: bool = False  # a bias on every linear layer (GPT-2, BERT)
    tied: bool = False  # the family's default for `tie_word_embeddings`
    learned_positions: bool = False  # a position-embedding table of the context length
    intermediate_factor: int | None = None  # MLP width when the config leaves it null (GPT-2: 4x)
    encoder: bool = False  # BERT-style: token-type embeddings, embedding LayerNorm, no final norm
    moe: MoeStyle | None = None
    mla: bool = False  # DeepSeek multi-head latent attention


_LLAMA = Layout()
_GEMMA = Layout(tied=True)
_GEMMA2 = Layout(tied=True, layer_norms=4)
_GPT2 = Layout(
    norm=2, gated_mlp=False, linear_bias=True, tied=True, learned_positions=True, intermediate_factor=4
)
_BERT = Layout(norm=2, gated_mlp=False, linear_bias=True, tied=True, learned_positions=True, encoder=True)
_DEEPSEEK = Layout(moe=MoeStyle.DEEPSEEK, mla=True)

LAYOUTS: dict[str, Layout] = {
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "phi3": _LLAMA,
    "mixtral": Layout(moe=MoeStyle.MIXTRAL),
    "qwen2": Layout(qkv_bias=True),
    "qwen2_moe": Layout(qkv_bias=True, moe=MoeStyle.QWEN),
    "qwen3": Layout(qk_norm=True),
    "qwen3_moe": Layout(qk_norm=True, moe=MoeStyle.QWEN),
    "gemma": _GEMMA,
    "gemma2": _GEMMA2,
    "gemma3_text": Layout(tied=True, layer_norms=4, qk_norm=True),
    "deepseek_v2": _DEEPSEEK,
    "deepseek_v3": _DEEPSEEK,
    "gpt2": _GPT2,
    "bert": _BERT,
    "roberta": _BERT,
    "xlm-roberta": _BERT,
}


class Head(enum.Enum):
    CAUSAL_LM = "causal-lm"  # an lm_head unless tied to the embeddings
    BASE = "base"  # the bare model (embeddings, or a BERT encoder with its pooler)
    MASKED_LM = "masked-lm"  # BERT-style transform + tied decoder with a bias


def head_of(architecture: str | None, *, encoder: bool) -> Head | None:
    if architecture is None:
        return None
    if encoder:
        if architecture.endswith("ForMaskedLM"):
            return Head.MASKED_LM
        return Head.BASE if architecture.endswith("Model") else None
    if architecture.endswith(("ForCausalLM", "LMHeadModel")):
        return Head.CAUSAL_LM
    return Head.BASE if architecture.endswith("Model") else None


@dataclasses.dataclass(frozen=True)
class _Shape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int


def estimate_parameters(config: ConfigView, *, family: str | None, architecture: str | None) -> int | None:
    """Parameters of the model a config describes: embeddings, an untied lm_head, attention, MLP
    or experts with routers and shared experts, and every norm. None when not certain."""
    layout = LAYOUTS.get(family or "")
    if layout is None or config.is_multimodal():
        return None
    head = head_of(architecture, encoder=layout.encoder)
    shape = _shape(config, layout)
    if head is None or shape is None:
        return None
    tied = config.flag("tie_word_embeddings", default=layout.tied)
    embeddings = _embeddings(config, layout, shape)
    attention = _mla(config, shape) if layout.mla else _attention(config, layout, shape)
    mlp = _mlp_total(config, layout, shape)
    if tied is None or embeddings is None or attention is None or mlp is None:
        return None
    norms = shape.layers * layout.layer_norms * layout.norm * shape.hidden
    total = embeddings + shape.layers * attention + mlp + norms + _head(layout, shape, head, tied=tied)
    if not layout.encoder:
        total += layout.norm * shape.hidden  # the final norm
    return total


def _shape(config: ConfigView, layout: Layout) -> _Shape | None:
    hidden = config.integer(*HIDDEN_SIZE)
    layers = config.integer(*LAYERS)
    heads = config.integer(*HEADS)
    vocab = config.integer(*VOCAB)
    if hidden is None or layers is None or heads is None or vocab is None:
        return None
    kv_heads = config.integer(*KV_HEADS, default=heads)
    head_dim = head_dim_of(config, heads=heads)
    if kv_heads is None or head_dim is None or (not layout.mla and heads % kv_heads):
        return None
    return _Shape(
        hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim, vocab=vocab
    )


def head_dim_of(config: ConfigView, *, heads: int | None) -> int | None:
    """An explicit `head_dim` wins (Gemma, Qwen3 differ from hidden/heads); else hidden/heads when
    it divides evenly."""
    if config.has("head_dim"):
        return config.integer("head_dim")
    hidden = config.integer(*HIDDEN_SIZE)
    if hidden is None or heads is None or hidden % heads:
        return None
    return hidden // heads


def _embeddings(config: ConfigView, layout: Layout, shape: _Shape) -> int | None:
    rows = shape.vocab
    if layout.learned_positions:
        # GPT-2 and BERT learn one vector per position up to the context length.
        positions = config.integer("max_position_embeddings", "n_positions")
        if positions is None:
            return None
        rows += positions
    if layout.encoder:
        token_types = config.integer("type_vocab_size", minimum=0, default=0)
        if token_types is None:
            return None
        # Token-type table, then a LayerNorm over the summed embeddings.
        return (rows + token_types) * shape.hidden + layout.norm * shape.hidden
    return rows * shape.hidden


def _biases(config: ConfigView, layout: Layout, flag: str) -> bool | None:
    """Is every projection of a block biased: always for GPT-2/BERT, else the config's flag."""
    if layout.linear_bias:
        return True
    return config.flag(flag, default=False)


def _attention(config: ConfigView, layout: Layout, shape: _Shape) -> int | None:
    """One layer's q, k, v, o projections, their biases and q/k norms (GQA/MQA-aware)."""
    biased = _biases(config, layout, "attention_bias")
    if biased is None:
        return None
    q_width = shape.heads * shape.head_dim
    kv_width = shape.kv_heads * shape.head_dim
    weights = 2 * shape.hidden * q_width + 2 * shape.hidden * kv_width
    if biased:
        weights += q_width + 2 * kv_width + shape.hidden
    elif layout.qkv_bias:
        weights += q_width + 2 * kv_width
    if layout.qk_norm:
        weights += 2 * shape.head_dim
    return weights


def _mla(config: ConfigView, shape: _Shape) -> int | None:
    """One layer of DeepSeek multi-head latent attention: optionally low-rank queries, the joint
    key/value compression (plus the decoupled rope key), its up-projection, and the output."""
    q_rank = config.integer("q_lora_rank", default=0)  # null: queries are not compressed
    kv_rank = config.integer("kv_lora_rank")
    nope = config.integer("qk_nope_head_dim")
    rope = config.integer("qk_rope_head_dim")
    v_dim = config.integer("v_head_dim")
    if q_rank is None or kv_rank is None or nope is None or rope is None or v_dim is None:
        return None
    if config.flag("attention_bias", default=False) is not False:
        return None  # no published MLA model has biases; their layout is not written down here
    h, heads = shape.hidden, shape.heads
    q_width = heads * (nope + rope)
    # Compressed queries: down-projection, its norm, up-projection; else one projection.
    queries = h * q_rank + q_rank + q_rank * q_width if q_rank else h * q_width
    keys_values = h * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v_dim)  # down, norm, up
    return queries + keys_values + heads * v_dim * h


def _mlp(config: ConfigView, layout: Layout, *, hidden: int, width: int) -> int | None:
    biased = _biases(config, layout, "mlp_bias")
    if biased is None:
        return None
    if layout.gated_mlp:
        return 3 * hidden * width + (2 * width + hidden if biased else 0)
    return 2 * hidden * width + (width + hidden if biased else 0)


def _mlp_total(config: ConfigView, layout: Layout, shape: _Shape) -> int | None:
    """MLP parameters summed over all layers: dense layers and, for MoE families, expert layers."""
    if layout.moe is MoeStyle.MIXTRAL:
        return _mixtral(config, layout, shape)
    if layout.moe is MoeStyle.QWEN:
        return _qwen_moe(config, layout, shape)
    if layout.moe is MoeStyle.DEEPSEEK:
        return _deepseek_moe(config, layout, shape)
    width = _intermediate(config, layout, shape)
    dense = None if width is None else _mlp(config, layout, hidden=shape.hidden, width=width)
    return None if dense is None else shape.layers * dense


def _intermediate(config: ConfigView, layout: Layout, shape: _Shape) -> int | None:
    if not config.has(*INTERMEDIATE) and layout.intermediate_factor is not None:
        return layout.intermediate_factor * shape.hidden
    return config.integer(*INTERMEDIATE)


def _routed(config: ConfigView, layout: Layout, shape: _Shape, *, experts: int, width: int) -> int | None:
    """Routed experts of one layer plus the router (one logit per expert, no bias)."""
    expert = _mlp(config, layout, hidden=shape.hidden, width=width)
    return None if expert is None else experts * expert + shape.hidden * experts


def _mixtral(config: ConfigView, layout: Layout, shape: _Shape) -> int | None:
    experts = config.integer("num_local_experts")
    width = config.integer(*INTERMEDIATE)
    if experts is None or width is None:
        return None
    per_layer = _routed(config, layout, shape, experts=experts, width=width)
    return None if per_layer is None else shape.layers * per_layer


def _qwen_moe(config: ConfigView, layout: Layout, shape: _Shape) -> int | None:
    """Qwen2/3-MoE: layer i routes when (i + 1) % decoder_sparse_step == 0 and i is not in
    mlp_only_layers; a shared expert (when sized) adds its MLP and a one-logit gate."""
    experts = config.integer("num_experts")
    width = config.integer("moe_intermediate_size")
    dense_width = config.integer(*INTERMEDIATE)
    shared_width = config.integer("shared_expert_intermediate_size", minimum=0, default=0)
    step = config.integer("decoder_sparse_step", default=1)
    dense_only = config.integers("mlp_only_layers") if config.has("mlp_only_layers") else ()
    if (
        experts is None
        or width is None
        or dense_width is None
        or shared_width is None
        or step is None
        or dense_only is None
    ):
        return None
    routed = _routed(config, layout, shape, experts=experts, width=width)
    dense = _mlp(config, layout, hidden=shape.hidden, width=dense_width)
    shared = _mlp(config, layout, hidden=shape.hidden, width=shared_width) if shared_width else 0
    if routed is None or dense is None or shared is None:
        return None
    if shared_width:
        shared += shape.hidden  # shared_expert_gate: hidden -> 1
    excluded = {i for i in dense_only if i < shape.layers and (i + 1) % step == 0}
    moe_layers = shape.layers // step - len(excluded)
    return moe_layers * (routed + shared) + (shape.layers - moe_layers) * dense


def _deepseek_moe(config: ConfigView, layout: Layout, shape: _Shape) -> int | None:
    """DeepSeek-V2/V3: layer i routes when i >= first_k_dense_replace and i % moe_layer_freq == 0;
    n_shared_experts always-on experts; V3's `noaux_tc` router keeps a per-expert score bias."""
    experts = config.integer("n_routed_experts")
    width = config.integer("moe_intermediate_size")
    dense_width = config.integer(*INTERMEDIATE)
    shared_count = config.integer("n_shared_experts", minimum=0, default=0)
    first_moe = config.integer("first_k_dense_replace", minimum=0, default=0)
    frequency = config.integer("moe_layer_freq", default=1)
    if (
        experts is None
        or width is None
        or dense_width is None
        or shared_count is None
        or first_moe is None
        or frequency is None
    ):
        return None
    routed = _routed(config, layout, shape, experts=experts, width=width)
    expert = _mlp(config, layout, hidden=shape.hidden, width=width)
    dense = _mlp(config, layout, hidden=shape.hidden, width=dense_width)
    if routed is None or expert is None or dense is None:
        return None
    score_bias = experts if config.text("topk_method") == "noaux_tc" else 0
    moe_layers = multiples_in(first_moe, shape.layers, frequency)
    return moe_layers * (routed + shared_count * expert + score_bias) + (shape.layers - moe_layers) * dense


def multiples_in(start: int, stop: int, step: int) -> int:
    """How many i in [start, stop) are multiples of step; arithmetic, so a config claiming
    billions of layers costs nothing."""
    if start >= stop:
        return 0
    return (stop - 1) // step - (start - 1) // step  # floor division: (-1) // step == -1


def _head(layout: Layout, shape: _Shape, head: Head, *, tied: bool) -> int:
    h = shape.hidden
    if head is Head.CAUSAL_LM:
        return 0 if tied else shape.vocab * h
    if head is Head.MASKED_LM:
        # transform dense + LayerNorm, then the decoder: its weight tied to the embeddings, its bias not.
        return h * h + h + layout.norm * h + shape.vocab + (0 if tied else shape.vocab * h)
    return h * h + h if layout.encoder else 0  # BERT's pooler dense
