"""The one backoff rule of the module: after the first failure wait `base`, then twice as long
after each further one, never longer than `cap`. Work queues, catalog passes, downloads of the
node cache and the materializer, Hub requests, publication retries and the controller's start all
wait by it; each chooses its own base and cap."""

from __future__ import annotations

import dataclasses
import datetime

# 2 ** 62 seconds is far past any cap; the exponent stops there so the float never overflows.
_MAX_EXPONENT = 62


@dataclasses.dataclass(frozen=True)
class Backoff:
    base: float = 1.0  # seconds
    cap: float = 300.0

    def delay(self, failures: int) -> float:
        """Seconds to wait after `failures` consecutive failures (0: none, no wait)."""
        if failures <= 0:
            return 0.0
        return float(min(self.base * 2.0 ** min(failures - 1, _MAX_EXPONENT), self.cap))

    def after(self, failures: int) -> datetime.timedelta:
        return datetime.timedelta(seconds=self.delay(failures))

    @classmethod
    def between(cls, base: datetime.timedelta, cap: datetime.timedelta) -> Backoff:
        return cls(base=base.total_seconds(), cap=cap.total_seconds())
