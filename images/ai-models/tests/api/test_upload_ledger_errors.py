"""How the upload's reservation answers a ledger it cannot update: the Kubernetes failure under the
store's error decides the problem (503 for no answer or an overloaded API, 502 with the missing
permission for a refusal), and the call is counted by that outcome."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.ledger_store import Change, LedgerStoreError
from ai_models.api.metrics import ApiMetrics
from ai_models.api.models import ProblemType
from ai_models.api.problems import ApiProblem
from ai_models.api.upload.ledger import CALL, UploadLedger
from ai_models.domain.storage.ledger import Ledger, Owner

LLAMA = Owner(kind="Model", namespace="team-a", name="llama", uid="u1")


class FailingStore:
    def __init__(self, cause: KubeError) -> None:
        self._cause = cause

    def update(self, change: Callable[[Ledger | None], Change]) -> Any:
        raise LedgerStoreError(
            "cannot write Secret d8-ai-models/ai-models-storage-accounting"
        ) from self._cause


def answered(status: int, message: str = "the server's own words") -> KubeError:
    return KubeError(
        verb="patch", kind="Secret", name="x", namespace="d8-ai-models", status=status, message=message
    )


def ledger_failing_with(cause: KubeError) -> tuple[UploadLedger, ApiMetrics]:
    metrics = ApiMetrics()
    store: Any = FailingStore(cause)  # the one method UploadLedger calls
    return UploadLedger(store=store, capacity_bytes=None, metrics=metrics), metrics


def counted(metrics: ApiMetrics, result: str) -> float | None:
    return metrics.registry.get_sample_value(
        "d8_ai_models_api_kubernetes_calls_total", {"call": CALL, "result": result}
    )


def test_no_answer_is_503_naming_the_failure_not_the_server() -> None:
    cause = KubeError.unanswered("patch", "Secret", "x", "d8-ai-models", TimeoutError("read timed out"))
    ledger, metrics = ledger_failing_with(cause)
    with pytest.raises(ApiProblem) as raised:
        ledger.reserve(LLAMA, size_bytes=5)
    assert raised.value.status == 503
    assert raised.value.kind is ProblemType.KUBERNETES_UNAVAILABLE
    assert raised.value.detail == (
        "cannot reach the Kubernetes API to update the storage ledger (TimeoutError); retry later"
    )
    assert counted(metrics, "Unavailable") == 1


@pytest.mark.parametrize(
    ("status", "code", "kind", "result"),
    [
        pytest.param(503, 503, ProblemType.KUBERNETES_UNAVAILABLE, "Unavailable", id="unavailable"),
        pytest.param(403, 502, ProblemType.KUBERNETES_ERROR, "Error", id="forbidden"),
        pytest.param(422, 502, ProblemType.KUBERNETES_ERROR, "Error", id="invalid"),
    ],
)
def test_an_answer_decides_the_problem(status: int, code: int, kind: ProblemType, result: str) -> None:
    ledger, metrics = ledger_failing_with(answered(status))
    with pytest.raises(ApiProblem) as raised:
        ledger.reserve(LLAMA, size_bytes=5)
    assert raised.value.status == code
    assert raised.value.kind is kind
    assert raised.value.detail.startswith("cannot write Secret d8-ai-models/ai-models-storage-accounting")
    assert "the server's own words" not in raised.value.detail
    assert ("ServiceAccount needs get, create and patch" in raised.value.detail) is (status == 403)
    assert counted(metrics, result) == 1


def test_a_failed_release_is_logged_not_raised() -> None:
    ledger, metrics = ledger_failing_with(answered(503))
    ledger.release(LLAMA)
    assert counted(metrics, "Unavailable") == 1
