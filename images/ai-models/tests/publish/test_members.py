"""Which archive members become files, and the wrapping folder."""

from __future__ import annotations

import pytest

from ai_models.publish.members import StreamingLayout, kept, unwrap, wrapper_of


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("model.safetensors", True),
        ("original/consolidated.safetensors", True),
        ("model-Q4_K_M.gguf", True),
        ("config.json", True),
        ("tokenizer/vocab.txt", True),
        ("train.py", False),
        ("pytorch_model.bin", False),
        ("onnx/model.onnx", False),
        (".gitattributes", False),
        ("original/params.json", False),
    ],
)
def test_members_follow_the_selection_rules(path: str, expected: bool) -> None:
    assert kept(path) is expected


def test_a_single_top_level_folder_is_the_wrapper() -> None:
    assert wrapper_of(["m/config.json", "m/sub/x.json", "m/model.safetensors"]) == "m"
    assert wrapper_of(["m/config.json", "n/model.safetensors"]) is None
    assert wrapper_of(["m/config.json", "model.safetensors"]) is None
    assert wrapper_of([]) is None
    assert unwrap("m/sub/x.json", "m") == "sub/x.json"
    assert unwrap("x.json", None) == "x.json"


def test_streaming_layout_strips_until_proven_wrong() -> None:
    layout = StreamingLayout()
    assert layout.place("m/config.json") == ("config.json", None)
    assert layout.place("m/model.safetensors") == ("model.safetensors", None)
    assert str(layout.wrapper) == "m"  # str(): no narrowing, the property changes below
    assert layout.place("README.md") == ("README.md", "m")
    assert layout.wrapper is None
    assert layout.place("m/tokenizer.json") == ("m/tokenizer.json", None)


def test_streaming_layout_without_a_folder_keeps_paths() -> None:
    layout = StreamingLayout()
    assert layout.place("config.json") == ("config.json", None)
    assert layout.place("sub/model.safetensors") == ("sub/model.safetensors", None)
