"""The controller's ledger operations, serialised against the inventory pass.

Reconciles reserve, commit and release concurrently (the Secret's resourceVersion keeps them
from losing each other's writes). The inventory pass rebuilds the published entries from what the
store holds; it must not interleave with a commit whose artifact it did not list, so it takes the
exclusive side of a readers-writer lock for its whole run while reconciles take the shared side.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from ai_models.adapters.kube.ledger_store import Change, SecretLedgerStore
from ai_models.domain.storage import ledger as algebra
from ai_models.domain.storage.ledger import Ledger, Owner, Refusal, Scope


class ReadersWriterLock:
    """Many shared holders or one exclusive holder; a waiting writer blocks new readers."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._condition:
            while self._writer or self._writers_waiting:
                self._condition.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._condition:
                self._readers -= 1
                self._condition.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._condition:
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._condition.wait()
            self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._condition:
                self._writer = False
                self._condition.notify_all()


class Accounting:
    def __init__(self, store: SecretLedgerStore, *, capacity_bytes: int | None) -> None:
        self.store = store
        self.capacity_bytes = capacity_bytes
        self.lock = ReadersWriterLock()

    def reserve(self, owner: Owner, scope: Scope, size_bytes: int) -> Refusal | None:
        def change(ledger: Ledger | None) -> Change:
            outcome = algebra.reserve(
                ledger, owner=owner, scope=scope, size_bytes=size_bytes, capacity_bytes=self.capacity_bytes
            )
            return Change(outcome.ledger if outcome.accepted else None, outcome.refusal)

        refusal: Refusal | None = self.store.update(change)
        return refusal

    def commit(self, owner: Owner, scope: Scope, size_bytes: int) -> None:
        self.store.update(
            lambda ledger: Change(algebra.commit(ledger, owner=owner, scope=scope, size_bytes=size_bytes))
        )

    def release_reservation(self, owner: Owner) -> None:
        self.store.update(
            lambda ledger: Change(_changed(ledger, algebra.release_reservation(ledger, owner=owner)))
        )

    def release(self, owner: Owner) -> None:
        self.store.update(lambda ledger: Change(_changed(ledger, algebra.release(ledger, owner=owner))))


def _changed(before: Ledger | None, after: Ledger | None) -> Ledger | None:
    """Write only what changed: a release on an unknown or untouched ledger writes nothing."""
    return None if after is None or after == before else after
