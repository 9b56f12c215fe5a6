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


# The patterns as one expression: the catalog runs the selection for every model it sizes, and
# one match per path costs a fraction of one fnmatch call per pattern.
_IGNORED = re.compile("|".join(fnmatch.translate(pattern) for pattern in IGNORED_PATTERNS))


def _ignored(path: str) -> bool:
    return _IGNORED.match(path.lower()) is not None


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


_DIFFUSERS_VARIANT = re.compile(r"\.(fp16|bf16|non_ema|ema_only)\.safetensors$", re.IGNORECASE)
_MMPROJ = re.compile(r"(^|/)mmproj[^/]*\.gguf$", re.IGNORECASE)
_CONSOLIDATED = re.compile(r"(^|/)consolidated[^/]*\.safetensors$", re.IGNORECASE)


def _safetensors_weights(safetensors: list[str], *, diffusers: bool) -> list[str]:
    """One copy of the weights: duplicates that loaders never read by default are left out.

    Mistral repositories ship `consolidated.safetensors` (for mistral-inference) beside the
    Hugging Face shards; Diffusers pipelines keep their weights in component folders, and a root
    checkpoint or an `.fp16.`/`.non_ema.` variant next to the default file is a second copy.
    """
    # Weights under folders of other exports (`original/`, `onnx/`) are copies, unless they are all
    # the repository has.
    kept = [path for path in safetensors if not _ignored(path)] or list(safetensors)
    if any(not _CONSOLIDATED.search(path) for path in kept):
        kept = [path for path in kept if not _CONSOLIDATED.search(path)]
    if diffusers:
        in_components = [path for path in kept if "/" in path]
        kept = in_components or kept
        kept = [
            path
            for path in kept
            if not _DIFFUSERS_VARIANT.search(path) or _DIFFUSERS_VARIANT.sub(".safetensors", path) not in kept
        ]
    return kept


def select_files(paths: Iterable[str]) -> Selection:
    listed = sorted(set(paths))
    safetensors = [path for path in listed if fnmatch.fnmatchcase(path.lower(), SAFETENSORS_PATTERN)]
    gguf = [path for path in listed if fnmatch.fnmatchcase(path.lower(), GGUF_PATTERN)]
    # A vision projector belongs with whichever quantization is chosen, not among the choices.
    projectors = [path for path in gguf if _MMPROJ.search(path)]
    gguf = [path for path in gguf if path not in projectors]
    companions = [
        path
        for path in listed
        if not _ignored(path)
        and path not in safetensors
        and path not in gguf
        and path not in projectors
        and not path.endswith("/")
    ]
    diffusers = "model_index.json" in listed
    weights = _safetensors_weights(safetensors, diffusers=diffusers)
    if weights:
        weights_format = WeightsFormat.DIFFUSERS if diffusers else WeightsFormat.SAFETENSORS
        return Selection(files=tuple(sorted([*weights, *companions])), format=weights_format, refusal=None)
    if gguf:
        return Selection(
            files=tuple(sorted([*_pick_gguf(gguf), *projectors, *companions])),
            format=WeightsFormat.GGUF,
            refusal=None,
        )
    return Selection(
        files=(),
        format=None,
        refusal="the source has no safetensors or GGUF weights; ai-models publishes only those formats",
    )
