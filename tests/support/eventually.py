"""`eventually`: the one way tests wait for a condition.

A test that must wait for something another process or thread does (a status written, a log line,
a port listening) polls a condition with `eventually` instead of sleeping a fixed time and asserting
after it. The condition is either a predicate (truthy when met) or a check that raises
`AssertionError` until it passes; any other exception is a failure at once, not a reason to wait.
The helper returns the condition's value, so a wait can hand over what it found::

    job = eventually(lambda: runner.job("publish-1"), message="the publish Job to exist")
    eventually(lambda: stack.status("m1").get("phase") == "Ready", timeout=60, message=describe)

`message` (text, or a callable for a description read at the moment of the timeout) says what was
awaited; the failure also carries the last `AssertionError` the check raised. `clock` and `sleep` are
injected in this module's own tests; everyone else takes the monotonic clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_INTERVAL_SECONDS = 0.1


def eventually(
    condition: Callable[[], T],
    *,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    interval: float = DEFAULT_INTERVAL_SECONDS,
    message: str | Callable[[], str] = "",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call `condition` every `interval` seconds until it returns a truthy value (returned) or stops
    raising `AssertionError`; after `timeout` seconds raise `AssertionError` naming `message`."""
    if timeout < 0 or interval <= 0:
        raise ValueError(f"eventually: timeout {timeout} must be >= 0 and interval {interval} > 0")
    deadline = clock() + timeout
    while True:
        failure: AssertionError | None = None
        try:
            value = condition()
        except AssertionError as error:
            failure = error
        else:
            if value:
                return value
        remaining = deadline - clock()
        if remaining <= 0:
            described = message() if callable(message) else message
            awaited = described or getattr(condition, "__name__", "a condition")
            text = f"timed out after {timeout:g} s waiting for {awaited}"
            if failure is not None:
                text += f"\nlast check: {failure}"
            raise AssertionError(text) from failure
        sleep(min(interval, remaining))
