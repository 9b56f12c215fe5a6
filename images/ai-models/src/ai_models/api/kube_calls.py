"""One way to call the Kubernetes API from a request: counted, and failures turned into problems.

An error answer becomes 502 (`kubernetes-error`, naming the call, the answer and, for 401/403,
the permission the api's ServiceAccount lacks); an unreachable API or an overloaded one
(429/503/504) becomes 503 (`kubernetes-unavailable`). Request handlers never see a `KubeError`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from ai_models.adapters.kube.errors import KubeError
from ai_models.api.metrics import ApiMetrics
from ai_models.api.problems import ApiProblem, kubernetes_error, kubernetes_unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")


class KubeCalls:
    def __init__(self, *, metrics: ApiMetrics) -> None:
        self._metrics = metrics

    def call(
        self,
        name: str,
        request: Callable[[], T],
        *,
        needs: str,
        on_missing: Callable[[], T] | None = None,
    ) -> T:
        """Run `request` (the call `name`); `needs` is the permission it takes, for error messages.

        With `on_missing`, a 404 answer is not an error: its result is returned instead.
        """
        try:
            answer = request()
        except KubeError as error:
            if error.not_found and on_missing is not None:
                self._metrics.kubernetes_calls.labels(name, "Success").inc()
                return on_missing()
            if error.status == 0:
                raise self._unreachable(name, error) from error
            raise self._answered(name, error, needs=needs) from error
        self._metrics.kubernetes_calls.labels(name, "Success").inc()
        return answer

    def _answered(self, name: str, error: KubeError, *, needs: str) -> ApiProblem:
        status = error.status
        message = error.message or error.reason or "no message"
        self._metrics.kubernetes_calls.labels(name, "Unavailable" if error.unavailable else "Error").inc()
        log.warning("%s failed", name, extra={"status": status, "error": message})
        if error.unavailable:
            return kubernetes_unavailable(
                f"the Kubernetes API cannot answer the {name} now ({status}: {message}); retry later"
            )
        hint = f"; the api's ServiceAccount needs {needs}" if error.forbidden else ""
        return kubernetes_error(f"the Kubernetes API answered the {name} with {status} ({message}){hint}")

    def _unreachable(self, name: str, error: KubeError) -> ApiProblem:
        # No answer came: the message is the transport failure's class (refused, TLS, timeout).
        failure = error.message or "no answer"
        self._metrics.kubernetes_calls.labels(name, "Unavailable").inc()
        log.warning("%s failed: Kubernetes API unreachable", name, extra={"error": str(error)})
        return kubernetes_unavailable(
            f"cannot reach the Kubernetes API for the {name} ({failure}); retry later, "
            "and if it persists check the api pod's network access to the API server"
        )
