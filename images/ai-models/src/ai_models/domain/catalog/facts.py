"""Inference-resource facts of a catalog entry, derived from what the Hub listing says.

Pure: no I/O. `derive_facts` never raises; a fact it cannot derive with certainty is absent
(None), never guessed and never 0-as-unknown. Sources, by precedence:

- parameterCount: the exact safetensors count (`safetensors.total`, else the sum per dtype),
  unless the weights are packed (GPTQ/AWQ/... store several 4-bit values per I32/U8 element, so
  the count of stored elements understates the model); then the GGUF total; then the count the
  config implies (`architectures.estimate_parameters`).
- dtype and weightsBytes: the safetensors per-dtype counts (the dominant dtype by count; bytes =
  sum of count x size).
- everything about the language model: `text_config` (or an equivalent) when present.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ai_models.domain.catalog import dtypes
from ai_models.domain.catalog.architectures import estimate_parameters
from ai_models.domain.catalog.attention import attention_of, has_kv_cache, kv_cache_bytes_per_token
from ai_models.domain.catalog.config_view import (
    ACTIVE_EXPERTS,
    COMPUTE_DTYPE,
    CONTEXT_LENGTH,
    EXPERTS,
    MAX_FACT,
    ConfigView,
    as_name,
    is_int,
)
from ai_models.domain.catalog.record import ResourceFacts, WeightsFormat


@dataclasses.dataclass(frozen=True)
class FactSources:
    """What the indexer knows about one repository; any part may be missing or malformed."""

    config: Mapping[str, Any] | None = None  # parsed config.json
    safetensors_parameters: Mapping[str, int] | None = None  # Hub `safetensors.parameters`: dtype -> count
    safetensors_total: int | None = None  # Hub `safetensors.total`
    gguf: Mapping[str, Any] | None = None  # Hub `gguf`: {"total", "architecture", "context_length", ...}
    tags: Sequence[str] = ()
    library_name: str | None = None
    filenames: Sequence[str] | None = None  # repository file names (siblings), when known


def derive_facts(sources: FactSources) -> ResourceFacts:
    config = ConfigView.of(sources.config) or ConfigView({})
    lm = config.language()
    gguf = ConfigView.of(sources.gguf)
    filenames = _strings(sources.filenames)
    counts = _safetensors_counts(sources.safetensors_parameters)
    weights_format = _format(sources, counts=counts, filenames=filenames, gguf=gguf)
    stored = _stored_counts(counts, weights_format)
    architecture = _architecture(config) or (gguf.name("architecture") if gguf is not None else None)
    family = lm.name("model_type") or config.name("model_type")
    context_length = _context_length(config, lm, gguf)
    facts: dict[str, object] = {
        "format": weights_format,
        "architecture": architecture,
        "family": family,
        "parameter_count": _parameter_count(
            sources, config, counts=counts, gguf=gguf, family=family, architecture=architecture
        ),
        "dtype": dtypes.dominant(stored) if stored else None,
        "quantization": _quantization(config, weights_format=weights_format, filenames=filenames),
        "context_length": context_length,
        "weights_bytes": dtypes.tensor_bytes(stored) if stored else None,
        **_attention_facts(config, lm, architecture=architecture, context_length=context_length),
        **_expert_facts(lm),
    }
    # Every integer fact is bounded in this one place. Field names, not aliases: ResourceFacts
    # populates by name.
    return ResourceFacts.model_validate(
        {name: _bounded(value) if is_int(value) else value for name, value in facts.items()}
    )


def listed_weights_bytes(sources: FactSources) -> int | None:
    """The `weightsBytes` the listing alone gives (config.json plays no part in it), so the indexer
    knows which models need a size from elsewhere before it builds their records."""
    filenames = _strings(sources.filenames)
    counts = _safetensors_counts(sources.safetensors_parameters)
    weights_format = _format(sources, counts=counts, filenames=filenames, gguf=ConfigView.of(sources.gguf))
    stored = _stored_counts(counts, weights_format)
    return _bounded_or_none(dtypes.tensor_bytes(stored) if stored else None)


def _stored_counts(
    counts: Mapping[str, int] | None, weights_format: WeightsFormat | None
) -> Mapping[str, int] | None:
    # Safetensors counts describe the safetensors files, not a GGUF conversion next to them.
    return counts if weights_format is not WeightsFormat.GGUF else None


def _bounded_or_none(value: int | None) -> int | None:
    return None if value is None else _bounded(value)


def _bounded(value: int) -> int | None:
    return value if 0 <= value <= MAX_FACT else None


def _attention_facts(
    config: ConfigView, lm: ConfigView, *, architecture: str | None, context_length: int | None
) -> dict[str, object]:
    attention = attention_of(lm)
    kv_bytes = None
    if has_kv_cache(config, lm, architecture=architecture):
        kv_bytes = kv_cache_bytes_per_token(
            lm,
            attention,
            dtype_bytes=dtypes.compute_bytes(_compute_dtype(config, lm)),
            context_length=context_length,
        )
    return {
        "attention": attention.kind,
        "layers": attention.layers,
        "kv_heads": attention.kv_heads,
        "head_dim": attention.head_dim,
        "kv_cache_bytes_per_token": kv_bytes,
    }


def _expert_facts(lm: ConfigView) -> dict[str, object]:
    """The expert count, and the experts each token is routed to: only alongside an expert count,
    and never more than it."""
    experts = lm.integer(*EXPERTS)
    if experts is None:
        return {}
    active = lm.integer(*ACTIVE_EXPERTS)
    return {
        "experts": experts,
        "active_experts": active if active is not None and active <= experts else None,
    }


def _strings(values: object) -> tuple[str, ...]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        return ()
    return tuple(value for value in values if isinstance(value, str))


def _count(value: object) -> int | None:
    return int(value) if is_int(value) and 0 <= value <= MAX_FACT else None


def _safetensors_counts(raw: object) -> dict[str, int] | None:
    """Element counts per dtype, or None when missing or when any entry is malformed (a partial
    listing would give a wrong dtype and wrong bytes)."""
    if not isinstance(raw, Mapping) or not raw:
        return None
    counts: dict[str, int] = {}
    for name, value in raw.items():
        dtype, count = dtypes.dtype_key(name), _count(value)
        if dtype is None or count is None:
            return None
        counts[dtype] = counts.get(dtype, 0) + count
    return counts if any(counts.values()) else None  # a listing of nothing says nothing


# --- format ------------------------------------------------------------------------------------


def _format(
    sources: FactSources,
    *,
    counts: Mapping[str, int] | None,
    filenames: Sequence[str],
    gguf: ConfigView | None,
) -> WeightsFormat | None:
    """Diffusers pipelines first (they hold safetensors too); a repository the Hub files under the
    `gguf` library is GGUF; parsed safetensors metadata means Safetensors even when a GGUF
    conversion sits next to it; then the weaker evidence of the GGUF listing and file names."""
    library = sources.library_name.lower() if isinstance(sources.library_name, str) else None
    tags = {tag.lower() for tag in _strings(sources.tags)}
    names = [name.lower() for name in filenames]
    if library == "diffusers" or "diffusers" in tags or "model_index.json" in names:
        return WeightsFormat.DIFFUSERS
    if library == "gguf":
        return WeightsFormat.GGUF
    if counts or _count(sources.safetensors_total):
        return WeightsFormat.SAFETENSORS
    if gguf is not None:
        return WeightsFormat.GGUF
    if any(name.endswith(".safetensors") for name in names):
        return WeightsFormat.SAFETENSORS
    if "gguf" in tags or any(name.endswith(".gguf") for name in names):
        return WeightsFormat.GGUF
    return None


# --- identity and context --------------------------------------------------------------------


def _architecture(config: ConfigView) -> str | None:
    architectures = config.raw.get("architectures")
    if isinstance(architectures, list) and architectures:
        return as_name(architectures[0])
    return None


def _context_length(config: ConfigView, lm: ConfigView, gguf: ConfigView | None) -> int | None:
    """The trained position limit; rope_scaling is not applied (its conventions differ by
    family, and configs such as Llama 3.1's already state the extended length). The GGUF
    listing's `context_length` serves repositories without a config that states one."""
    for view in (lm, config):
        if view.has(*CONTEXT_LENGTH):
            return view.integer(*CONTEXT_LENGTH)
    return gguf.integer("context_length") if gguf is not None else None


def _compute_dtype(config: ConfigView, lm: ConfigView) -> str | None:
    """The language model's `torch_dtype`/`dtype`, else the top level's (Gemma 3 states it only
    there)."""
    for view in (lm, config):
        if view.has(*COMPUTE_DTYPE):
            return dtypes.config_dtype(view.text(*COMPUTE_DTYPE))
    return None


# --- parameters -----------------------------------------------------------------------------


def _parameter_count(
    sources: FactSources,
    config: ConfigView,
    *,
    counts: Mapping[str, int] | None,
    gguf: ConfigView | None,
    family: str | None,
    architecture: str | None,
) -> int | None:
    exact = _count(sources.safetensors_total) or (sum(counts.values()) if counts else None)
    if exact and not _packs_weights(_quantization_config(config)):
        return exact
    gguf_total = gguf.integer("total", maximum=MAX_FACT) if gguf is not None else None
    if gguf_total:
        return gguf_total
    return estimate_parameters(config, family=family, architecture=architecture)


# --- quantization ---------------------------------------------------------------------------

# Methods that pack several sub-byte weights into one stored element (I32 for GPTQ/AWQ, U8 for
# MXFP4), so the stored element count is not the parameter count.
_PACKED_METHODS = frozenset({"gptq", "awq", "aqlm", "hqq", "exl2", "mxfp4"})

# A GGUF quantization label in a file name: Q4_K_M, IQ2_XXS, Q8_0, TQ1_0, MXFP4_MOE, BF16, F16, F32.
_GGUF_LABEL = re.compile(
    r"(?<![A-Za-z0-9])(I?Q\d+(?:_[A-Za-z0-9]+)*|TQ\d_\d|MXFP4(?:_MOE)?|BF16|F16|F32)(?![A-Za-z0-9])",
    re.IGNORECASE | re.ASCII,
)


def _quantization_config(config: ConfigView) -> ConfigView | None:
    for view in (config, config.language()):
        found = view.child("quantization_config") or view.child("compression_config")
        if found is not None:
            return found
    return None


def _quant_method(quantization: ConfigView) -> str | None:
    method = quantization.name("quant_method")
    if method is not None:
        return method.lower()
    # Configs written before transformers named the method carry only the bitsandbytes switches.
    if quantization.flag("load_in_4bit") is True or quantization.flag("load_in_8bit") is True:
        return "bitsandbytes"
    return None


def _packs_weights(quantization: ConfigView | None) -> bool:
    if quantization is None:
        return False
    method = _quant_method(quantization)
    if method in _PACKED_METHODS:
        return True
    if method == "bitsandbytes":
        return quantization.flag("load_in_4bit") is True
    if method == "compressed-tensors":
        # The top-level format, or one per scheme group in mixed-precision checkpoints.
        groups = quantization.child("config_groups")
        views = [quantization, *(ConfigView.of(group) for group in (groups.raw.values() if groups else ()))]
        return any("pack-quantized" in (view.text("format") or "") for view in views if view is not None)
    if method == "modelopt":
        algorithm = (quantization.text("quant_algo") or "").upper()
        return "FP4" in algorithm or "INT4" in algorithm or algorithm.startswith("W4")
    return False


def _quantization(
    config: ConfigView, *, weights_format: WeightsFormat | None, filenames: Sequence[str]
) -> str | None:
    quantization = _quantization_config(config)
    if quantization is not None:
        return _quant_method(quantization)
    if weights_format is WeightsFormat.GGUF:
        return _gguf_file_type(filenames)
    return None


def _gguf_file_type(filenames: Sequence[str]) -> str | None:
    """The file type when every GGUF weight file of the repository names the same one; a repo
    offering several quantizations has no single answer. Vision projectors (mmproj) are not
    the model's weights."""
    labels = set()
    for name in filenames:
        base = name.rsplit("/", 1)[-1].lower()
        if not base.endswith(".gguf") or base.startswith("mmproj"):
            continue
        found = _GGUF_LABEL.findall(name)
        if not found:
            return None
        labels.add(found[-1].upper())
    return labels.pop() if len(labels) == 1 else None
