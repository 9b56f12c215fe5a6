"""The ledger in the Secret `ai-models-storage-accounting`, changed by read-modify-write.

Every change reads the Secret, applies a pure function from `domain.storage.ledger` and writes it
back with the resourceVersion it read; a conflict (someone else wrote meanwhile) re-reads and
re-applies, so concurrent writers (the controller, several api replicas taking upload
reservations) never lose each other's entries. A missing Secret or an empty `ledger.json` reads
as None (usage unknown); the first write creates the Secret.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import SECRETS
from ai_models.domain.storage.codec import (
    LEDGER_SECRET_KEY,
    LEDGER_SECRET_NAME,
    LedgerFormatError,
    ledger_from_json,
    ledger_to_json,
)
from ai_models.domain.storage.ledger import Ledger
from ai_models.names import (
    COMPONENT_LABEL,
    MODULE_OBJECT_LABELS,
    NAME_LABEL,
    STORAGE_ACCOUNTING_COMPONENT,
)

log = logging.getLogger(__name__)

LEDGER_LABELS: Final = {
    NAME_LABEL: LEDGER_SECRET_NAME,
    COMPONENT_LABEL: STORAGE_ACCOUNTING_COMPONENT,
    **MODULE_OBJECT_LABELS,
}
MAX_ATTEMPTS: Final = 8

T = TypeVar("T")


class LedgerStoreError(RuntimeError):
    """The ledger could not be read or written; the message names the Secret and the cause."""


@dataclasses.dataclass(frozen=True)
class StoredLedger:
    ledger: Ledger | None  # None: missing, emptied or unreadable = usage unknown
    resource_version: str | None  # None: the Secret does not exist
    readable: bool = True


@dataclasses.dataclass(frozen=True)
class Change:
    """What an update function decides: the ledger to write (None: write nothing) and a result."""

    ledger: Ledger | None
    result: Any = None


class SecretLedgerStore:
    def __init__(
        self, api_client: Any, *, namespace: str, request_timeout: tuple[float, float] = (3, 10)
    ) -> None:
        self._secrets = Objects(api_client, SECRETS, timeout=request_timeout)
        self._namespace = namespace

    @property
    def where(self) -> str:
        return f"Secret {self._namespace}/{LEDGER_SECRET_NAME}"

    def read(self) -> StoredLedger:
        try:
            secret = self._secrets.get(LEDGER_SECRET_NAME, self._namespace)
        except KubeError as error:
            raise LedgerStoreError(f"cannot read {self.where}: {_failure(error)}") from error
        if secret is None:
            return StoredLedger(None, None)
        encoded = (secret.get("data") or {}).get(LEDGER_SECRET_KEY)
        version = (secret.get("metadata") or {}).get("resourceVersion")
        if not encoded:
            return StoredLedger(None, version)
        try:
            return StoredLedger(ledger_from_json(base64.b64decode(encoded, validate=True)), version)
        except (LedgerFormatError, binascii.Error) as error:
            log.warning(
                "ledger unreadable; usage is unknown until an inventory pass rewrites it",
                extra={"secret": self.where, "error": str(error)},
            )
            return StoredLedger(None, version, readable=False)

    def update(self, change: Callable[[Ledger | None], Change]) -> Any:
        """Apply `change` to the current ledger and store its answer; returns `Change.result`.

        `change` may run several times (after conflicts), so it must be pure.
        """
        for attempt in range(1, MAX_ATTEMPTS + 1):
            stored = self.read()
            decided = change(stored.ledger)
            if decided.ledger is None:
                return decided.result
            try:
                self._write(decided.ledger, stored.resource_version)
                return decided.result
            except KubeError as error:
                if (error.conflict or error.not_found) and attempt < MAX_ATTEMPTS:
                    # 409: someone wrote since we read; 404: the Secret vanished since we read.
                    time.sleep(min(0.05 * 2**attempt, 1.0))
                    continue
                raise LedgerStoreError(f"cannot write {self.where}: {_failure(error)}") from error
        raise LedgerStoreError(f"cannot write {self.where}: still conflicting after {MAX_ATTEMPTS} attempts")

    def _write(self, ledger: Ledger, resource_version: str | None) -> None:
        data = {LEDGER_SECRET_KEY: base64.b64encode(ledger_to_json(ledger)).decode()}
        if resource_version is None:
            body = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": LEDGER_SECRET_NAME,
                    "namespace": self._namespace,
                    "labels": LEDGER_LABELS,
                },
                "type": "Opaque",
                "data": data,
            }
            self._secrets.create(body)  # 409 when someone created it since we read
            return
        body = {"metadata": {"resourceVersion": resource_version}, "data": data}
        # A merge patch carrying resourceVersion is a compare-and-swap: 409 if it moved.
        self._secrets.patch(LEDGER_SECRET_NAME, body, self._namespace)


def _failure(error: KubeError) -> str:
    """The cause in a store error's message: `403 Forbidden`, or that no answer came. Never the
    server's text: the controller writes these messages into objects' status."""
    if error.status == 0:
        return error.answer
    return f"{error.status} {error.reason}".rstrip()
