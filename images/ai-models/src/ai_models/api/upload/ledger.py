"""An upload's reservation in the storage ledger: taken before the first byte is stored, released
when the upload fails.

The reservation is the domain's `reserve` under the owner the controller uses (the Model or
ClusterModel), applied by read-modify-write of the ledger Secret, so the controller's later
reservation and the final commit of the published artifact replace it instead of adding to it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.ledger_store import Change, LedgerStoreError, SecretLedgerStore
from ai_models.api.metrics import ApiMetrics
from ai_models.api.models import ProblemType
from ai_models.api.problems import ApiProblem, kubernetes_error, kubernetes_unavailable
from ai_models.domain.artifacts.layout import scope_of
from ai_models.domain.storage.codec import LEDGER_SECRET_NAME
from ai_models.domain.storage.ledger import Ledger, Owner, Refusal, Reservation, release_reservation, reserve

log = logging.getLogger(__name__)

CALL: Final = "LedgerUpdate"
_GIB: Final = 1024**3


def size_text(size_bytes: int) -> str:
    return f"{size_bytes} bytes ({size_bytes / _GIB:.2f} GiB)"


def describe_owner(owner: Owner) -> str:
    return f"{owner.kind} {owner.namespace}/{owner.name}" if owner.namespace else f"{owner.kind} {owner.name}"


class UploadLedger:
    def __init__(self, *, store: SecretLedgerStore, capacity_bytes: int | None, metrics: ApiMetrics) -> None:
        self._store = store
        self._capacity = capacity_bytes
        self._metrics = metrics

    @property
    def capacity_bytes(self) -> int | None:
        return self._capacity

    def reserve(self, owner: Owner, *, size_bytes: int) -> None:
        """Reserve `size_bytes` for `owner`; raises ApiProblem 507 when refused, 502/503 on API failures."""

        def change(ledger: Ledger | None) -> Change:
            outcome = reserve(
                ledger,
                owner=owner,
                scope=scope_of(owner.kind),
                size_bytes=size_bytes,
                capacity_bytes=self._capacity,
            )
            return Change(outcome.ledger if outcome.accepted else None, result=outcome)

        outcome: Reservation = self._update(change)
        if outcome.refusal is Refusal.INSUFFICIENT_STORAGE:
            available = outcome.available_bytes or 0
            raise ApiProblem(
                ProblemType.INSUFFICIENT_STORAGE,
                507,
                f"{describe_owner(owner)}: the upload of {size_text(size_bytes)} does not fit the storage "
                f"budget: {size_text(available)} of {size_text(self._capacity or 0)} are available; delete "
                "models that are no longer needed or raise aiModels.artifacts.capacityLimit, then upload "
                "again",
            )
        if outcome.refusal is Refusal.STORAGE_USAGE_UNKNOWN:
            raise ApiProblem(
                ProblemType.STORAGE_USAGE_UNKNOWN,
                507,
                f"{describe_owner(owner)}: the upload cannot be reserved in the storage budget of "
                f"{size_text(self._capacity or 0)} because the module does not know the storage usage "
                "yet: the inventory pass has to confirm it first (it runs when the controller starts and "
                "then periodically); retry the upload once the storage summary says usageKnown",
            )

    def release(self, owner: Owner) -> None:
        """Drop `owner`'s reservation; a failure is logged, not raised (the upload already failed)."""
        try:
            self._update(lambda ledger: Change(release_reservation(ledger, owner=owner)))
        except ApiProblem as problem:
            log.error(
                "cannot release the reservation of a failed upload; it stays in the ledger until the "
                "controller reserves or commits for the same object",
                extra={"owner": describe_owner(owner), "error": problem.detail},
            )

    def _update(self, change: Callable[[Ledger | None], Change]) -> Any:
        try:
            result = self._store.update(change)
        except LedgerStoreError as error:
            cause = error.__cause__
            if isinstance(cause, KubeError) and cause.status == 0:
                raise self._unreachable(cause) from error
            forbidden = isinstance(cause, KubeError) and cause.forbidden
            unavailable = isinstance(cause, KubeError) and cause.unavailable
            self._metrics.kubernetes_calls.labels(CALL, "Unavailable" if unavailable else "Error").inc()
            log.warning("cannot update the ledger", extra={"error": str(error)})
            if unavailable:
                raise kubernetes_unavailable(f"{error}; retry later") from error
            hint = (
                f"; the api's ServiceAccount needs get, create and patch on secrets {LEDGER_SECRET_NAME}"
                if forbidden
                else ""
            )
            raise kubernetes_error(f"{error}{hint}") from error
        self._metrics.kubernetes_calls.labels(CALL, "Success").inc()
        return result

    def _unreachable(self, cause: KubeError) -> ApiProblem:
        # No answer came: the cause's message is the transport failure's class, never server text.
        self._metrics.kubernetes_calls.labels(CALL, "Unavailable").inc()
        log.warning("cannot update the ledger: Kubernetes API unreachable", extra={"error": str(cause)})
        return kubernetes_unavailable(
            f"cannot reach the Kubernetes API to update the storage ledger ({cause.message or 'no answer'}); "
            "retry later"
        )
