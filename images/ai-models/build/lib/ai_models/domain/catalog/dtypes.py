"""Element types in safetensors notation: their sizes, and the names configs use for them."""

from __future__ import annotations

import re
from collections.abc import Mapping

# The one table of sizes, in bits so that sub-byte types (F4, F6) fit; safetensors' own names.
DTYPE_BITS: Mapping[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E4M3": 8,
    "F8_E5M2": 8,
    "F8_E8M0": 8,
    "U16": 16,
    "I16": 16,
    "F16": 16,
    "BF16": 16,
    "U32": 32,
    "I32": 32,
    "F32": 32,
    "U64": 64,
    "I64": 64,
    "F64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}

# torch / transformers spellings of `torch_dtype` and `dtype` in config.json.
_CONFIG_NAMES: Mapping[str, str] = {
    "float32": "F32",
    "float": "F32",
    "fp32": "F32",
    "float16": "F16",
    "half": "F16",
    "fp16": "F16",
    "bfloat16": "BF16",
    "bf16": "BF16",
    "float64": "F64",
    "double": "F64",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
    "int8": "I8",
    "uint8": "U8",
}

# Types a model computes (and so keeps its KV cache) in. A config naming a storage-only type
# (float8, int8) says nothing certain about the compute type, so it gives no KV size.
_COMPUTE = frozenset({"F16", "BF16", "F32", "F64"})

# A key of a safetensors parameter listing that could be a dtype we do not know yet.
_DTYPE_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,15}")


def dtype_key(name: object) -> str | None:
    """A safetensors dtype name as listed by the Hub (upper case), or None when it is not one."""
    if not isinstance(name, str):
        return None
    upper = name.upper()
    return upper if _DTYPE_NAME.fullmatch(upper) else None


def config_dtype(name: object) -> str | None:
    """The safetensors name of a config's `torch_dtype`/`dtype` ("bfloat16", "torch.float16")."""
    if not isinstance(name, str):
        return None
    return _CONFIG_NAMES.get(name.lower().removeprefix("torch."))


def compute_bytes(dtype: str | None) -> int | None:
    """Bytes per element of a compute dtype; None for storage-only or unknown types."""
    if dtype not in _COMPUTE:
        return None
    return DTYPE_BITS[dtype] // 8


def tensor_bytes(counts: Mapping[str, int]) -> int | None:
    """Exact bytes of tensors with these element counts per dtype; None if any dtype is unknown.

    Sub-byte types pack two or more elements per byte; a partial byte is rounded up.
    """
    total = 0
    for dtype, count in counts.items():
        bits = DTYPE_BITS.get(dtype)
        if bits is None:
            return None
        total += -(-count * bits // 8)
    return total


def dominant(counts: Mapping[str, int]) -> str | None:
    """The dtype holding the most elements; ties go to the larger type, then the name, so the
    answer never depends on the listing's order."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], -DTYPE_BITS.get(item[0], 0), item[0]))
    if not ranked or ranked[0][1] == 0:
        return None
    return ranked[0][0]
