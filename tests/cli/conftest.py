"""The CLI tests run the console script against the fake Hub."""

from __future__ import annotations

from fakes.hub import fake_hub  # noqa: F401  (fixture)
