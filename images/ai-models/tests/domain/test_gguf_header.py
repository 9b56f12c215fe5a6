"""The GGUF header parser: the facts of real files, from any prefix of them, and no surprises from
hostile bytes."""

from __future__ import annotations

import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ai_models.domain.artifacts.gguf import FILE_TYPES, GgufFormatError, GgufHeader, parse_gguf_header
from fakes.model_files import (
    GGML_F16,
    GGML_F32,
    GGUF_ARRAY,
    GGUF_INT32,
    GGUF_STRING,
    GGUF_UINT32,
    GGUF_UINT64,
    TINY_GGUF_PARAMETERS,
    Typed,
    gguf_bytes,
    tiny_gguf,
)

BOUNDED = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_a_real_file_gives_its_facts() -> None:
    header = parse_gguf_header(
        tiny_gguf(architecture="qwen2", context_length=32768, block_count=24, file_type=15)
    )

    assert header.version == 3
    assert header.complete
    assert header.tensor_count == 3
    assert header.architecture == "qwen2"
    assert header.context_length == 32768
    assert header.block_count == 24
    assert header.file_type == "Q4_K_M"
    assert header.parameter_count == TINY_GGUF_PARAMETERS
    assert header.metadata["general.name"] == "tiny"
    assert header.metadata["qwen2.rope.freq_base"] == pytest.approx(10000.0)
    assert "tokenizer.ggml.tokens" not in header.metadata  # arrays are walked over, not kept


def test_version_2_files_are_read_too() -> None:
    data = gguf_bytes(metadata={"general.architecture": "llama", "llama.context_length": 2048}, version=2)
    assert parse_gguf_header(data).context_length == 2048


def test_every_prefix_gives_the_facts_it_holds_and_never_raises() -> None:
    data = tiny_gguf()
    full = parse_gguf_header(data)
    previous: GgufHeader | None = None
    for length in range(24, len(data) + 1):
        header = parse_gguf_header(data[:length])
        assert set(header.metadata) <= set(full.metadata)
        for key, value in header.metadata.items():
            assert full.metadata[key] == value
        if previous is not None:
            assert set(previous.metadata) <= set(header.metadata)
        assert header.complete == (header.tensor_elements is not None)
        previous = header
    assert previous == full


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not a GGUF file"),
        (b"GGML" + bytes(40), "not a GGUF file"),
        (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "version 1 is not supported"),
        (b"GGUF" + struct.pack(">IQQ", 3, 0, 0), "is not supported"),  # big-endian
    ],
)
def test_other_bytes_are_refused_with_a_reason(data: bytes, message: str) -> None:
    with pytest.raises(GgufFormatError, match=message):
        parse_gguf_header(data)


def test_lying_counts_and_lengths_end_at_the_end_of_the_bytes_quickly() -> None:
    start = b"GGUF" + struct.pack("<IQQ", 3, 2**63, 2**63)
    key = struct.pack("<Q", 20) + b"general.architecture"
    huge_string = key + struct.pack("<IQ", GGUF_STRING, 2**62)
    huge_array = key + struct.pack("<IIQ", GGUF_ARRAY, GGUF_UINT64, 2**61)
    many_strings = key + struct.pack("<IIQ", GGUF_ARRAY, GGUF_STRING, 2**61) + struct.pack("<Q", 3) + b"abc"
    began = time.monotonic()
    for tail in (huge_string, huge_array, many_strings, b"\xff" * 1000):
        header = parse_gguf_header(start + tail)
        assert not header.complete
        assert header.metadata == {}
    assert time.monotonic() - began < 1


def test_an_unknown_value_type_stops_parsing_but_keeps_what_came_before() -> None:
    data = gguf_bytes(metadata={"general.architecture": "llama", "llama.block_count": Typed(GGUF_UINT32, 4)})
    cut = data.index(b"llama.block_count") + len(b"llama.block_count")
    broken = data[:cut] + struct.pack("<I", 99) + data[cut + 4 :]
    header = parse_gguf_header(broken)
    assert header.metadata == {"general.architecture": "llama"}
    assert not header.complete


def test_nested_arrays_are_walked_to_a_bounded_depth() -> None:
    inner = struct.pack("<IQ", GGUF_INT32, 2) + struct.pack("<ii", 1, 2)
    two_deep = struct.pack("<IQ", GGUF_ARRAY, 1) + inner
    key = b"x.nested"
    entry = struct.pack("<Q", len(key)) + key + struct.pack("<I", GGUF_ARRAY) + two_deep
    tail = struct.pack("<Q", 12) + b"general.name" + struct.pack("<IQ", GGUF_STRING, 2) + b"ok"
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + entry + tail
    assert parse_gguf_header(data).metadata == {"general.name": "ok"}

    deep = inner
    for _level in range(5):
        deep = struct.pack("<IQ", GGUF_ARRAY, 1) + deep
    entry = struct.pack("<Q", len(key)) + key + struct.pack("<I", GGUF_ARRAY) + deep
    assert parse_gguf_header(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + entry + tail).metadata == {}


def test_long_strings_are_skipped_and_short_ones_kept() -> None:
    data = gguf_bytes(
        metadata={"tokenizer.chat_template": "x" * 5000, "general.architecture": "llama"},
        tensors={"w": (GGML_F32, (4, 4))},
    )
    header = parse_gguf_header(data)
    assert "tokenizer.chat_template" not in header.metadata
    assert header.architecture == "llama"
    assert header.parameter_count == 16


def test_file_types_by_llama_cpp_names() -> None:
    assert FILE_TYPES[15] == "Q4_K_M"
    assert FILE_TYPES[7] == "Q8_0"
    assert FILE_TYPES[32] == "BF16"
    guessed = gguf_bytes(metadata={"general.file_type": Typed(GGUF_UINT32, 1024 + 18)})
    assert parse_gguf_header(guessed).file_type == "Q6_K"
    unknown = gguf_bytes(metadata={"general.file_type": Typed(GGUF_UINT32, 5)})
    assert parse_gguf_header(unknown).file_type is None


def test_a_declared_parameter_count_serves_when_no_tensor_is_described() -> None:
    data = gguf_bytes(metadata={"general.parameter_count": Typed(GGUF_UINT64, 7_000_000_000)})
    assert parse_gguf_header(data).parameter_count == 7_000_000_000
    with_tensors = gguf_bytes(
        metadata={"general.parameter_count": Typed(GGUF_UINT64, 5)}, tensors={"w": (GGML_F16, (3, 2))}
    )
    assert parse_gguf_header(with_tensors).parameter_count == 6


def test_facts_of_the_wrong_type_are_not_facts() -> None:
    data = gguf_bytes(
        metadata={
            "general.architecture": "llama",
            "llama.context_length": "long",
            "llama.block_count": True,
            "general.file_type": -1.5,
        }
    )
    header = parse_gguf_header(data)
    assert header.context_length is None
    assert header.block_count is None
    assert header.file_type is None


@BOUNDED
@given(st.binary(max_size=400), st.integers(min_value=0, max_value=2**64 - 1), st.integers(0, 2**64 - 1))
def test_arbitrary_bytes_after_the_header_never_raise(tail: bytes, tensors: int, entries: int) -> None:
    header = parse_gguf_header(b"GGUF" + struct.pack("<IQQ", 3, tensors, entries) + tail)
    assert header.tensor_count == tensors
    assert all(isinstance(key, str) for key in header.metadata)


@BOUNDED
@given(st.data())
def test_corrupting_a_real_file_never_raises(data: st.DataObject) -> None:
    original = bytearray(tiny_gguf())
    for _change in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(24, len(original) - 1))
        original[at] = data.draw(st.integers(0, 255))
    header = parse_gguf_header(bytes(original))
    if header.parameter_count is not None:
        assert header.parameter_count >= 0
