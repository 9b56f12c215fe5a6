"""The storage ledger as the catalog sees it: a snapshot of the Secret at most 5 s old, shared by
the download verdicts and the storage summary.

Searches and summaries come in bursts; reading the Secret for each would load the API server for
nothing, and a verdict is preliminary anyway. The first request after the snapshot expires reads
the Secret; requests arriving meanwhile wait for that one read and share it (single flight).

Usage is unknown (ledger None) when the Secret is missing, its `ledger.json` is empty or
unreadable, or the Kubernetes API cannot be asked; the domain's verdict then says so.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import enum
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import SECRETS
from ai_models.api.catalog.verdicts import VerdictBook
from ai_models.domain.storage.codec import (
    LEDGER_SECRET_KEY,
    LEDGER_SECRET_NAME,
    LedgerFormatError,
    ledger_from_json,
)
from ai_models.domain.storage.ledger import Ledger

log = logging.getLogger(__name__)

DEFAULT_MAX_AGE_SECONDS = 5.0


class LedgerState(enum.StrEnum):
    PRESENT = "Present"
    MISSING = "Missing"
    UNREADABLE = "Unreadable"
    UNAVAILABLE = "Unavailable"


@dataclasses.dataclass(frozen=True)
class LedgerReading:
    ledger: Ledger | None
    state: LedgerState


LedgerReader = Callable[[], LedgerReading]


def secret_ledger_reader(
    api_client: Any, *, namespace: str, request_timeout: tuple[float, float]
) -> LedgerReader:
    """Reads `ledger.json` of the Secret `ai-models-storage-accounting` in `namespace`."""
    secrets = Objects(api_client, SECRETS, timeout=request_timeout)
    where = {"secret": LEDGER_SECRET_NAME, "namespace": namespace}

    def read() -> LedgerReading:
        try:
            secret = secrets.get(LEDGER_SECRET_NAME, namespace)
        except KubeError as error:
            if error.status == 0:  # refused, TLS, timeouts
                log.warning(
                    "Kubernetes API unreachable reading the ledger Secret; verdicts say usage unknown",
                    extra={**where, "error": str(error)},
                )
            else:
                log.warning(
                    "cannot read the ledger Secret; verdicts say usage unknown until it can be read",
                    extra={**where, "status": error.status, "reason": error.reason},
                )
            return LedgerReading(None, LedgerState.UNAVAILABLE)
        if secret is None:
            return LedgerReading(None, LedgerState.MISSING)
        encoded = (secret.get("data") or {}).get(LEDGER_SECRET_KEY)
        if not encoded:
            return LedgerReading(None, LedgerState.MISSING)
        try:
            ledger = ledger_from_json(base64.b64decode(encoded, validate=True))
        except (LedgerFormatError, binascii.Error) as error:
            log.warning("ledger unreadable; verdicts say usage unknown", extra={**where, "error": str(error)})
            return LedgerReading(None, LedgerState.UNREADABLE)
        return LedgerReading(ledger, LedgerState.PRESENT if ledger is not None else LedgerState.MISSING)

    return read


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclasses.dataclass(frozen=True)
class LedgerSnapshot:
    """One read of the ledger: what it said, the verdicts against it, and when it was read."""

    reading: LedgerReading
    book: VerdictBook
    read_at: datetime.datetime
    taken_at: float  # on the view's monotonic clock, for its age


class LedgerView:
    def __init__(
        self,
        *,
        read: LedgerReader,
        capacity_bytes: int | None,
        max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        on_read: Callable[[LedgerState], None] | None = None,
        wall_clock: Callable[[], datetime.datetime] = utcnow,
    ) -> None:
        self._read = read
        self._capacity_bytes = capacity_bytes
        self._max_age = max_age_seconds
        self._clock = clock
        self._on_read = on_read
        self._wall_clock = wall_clock
        self._snapshot: LedgerSnapshot | None = None
        self._refresh = threading.Lock()

    @property
    def capacity_bytes(self) -> int | None:
        return self._capacity_bytes

    def _fresh(self) -> LedgerSnapshot | None:
        snapshot = self._snapshot
        if snapshot is not None and self._clock() - snapshot.taken_at <= self._max_age:
            return snapshot
        return None

    def snapshot(self) -> LedgerSnapshot:
        """The current snapshot, at most `max_age_seconds` old (read now if it is older)."""
        snapshot = self._fresh()
        if snapshot is not None:
            return snapshot
        with self._refresh:
            # Whoever waited for the lock finds the snapshot the holder just took.
            snapshot = self._fresh()
            if snapshot is not None:
                return snapshot
            reading = self._read()
            if self._on_read is not None:
                self._on_read(reading.state)
            snapshot = LedgerSnapshot(
                reading=reading,
                book=VerdictBook(ledger=reading.ledger, capacity_bytes=self._capacity_bytes),
                read_at=self._wall_clock(),
                taken_at=self._clock(),
            )
            self._snapshot = snapshot
            return snapshot

    def verdicts(self) -> VerdictBook:
        """Verdicts against a ledger snapshot at most `max_age_seconds` old."""
        return self.snapshot().book

    def state(self) -> LedgerState:
        return self.snapshot().reading.state
