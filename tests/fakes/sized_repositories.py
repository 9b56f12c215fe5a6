"""Repositories whose Hub listing carries no safetensors metadata, shaped like the ones issue 15
found without a catalog size: DeepSeek-V3 (FP8 shards), gpt-oss (MXFP4 shards plus an `original/`
copy), a GGUF-only repository offering two quantizations, an encoder shipped as one
`model.safetensors` beside PyTorch and ONNX exports (BAAI/bge-m3's layout), and one with nothing
the publisher takes (PyTorch pickles only).

`PUBLISHED` names, for each sized repository, the files a publication takes, written out by hand
(not computed by the selection under test), so `expected_bytes` is an independent oracle.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from fakes.hub_corpus import FakeModel, repository
from fakes.model_files import GGML_F16, GGML_F32, FileContent, content_size, gguf_bytes, safetensors_bytes


def _config(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def _index(shards: Mapping[str, bytes]) -> bytes:
    # total_size in the format's sense: tensor data only, no headers (what the Hub's index says).
    return json.dumps(
        {"metadata": {"total_size": sum(len(body) for body in shards.values())}, "weight_map": {}}
    ).encode()


_TOKENIZER: Final = b'{"version": "1.0", "model": {"type": "BPE"}}'

_FP8_SHARDS: Final = {
    "model-00001-of-00002.safetensors": safetensors_bytes(
        {"embed.weight": ("BF16", (64, 32)), "layers.0.mlp.weight": ("F8_E4M3", (64, 64))}
    ),
    "model-00002-of-00002.safetensors": safetensors_bytes(
        {"layers.1.mlp.weight": ("F8_E4M3", (64, 64)), "layers.1.mlp.weight_scale_inv": ("F32", (1, 1))}
    ),
}
FP8: Final = repository(
    "sized/DeepSeek-V3-fp8",
    {
        "config.json": _config(
            architectures=["DeepseekV3ForCausalLM"],
            model_type="deepseek_v3",
            torch_dtype="bfloat16",
            quantization_config={"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
        ),
        **_FP8_SHARDS,
        "model.safetensors.index.json": _index(_FP8_SHARDS),
        "tokenizer.json": _TOKENIZER,
        "README.md": b"# DeepSeek-V3 (FP8)\n",
        "inference/model.py": b"# reference code, not weights\n",
    },
    tags=["transformers", "safetensors", "deepseek_v3", "text-generation", "fp8"],
)

_MXFP4_SHARDS: Final = {
    "model-00000-of-00001.safetensors": safetensors_bytes(
        {
            "attn.weight": ("BF16", (32, 32)),
            "experts.blocks": ("U8", (64, 16)),
            "experts.scales": ("U8", (64, 1)),
        }
    ),
}
MXFP4: Final = repository(
    "sized/gpt-oss-mxfp4",
    {
        "config.json": _config(
            architectures=["GptOssForCausalLM"],
            model_type="gpt_oss",
            torch_dtype="bfloat16",
            quantization_config={"quant_method": "mxfp4"},
        ),
        **_MXFP4_SHARDS,
        "model.safetensors.index.json": _index(_MXFP4_SHARDS),
        "original/model.safetensors": safetensors_bytes({"w": ("BF16", (64, 64))}),
        "original/config.json": b"{}",
        "tokenizer.json": _TOKENIZER,
        "chat_template.jinja": b"{{ messages }}",
    },
    tags=["transformers", "safetensors", "gpt_oss", "text-generation", "mxfp4"],
)

GGUF_ONLY: Final = repository(
    "sized/Llama-GGUF",
    {
        "Llama-Q4_K_M.gguf": gguf_bytes(
            metadata={"general.architecture": "llama", "llama.context_length": 2048},
            tensors={"w": (GGML_F16, (32, 32))},
        ),
        "Llama-Q8_0.gguf": gguf_bytes(
            metadata={"general.architecture": "llama", "llama.context_length": 2048},
            tensors={"w": (GGML_F32, (32, 32))},
        ),
        "README.md": b"# Llama GGUF\n",
    },
    library_name=None,
    tags=["gguf", "llama", "text-generation"],
    gguf={"total": 1024, "architecture": "llama", "context_length": 2048},
)

ENCODER: Final = repository(
    "sized/bge-m3-encoder",
    {
        "config.json": _config(
            architectures=["XLMRobertaModel"],
            model_type="xlm-roberta",
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=8194,
            torch_dtype="float32",
        ),
        "model.safetensors": safetensors_bytes({"embeddings.weight": ("F32", (128, 64))}),
        "pytorch_model.bin": b"pickle" * 200,
        "onnx/model.onnx": b"onnx" * 100,
        "tokenizer.json": _TOKENIZER,
        "sentencepiece.bpe.model": b"spm" * 50,
        "modules.json": b"[]",
        "1_Pooling/config.json": b'{"pooling_mode_cls_token": true}',
    },
    pipeline_tag="feature-extraction",
    library_name="sentence-transformers",
    tags=["sentence-transformers", "safetensors", "xlm-roberta", "feature-extraction"],
)

PICKLES_ONLY: Final = repository(
    "sized/bert-pickles-only",
    {"config.json": _config(architectures=["BertModel"], model_type="bert"), "pytorch_model.bin": b"x" * 99},
    pipeline_tag="feature-extraction",
)

SIZED: Final = (FP8, MXFP4, GGUF_ONLY, ENCODER)

# The files a publication takes, by hand: one weight format, its companions, no other exports,
# no code, no `original/` copy, one GGUF quantization (Q4_K_M first).
PUBLISHED: Final[Mapping[str, tuple[str, ...]]] = {
    FP8.id: (
        *_FP8_SHARDS,
        "config.json",
        "model.safetensors.index.json",
        "tokenizer.json",
        "README.md",
    ),
    MXFP4.id: (
        *_MXFP4_SHARDS,
        "config.json",
        "model.safetensors.index.json",
        "tokenizer.json",
        "chat_template.jinja",
    ),
    GGUF_ONLY.id: ("Llama-Q4_K_M.gguf", "README.md"),
    ENCODER.id: (
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "sentencepiece.bpe.model",
        "modules.json",
        "1_Pooling/config.json",
    ),
}


def expected_bytes(model: FakeModel) -> int:
    """The bytes a publication of `model` writes (and so reserves), from `PUBLISHED`."""
    contents: Mapping[str, FileContent] = model.contents or {}
    return sum(content_size(contents[path]) for path in PUBLISHED[model.id])
