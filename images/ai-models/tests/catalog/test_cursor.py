"""The pass cursor stored in `status.resume.cursor` survives the round trip and rejects garbage."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_models.catalog.cursor import PassPosition

URLS = st.none() | st.text(min_size=1).map(lambda tail: "https://huggingface.co/api/models?cursor=" + tail)


@given(query=st.integers(0, 10_000), start=st.integers(0, 10**9), hub_cursor=URLS)
def test_a_position_decodes_to_itself(query: int, start: int, hub_cursor: str | None) -> None:
    position = PassPosition(query=query, start=start, hub_cursor=hub_cursor)

    assert PassPosition.decode(position.encode()) == position


def test_the_first_page_and_the_end_have_readable_cursors() -> None:
    assert PassPosition().encode() == "0:0:"
    assert PassPosition.finished(queries=2, written=140).encode() == "2:140:"
    assert PassPosition(query=1, start=50).next_page("https://h/api/models?cursor=x").encode() == (
        "1:50:https://h/api/models?cursor=x"
    )


@pytest.mark.parametrize("text", ["", "https://huggingface.co/api/models?cursor=abc", "a:0:", "0:-1:", "1:2"])
def test_anything_else_is_not_a_cursor(text: str) -> None:
    with pytest.raises(ValueError, match="cursor"):
        PassPosition.decode(text)
