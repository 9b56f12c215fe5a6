"""The safetensors header parser: real files give their element counts; a header that does not
describe its file exactly is refused (never another exception), in bounded memory."""

from __future__ import annotations

import json
import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ai_models.domain.artifacts.safetensors import (
    MAX_HEADER_BYTES,
    MAX_TENSORS,
    SafetensorsFormatError,
    header_length,
    parse_safetensors_header,
)
from fakes.model_files import safetensors_bytes, safetensors_element_counts, synthetic_safetensors

TENSORS = {"embed": ("BF16", (50, 32)), "norm": ("F32", (32,)), "scale": ("F8_E4M3", (7,))}


def parse(data: bytes) -> dict[str, int]:
    length = header_length(data[:8], file_size=len(data))
    return dict(parse_safetensors_header(data[8 : 8 + length], file_size=len(data)).counts)


def file_of(document: object, data_bytes: int) -> bytes:
    header = json.dumps(document).encode()
    return struct.pack("<Q", len(header)) + header + bytes(data_bytes)


def test_a_real_file_gives_its_element_counts() -> None:
    assert parse(safetensors_bytes(TENSORS, metadata={"format": "pt", "dtype": "bf16"})) == (
        safetensors_element_counts(TENSORS)
    )


def test_a_header_padded_with_spaces_is_read() -> None:
    synthetic = synthetic_safetensors(4096, dtype="F16")
    data = synthetic.prefix + bytes(4096 - len(synthetic.prefix))
    assert sum(parse(data).values()) > 0


def test_the_95_byte_file_declaring_four_gigabytes_is_refused() -> None:
    header = b'{"weight":{"dtype":"F32","shape":[1000000000],"data_offsets":[0,4000000000]}}'
    data = struct.pack("<Q", len(header)) + header + bytes(95 - 8 - len(header))
    assert len(data) == 95

    with pytest.raises(
        SafetensorsFormatError, match="the tensors take 4000000000 bytes, but the file holds 10"
    ):
        parse(data)


@pytest.mark.parametrize(
    ("document", "data_bytes", "message"),
    [
        ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}, 8, "it takes 16 bytes"),
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, 16, "starts at byte 8"),
        (
            {
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
            },
            12,
            "gap or overlap",
        ),
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, 9, "holds 9 bytes of data"),
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, 8, "no valid dtype"),
        ({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, 8, "no valid dtype"),
        ({"w": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}, 8, "no valid dtype"),
        ({"w": {"dtype": 7, "shape": [2], "data_offsets": [0, 8]}}, 8, "no valid dtype"),
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "extra": 1}}, 8, "no valid dtype"),
        ({"w": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}, 2, "1.5 bytes"),
        ({"w": {"dtype": "Q1", "shape": [1000], "data_offsets": [0, 2]}}, 2, "cannot fit in its 2 bytes"),
        ({"w": {"dtype": "F32", "shape": [2] * 17, "data_offsets": [0, 8]}}, 8, "no valid dtype"),
        ({"w": "F32"}, 0, "no valid dtype"),
        ({"__metadata__": {"format": "pt"}}, 0, "holds no tensors"),
        ({"__metadata__": {"n": 1}}, 0, "no valid dtype"),
        ([1, 2], 0, "not a JSON object"),
    ],
)
def test_a_header_that_does_not_describe_its_file_is_refused(
    document: object, data_bytes: int, message: str
) -> None:
    with pytest.raises(SafetensorsFormatError, match=message):
        parse(file_of(document, data_bytes))


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "w": {}}', "twice"),
        (b'{"w": {"dtype": "F32", "shape": [NaN], "data_offsets": [0, 4]}}', "NaN"),
        ('{"w": {"dtype": "F32"}}'.encode("utf-16-le"), "not a JSON object|not UTF-8"),
        (b"{" + b"[" * 100_000, "not UTF-8 JSON"),
        (
            b'{"w": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 4]}}',
            "not UTF-8 JSON",
        ),
    ],
    ids=["a name twice", "NaN", "UTF-16", "deep nesting", "a 5000-digit number"],
)
def test_what_json_parsers_disagree_on_is_refused(header: bytes, message: str) -> None:
    data = struct.pack("<Q", len(header)) + header + bytes(4)
    with pytest.raises(SafetensorsFormatError, match=message):
        parse(data)


@pytest.mark.parametrize(
    ("prefix", "file_size", "message"),
    [
        (b"", 3, "cannot hold"),
        (struct.pack("<Q", 1), 100, "does not fit"),
        (struct.pack("<Q", 200), 100, "does not fit"),
        (struct.pack("<Q", MAX_HEADER_BYTES + 1), 2 * MAX_HEADER_BYTES, "a publisher reads"),
    ],
)
def test_a_header_length_that_does_not_fit_is_refused_before_it_is_read(
    prefix: bytes, file_size: int, message: str
) -> None:
    with pytest.raises(SafetensorsFormatError, match=message):
        header_length(prefix, file_size=file_size)


def test_more_tensors_than_the_cap_are_refused_in_bounded_memory() -> None:
    entry = '"t%07d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}'
    tensors = MAX_HEADER_BYTES // (len(entry % 0) + 1)
    header = ("{" + ",".join(entry % index for index in range(tensors)) + "}").encode()
    assert tensors > MAX_TENSORS
    tracemalloc.start()
    try:
        with pytest.raises(SafetensorsFormatError, match=f"more than {MAX_TENSORS} tensors"):
            parse_safetensors_header(header, file_size=8 + len(header))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The header itself and its text are 2 x 16 MiB; the tensors parsed before the cap, ~40 MiB.
    assert peak < 96 * 1024 * 1024


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(header=st.binary(max_size=600), data_bytes=st.integers(min_value=0, max_value=2**40))
def test_any_bytes_give_counts_or_a_refusal(header: bytes, data_bytes: int) -> None:
    try:
        counts = parse_safetensors_header(b"{" + header, file_size=8 + 1 + len(header) + data_bytes)
    except SafetensorsFormatError:
        return
    assert all(count >= 0 for count in counts.counts.values())


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tensors=st.dictionaries(
        st.text(min_size=1, max_size=6),
        st.fixed_dictionaries(
            {
                "dtype": st.sampled_from(["F32", "BF16", "F4", "I8", "ZZ", "f16", 3]),
                "shape": st.lists(st.integers(-1, 2**33), max_size=4) | _JSON,
                "data_offsets": st.lists(st.integers(-1, 2**34), min_size=2, max_size=2) | _JSON,
            }
        )
        | _JSON,
        max_size=4,
    ),
    data_bytes=st.integers(min_value=0, max_value=2**35),
)
def test_any_json_header_gives_counts_that_fit_the_file_or_a_refusal(
    tensors: dict[str, object], data_bytes: int
) -> None:
    header = json.dumps(tensors).encode()
    try:
        result = parse_safetensors_header(header, file_size=8 + len(header) + data_bytes)
    except SafetensorsFormatError:
        return
    # Accepted counts never claim more than the data holds (at least a bit per element).
    assert sum(result.counts.values()) <= data_bytes * 8
