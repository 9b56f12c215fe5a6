"""The GGUF header parser: the facts of real files, strictly checked against the file, and a
refusal (never another exception, never a partial header) for anything else."""

from __future__ import annotations

import struct
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ai_models.domain.artifacts.gguf import FILE_TYPES, GgufFormatError, parse_gguf_header
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


W: dict[str, tuple[int, tuple[int, ...]]] = {"w": (GGML_F32, (4, 4))}  # one real tensor


def test_version_2_files_are_read_too() -> None:
    data = gguf_bytes(
        metadata={"general.architecture": "llama", "llama.context_length": 2048}, tensors=W, version=2
    )
    assert parse_gguf_header(data).context_length == 2048


def test_a_prefix_holding_the_whole_header_gives_the_facts_and_a_shorter_one_is_refused() -> None:
    data = tiny_gguf()
    full = parse_gguf_header(data)
    header_end = data.index(b"output.weight") + len(b"output.weight") + 4 + 16 + 4 + 8
    for length in range(24, len(data) + 1):
        if length >= header_end:
            assert parse_gguf_header(data[:length], file_size=len(data)) == full
        else:
            with pytest.raises(GgufFormatError, match="goes on past the first"):
                parse_gguf_header(data[:length], file_size=len(data))


def test_an_88_byte_garbage_gguf_is_refused() -> None:
    garbage = bytes((index * 73 + 41) % 256 for index in range(64))
    data = b"GGUF" + struct.pack("<IQQ", 3, 2, 3) + garbage
    assert len(data) == 88

    with pytest.raises(GgufFormatError):
        parse_gguf_header(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not a GGUF file"),
        (b"GGML" + bytes(40), "not a GGUF file"),
        (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "version 1 is not supported"),
        (b"GGUF" + struct.pack(">IQQ", 3, 0, 0), "is not supported"),  # big-endian
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 0), "describes no tensors"),
        (b"GGUF" + struct.pack("<IQQ", 3, 1, 2**40), "more than a file"),
    ],
)
def test_other_bytes_are_refused_with_a_reason(data: bytes, message: str) -> None:
    with pytest.raises(GgufFormatError, match=message):
        parse_gguf_header(data)


def test_lying_counts_and_lengths_are_refused_quickly() -> None:
    start = b"GGUF" + struct.pack("<IQQ", 3, 1, 1)
    key = struct.pack("<Q", 20) + b"general.architecture"
    huge_string = key + struct.pack("<IQ", GGUF_STRING, 2**62)
    huge_array = key + struct.pack("<IIQ", GGUF_ARRAY, GGUF_UINT64, 2**61)
    many_strings = key + struct.pack("<IIQ", GGUF_ARRAY, GGUF_STRING, 2**61) + struct.pack("<Q", 3) + b"abc"
    began = time.monotonic()
    for tail in (huge_string, huge_array, many_strings, b"\xff" * 1000):
        with pytest.raises(GgufFormatError):
            parse_gguf_header(start + tail, file_size=10 * 1024**3)  # within a big file: still lies
    assert time.monotonic() - began < 1


def test_an_unknown_value_type_is_refused() -> None:
    data = gguf_bytes(
        metadata={"general.architecture": "llama", "llama.block_count": Typed(GGUF_UINT32, 4)}, tensors=W
    )
    cut = data.index(b"llama.block_count") + len(b"llama.block_count")
    broken = data[:cut] + struct.pack("<I", 99) + data[cut + 4 :]

    with pytest.raises(GgufFormatError, match="value type 99 does not exist"):
        parse_gguf_header(broken)


def _with_tensor(metadata_entries: bytes, count: int) -> bytes:
    """A header of `count` raw metadata entries and one F32 tensor of 4 elements, with its data."""
    tensor = (
        struct.pack("<Q", 1)
        + b"w"
        + struct.pack("<I", 1)
        + struct.pack("<Q", 4)
        + struct.pack("<IQ", GGML_F32, 0)
    )
    header = b"GGUF" + struct.pack("<IQQ", 3, 1, count) + metadata_entries + tensor
    return header + bytes(-len(header) % 32) + bytes(16)


def test_nested_arrays_are_walked_to_a_bounded_depth() -> None:
    inner = struct.pack("<IQ", GGUF_INT32, 2) + struct.pack("<ii", 1, 2)
    two_deep = struct.pack("<IQ", GGUF_ARRAY, 1) + inner
    key = b"x.nested"
    entry = struct.pack("<Q", len(key)) + key + struct.pack("<I", GGUF_ARRAY) + two_deep
    tail = struct.pack("<Q", 12) + b"general.name" + struct.pack("<IQ", GGUF_STRING, 2) + b"ok"
    assert parse_gguf_header(_with_tensor(entry + tail, 2)).metadata == {"general.name": "ok"}

    deep = inner
    for _level in range(5):
        deep = struct.pack("<IQ", GGUF_ARRAY, 1) + deep
    entry = struct.pack("<Q", len(key)) + key + struct.pack("<I", GGUF_ARRAY) + deep
    with pytest.raises(GgufFormatError, match="nest deeper"):
        parse_gguf_header(_with_tensor(entry + tail, 2))


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
    guessed = gguf_bytes(metadata={"general.file_type": Typed(GGUF_UINT32, 1024 + 18)}, tensors=W)
    assert parse_gguf_header(guessed).file_type == "Q6_K"
    unknown = gguf_bytes(metadata={"general.file_type": Typed(GGUF_UINT32, 5)}, tensors=W)
    assert parse_gguf_header(unknown).file_type is None


def test_the_tensors_count_the_parameters_whatever_the_metadata_declares() -> None:
    with_tensors = gguf_bytes(
        metadata={"general.parameter_count": Typed(GGUF_UINT64, 7_000_000_000)},
        tensors={"w": (GGML_F16, (3, 2))},
    )
    assert parse_gguf_header(with_tensors).parameter_count == 6


def test_facts_of_the_wrong_type_are_not_facts() -> None:
    data = gguf_bytes(
        metadata={
            "general.architecture": "llama",
            "llama.context_length": "long",
            "llama.block_count": True,
            "general.file_type": -1.5,
        },
        tensors=W,
    )
    header = parse_gguf_header(data)
    assert header.context_length is None
    assert header.block_count is None
    assert header.file_type is None


def _tensor_info(name: bytes, dims: tuple[int, ...], ggml_type: int, offset: int) -> bytes:
    return (
        struct.pack("<Q", len(name))
        + name
        + struct.pack("<I", len(dims))
        + b"".join(struct.pack("<Q", dim) for dim in dims)
        + struct.pack("<IQ", ggml_type, offset)
    )


def _file(infos: list[bytes], data_bytes: int, *, metadata: bytes = b"", entries: int = 0) -> bytes:
    header = b"GGUF" + struct.pack("<IQQ", 3, len(infos), entries) + metadata + b"".join(infos)
    return header + bytes(-len(header) % 32) + bytes(data_bytes)


@pytest.mark.parametrize(
    ("infos", "data_bytes", "message"),
    [
        ([_tensor_info(b"w", (1000, 1000), GGML_F32, 0)], 64, "the tensors need"),
        ([_tensor_info(b"w", (4,), GGML_F32, 8)], 64, "unaligned"),
        ([_tensor_info(b"a", (4,), GGML_F32, 32), _tensor_info(b"b", (4,), GGML_F32, 0)], 64, "was due"),
        ([_tensor_info(b"w", (4,), GGML_F32, 0), _tensor_info(b"w", (4,), GGML_F32, 32)], 64, "named twice"),
        ([_tensor_info(b"q", (16,), 2, 0)], 64, "whole blocks"),  # Q4_0 rows are blocks of 32
        ([_tensor_info(b"w", (2, 2, 2, 2, 2), GGML_F32, 0)], 256, "5 dimensions"),
        ([_tensor_info(b"w", (4,), 4000, 0)], 64, "impossible"),
        ([_tensor_info(b"w", (0,), GGML_F32, 0)], 0, "no elements"),
    ],
    ids=[
        "data past the end",
        "unaligned",
        "out of order",
        "a name twice",
        "partial block",
        "5-D",
        "type",
        "empty",
    ],
)
def test_tensor_descriptions_inconsistent_with_the_file_are_refused(
    infos: list[bytes], data_bytes: int, message: str
) -> None:
    with pytest.raises(GgufFormatError, match=message):
        parse_gguf_header(_file(infos, data_bytes))


def test_quantized_and_newer_tensor_types_are_sized_by_their_blocks() -> None:
    q4_k = _tensor_info(b"q", (256, 2), 12, 0)  # two Q4_K blocks of 144 bytes
    newer = _tensor_info(b"n", (64,), 200, 288)  # a type this table does not know yet: 8 bytes at least
    header = parse_gguf_header(_file([q4_k, newer], 288 + 8))
    assert header.parameter_count == 512 + 64

    with pytest.raises(GgufFormatError, match="the tensors need"):
        parse_gguf_header(_file([q4_k], 287))


def test_a_hostile_header_of_the_most_entries_stays_small_in_memory() -> None:
    entries = b"".join(
        struct.pack("<Q", 8) + b"k%07d" % index + struct.pack("<II", GGUF_UINT32, index)
        for index in range(65536)
    )
    data = _with_tensor(entries, 65536)
    tracemalloc.start()
    try:
        header = parse_gguf_header(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(header.metadata) == 65536
    assert peak < 32 * 1024 * 1024


@BOUNDED
@given(st.binary(max_size=400), st.integers(min_value=0, max_value=2**64 - 1), st.integers(0, 2**64 - 1))
def test_arbitrary_bytes_after_the_header_give_facts_or_a_refusal(
    tail: bytes, tensors: int, entries: int
) -> None:
    try:
        header = parse_gguf_header(b"GGUF" + struct.pack("<IQQ", 3, tensors, entries) + tail)
    except GgufFormatError:
        return
    assert header.tensor_count == tensors
    assert all(isinstance(key, str) for key in header.metadata)


@BOUNDED
@given(st.data())
def test_corrupting_a_real_file_gives_consistent_facts_or_a_refusal(data: st.DataObject) -> None:
    original = bytearray(tiny_gguf())
    for _change in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(24, len(original) - 1))
        original[at] = data.draw(st.integers(0, 255))
    try:
        header = parse_gguf_header(bytes(original))
    except GgufFormatError:
        return
    assert header.tensor_elements is not None
    assert 0 < header.tensor_elements <= len(original) * 8
