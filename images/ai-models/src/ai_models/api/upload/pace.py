"""How long an upload may take: an idle timeout, a minimum rate over a window, an overall deadline.

A client that sends one byte every few seconds never trips an idle timeout, yet holds a slot and
its storage reservation for as long as it likes. So the body is also judged per window: each
`rate_window_seconds` it must have brought `min_bytes_per_second * rate_window_seconds` bytes, or it
is cut off. And the whole upload has a deadline: `max_seconds`, or sooner when the announced size
would be through long before at the minimum rate (`size / min rate + two windows`): an upload that
cannot end in time is dropped (D41).

`Pace` is pure: it is told the time and the bytes, and answers how long the receiver may wait for
the next chunk and whether the body has failed; the receiver owns the clock.
"""

from __future__ import annotations

import dataclasses
from typing import Final

KIB: Final = 1024
DEFAULT_IDLE_TIMEOUT_SECONDS: Final = 300.0
DEFAULT_MIN_BYTES_PER_SECOND: Final = 256 * KIB
DEFAULT_RATE_WINDOW_SECONDS: Final = 60.0
DEFAULT_MAX_SECONDS: Final = 12 * 3600.0


@dataclasses.dataclass(frozen=True)
class UploadLimits:
    idle_timeout_seconds: float = DEFAULT_IDLE_TIMEOUT_SECONDS
    min_bytes_per_second: int = DEFAULT_MIN_BYTES_PER_SECOND
    rate_window_seconds: float = DEFAULT_RATE_WINDOW_SECONDS
    max_seconds: float = DEFAULT_MAX_SECONDS

    def duration_for(self, size_bytes: int | None) -> float:
        """The longest an upload of `size_bytes` (None: unknown) may take."""
        if size_bytes is None or self.min_bytes_per_second <= 0:
            return self.max_seconds
        at_min_rate = size_bytes / self.min_bytes_per_second + 2 * self.rate_window_seconds
        return min(self.max_seconds, at_min_rate)


class PaceFailure(Exception):
    """The body broke a limit; `reason` is the sentence for the problem detail."""


@dataclasses.dataclass
class Pace:
    """One upload's progress; `started` and every `now` come from the same monotonic clock."""

    limits: UploadLimits
    started: float
    size_bytes: int | None = None
    received: int = 0
    window_started: float = dataclasses.field(init=False)
    window_bytes: int = dataclasses.field(init=False, default=0)
    last_bytes_at: float = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.window_started = self.started
        self.last_bytes_at = self.started

    @property
    def deadline(self) -> float:
        return self.started + self.limits.duration_for(self.size_bytes)

    def received_bytes(self, count: int, *, now: float) -> None:
        self.received += count
        self.window_bytes += count
        if count:
            self.last_bytes_at = now

    def check(self, *, now: float) -> None:
        """Raise PaceFailure when a limit is broken at `now`; start the next window when one ends."""
        if now >= self.deadline:
            allowed = self.limits.duration_for(self.size_bytes)
            raise PaceFailure(
                f"the upload did not finish within its deadline of {allowed:g} s "
                f"(at most {self.limits.max_seconds:g} s, sooner for a size that the minimum rate of "
                f"{self.limits.min_bytes_per_second} bytes/s sends faster)"
            )
        if now - self.last_bytes_at >= self.limits.idle_timeout_seconds:
            raise PaceFailure(f"the client sent nothing for {self.limits.idle_timeout_seconds:g} s")
        window = self.limits.rate_window_seconds
        if now - self.window_started >= window:
            wanted = self.limits.min_bytes_per_second * window
            if self.window_bytes < wanted:
                raise PaceFailure(
                    f"the client sent {self.window_bytes} bytes in {window:g} s, below the minimum rate of "
                    f"{self.limits.min_bytes_per_second} bytes/s"
                )
            self.window_started = now
            self.window_bytes = 0

    def wait_seconds(self, *, now: float) -> float:
        """How long to wait for the next chunk before `check` must run again (never negative)."""
        moments = (
            self.deadline,
            self.last_bytes_at + self.limits.idle_timeout_seconds,
            self.window_started + self.limits.rate_window_seconds,
        )
        return max(0.0, min(moments) - now)
