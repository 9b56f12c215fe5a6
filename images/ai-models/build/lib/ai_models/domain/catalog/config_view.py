"""Typed, adversarial-safe reads from a parsed `config.json`.

A config is whatever JSON the repository author wrote, so every read checks the type and the
range and answers None when the value is unusable; nothing here raises for any input. Reads never
recurse, so self-referencing or deeply nested values cost nothing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, TypeGuard

# No dimension, count or length in a real config comes near int32; a larger number is garbage,
# and bounding every input keeps every product of them cheap.
MAX_CONFIG_INT = 2**31 - 1
# The largest fact we publish: integers above 2**53 lose precision in JSON clients (JavaScript),
# and no real parameter count or byte size comes near it (10**15).
MAX_FACT = 2**53 - 1

# Names we pass on (architecture, family, quantization method) look like identifiers; anything
# else (huge strings, control characters, prose) is not a name.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")

# Aliases of one notion across families, first match wins. One place for each.
HIDDEN_SIZE = ("hidden_size", "n_embd", "d_model")
LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
HEADS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_head_kv")
VOCAB = ("vocab_size",)
INTERMEDIATE = ("intermediate_size", "n_inner")
CONTEXT_LENGTH = (
    "max_position_embeddings",
    "n_positions",
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
)
COMPUTE_DTYPE = ("torch_dtype", "dtype")
EXPERTS = ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")
# Not bare `top_k`: old configs carry it as a sampling parameter (50), not a router width.
ACTIVE_EXPERTS = ("num_experts_per_tok", "experts_per_token", "moe_top_k")

# Where multimodal configs keep the language model; the first present one is it.
LANGUAGE_CONFIG = ("text_config", "llm_config", "language_config")
# Keys that mark a config as describing more than a language model.
MULTIMODAL_MARKERS = (*LANGUAGE_CONFIG, "vision_config", "audio_config", "vision_tower", "mm_vision_tower")


def is_int(value: object) -> TypeGuard[int]:
    """A JSON integer: bool is an int subclass in Python but never a count."""
    return isinstance(value, int) and not isinstance(value, bool)


def as_name(value: object) -> str | None:
    if isinstance(value, str) and _NAME.fullmatch(value):
        return value
    return None


@dataclasses.dataclass(frozen=True)
class ConfigView:
    """One level of a config; `child` opens a nested one."""

    raw: Mapping[Any, Any]

    @classmethod
    def of(cls, value: object) -> ConfigView | None:
        return cls(value) if isinstance(value, Mapping) else None

    def has(self, *keys: str) -> bool:
        """Is any of the keys present with a non-null value (JSON null means "not set")."""
        return any(self.raw.get(key) is not None for key in keys)

    def _first(self, keys: tuple[str, ...]) -> object:
        for key in keys:
            value = self.raw.get(key)
            if value is not None:
                return value
        return None

    def integer(
        self, *keys: str, minimum: int = 1, maximum: int = MAX_CONFIG_INT, default: int | None = None
    ) -> int | None:
        """The first present key decides: a missing or null key gives `default`, a malformed or
        out-of-range value gives None (a wrong value is never replaced by the default)."""
        value = self._first(keys)
        if value is None:
            return default
        if is_int(value) and minimum <= value <= maximum:
            return int(value)
        return None

    def text(self, *keys: str) -> str | None:
        value = self._first(keys)
        return value if isinstance(value, str) else None

    def name(self, *keys: str) -> str | None:
        return as_name(self._first(keys))

    def flag(self, key: str, *, default: bool | None = None) -> bool | None:
        """A JSON boolean; missing or null gives `default`, anything else None."""
        value = self.raw.get(key)
        if value is None:
            return default
        return value if isinstance(value, bool) else None

    def child(self, key: str) -> ConfigView | None:
        return ConfigView.of(self.raw.get(key))

    def strings(self, key: str) -> tuple[str, ...] | None:
        """A list of strings, or None when missing or when any element is not a string."""
        value = self.raw.get(key)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            return None
        return tuple(value)

    def integers(self, key: str) -> tuple[int, ...] | None:
        """A list of non-negative integers, or None when missing or malformed."""
        value = self.raw.get(key)
        if not isinstance(value, list) or not all(is_int(i) and 0 <= i <= MAX_CONFIG_INT for i in value):
            return None
        return tuple(int(i) for i in value)

    def language(self) -> ConfigView:
        """The language model's config: `text_config` (or an equivalent) when present, else this."""
        for key in LANGUAGE_CONFIG:
            nested = self.child(key)
            if nested is not None:
                return nested
        return self

    def is_multimodal(self) -> bool:
        return self.has(*MULTIMODAL_MARKERS)
