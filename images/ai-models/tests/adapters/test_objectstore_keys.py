"""Key and prefix rules, shared by both backends."""

from __future__ import annotations

import pytest

from ai_models.adapters.objectstore import InvalidKey, validate_key, validate_prefix


@pytest.mark.parametrize(
    "key",
    [
        "manifest.json",
        "catalog/hf/manifest.json",
        ".gitattributes",
        "a..b/c..",
        "模型/ä ö/x",
        "/".join(["k" * 204] * 5),  # 1,024 bytes, the most S3 takes
    ],
)
def test_relative_paths_are_valid_keys(key: str) -> None:
    assert validate_key(key) == key


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("", "empty"),
        ("/abs", "absolute path"),
        ("a/../b", "'..' segment"),
        ("./a", "'.' segment"),
        ("a//b", "empty segment"),
        ("dir/", "ends with '/'"),
        ("a\\b", "backslash"),
        ("a\x00b", "control character"),
        ("a\x7fb", "control character"),
        ("x/.tmp-1", "reserved"),
        ("k" * 1025, "longer than 1024 bytes"),
        ("я" * 513, "longer than 1024 bytes"),  # 1,026 bytes of UTF-8
        ("d/" + "s" * 256, "segment is longer than 255 bytes"),
        ("\udcff", "lone surrogate"),
    ],
)
def test_invalid_keys_say_why(key: str, reason: str) -> None:
    with pytest.raises(InvalidKey) as caught:
        validate_key(key)
    assert isinstance(caught.value, ValueError)
    assert reason in str(caught.value)
    assert repr(key)[:40].rstrip("'") in str(caught.value)
    assert len(str(caught.value)) < 400
    assert caught.value.key == key


@pytest.mark.parametrize("prefix", ["", "catalog/", "catalog/h", "catalog/.", "catalog/..x", "a/b/c"])
def test_prefixes_may_end_in_a_partial_segment(prefix: str) -> None:
    # The last segment is only compared with keys, never used as a path, so `.` there is harmless
    # (it is how one lists dotfiles).
    assert validate_prefix(prefix) == prefix


@pytest.mark.parametrize("prefix", ["/", "/a/", "../", "a/../b", "a//", "./x", "a\\", ".tmp-1/x"])
def test_prefixes_with_unsafe_whole_segments_are_invalid(prefix: str) -> None:
    with pytest.raises(InvalidKey):
        validate_prefix(prefix)


def test_an_empty_prefix_can_be_refused() -> None:
    with pytest.raises(InvalidKey, match="empty prefix"):
        validate_prefix("", allow_empty=False)
