"""Which files of a source repository become the artifact (pure).

Inference runtimes need one weight format plus its companions (config, tokenizer, templates), so
the selection keeps exactly one format, by preference: safetensors (Diffusers pipelines included),
then GGUF. Alternative exports of the same weights (PyTorch pickles, ONNX, TensorFlow, Flax,
OpenVINO, Core ML, Rust) and their shard indexes, scripts, images and archives are left out; a
repository with none of the supported formats is refused. A GGUF repository usually offers several
quantizations of one model; the artifact takes one (by `GGUF_PREFERENCE`, split shards kept
together).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Iterable, Sequence

from ai_models.domain.catalog.record import WeightsFormat

# Left out wherever they appear (fnmatch patterns on the whole path).
IGNORED_PATTERNS: tuple[str, ...] = (
    ".git*",
    "*/.git*",
    "*.py",
    "*.sh",
    "*.ipynb",
    "*.png",
    "*.jpg",
    "*.jpeg",
    "*.gif",
    "*.webp",
    "*.svg",
    "*.pdf",
    "*.onnx",
    "*.onnx_data",
    "*.tflite",
    "*.h5",
    "*.msgpack",
    "*.mlmodel",
    "*.mlpackage/*",
    "*.ckpt",
    "*.pt",
    "*.pth",
    "*.bin",
    "*.pkl",
    "*.ot",  # rust-bert / tch exports
    "*.bin.index.json",  # shard indexes of the formats left out
    "*.h5.index.json",
    "*.msgpack.index.json",
    "*.so",
    "*.dll",
    "*.exe",
    "*.jar",
    "*.wasm",
    "*.zip",
    "*.tar",
    "*.tgz",
    "*.gz",
    "*.7z",
    "*.zst",
    "onnx/*",
    "openvino/*",
    "coreml/*",
    "original/*",
)
SAFETENSORS_PATTERN = "*.safetensors"
GGUF_PATTERN = "*.gguf"
# Most asked-for first: the common 4-bit default of llama.cpp and Ollama, then more precise ones.
GGUF_PREFERENCE: tuple[str, ...] = (
    "Q4_K_M",
    "Q4_K_S",
    "Q5_K_M",
    "Q5_K_S",
    "Q6_K",
    "Q8_0",
    "Q4_0",
    "BF16",
    "F16",
)
_GGUF_SHARD = re.compile(r"-\d{5}-of-(\d{5})\.gguf$", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class Selection:
    files: tuple[str, ...]
    format: WeightsFormat | None
    refusal: str | None  # why nothing can be published; None when `files` is the artifact

    @property
    def accepted(self) -> bool:
        return self.refusal is None


def _ignored(path: str) -> bool:
    return any(fnmatch.fnmatchcase(path.lower(), pattern) for pattern in IGNORED_PATTERNS)


def _gguf_variant(path: str) -> str:
    """The file name without its shard number: the shards of one split share it, and it differs
    from an unsplit file of the same name (`x.gguf` and `x-00001-of-00002.gguf` are two copies)."""
    return _GGUF_SHARD.sub(r"-of-\1.gguf", path)


def _pick_gguf(paths: Sequence[str]) -> list[str]:
    variants: dict[str, list[str]] = {}
    for path in paths:
        variants.setdefault(_gguf_variant(path), []).append(path)
    if len(variants) == 1:
        return sorted(paths)

    def rank(variant: str) -> tuple[int, str]:
        upper = variant.upper()
        for index, marker in enumerate(GGUF_PREFERENCE):
            if re.search(rf"[-_.]{re.escape(marker)}[-_.]", upper):
                return index, variant
        return len(GGUF_PREFERENCE), variant

    return sorted(variants[min(variants, key=rank)])


def select_files(paths: Iterable[str]) -> Selection:
    listed = sorted(set(paths))
    safetensors = [path for path in listed if fnmatch.fnmatchcase(path.lower(), SAFETENSORS_PATTERN)]
    gguf = [path for path in listed if fnmatch.fnmatchcase(path.lower(), GGUF_PATTERN)]
    companions = [
        path
        for path in listed
        if not _ignored(path) and path not in safetensors and path not in gguf and not path.endswith("/")
    ]
    if safetensors:
        weights_format = (
            WeightsFormat.DIFFUSERS if "model_index.json" in listed else WeightsFormat.SAFETENSORS
        )
        return Selection(
            files=tuple(sorted([*safetensors, *companions])), format=weights_format, refusal=None
        )
    if gguf:
        return Selection(
            files=tuple(sorted([*_pick_gguf(gguf), *companions])), format=WeightsFormat.GGUF, refusal=None
        )
    return Selection(
        files=(),
        format=None,
        refusal="the source has no safetensors or GGUF weights; ai-models publishes only those formats",
    )
