"""One way to call the Kubernetes API from a request: counted, and failures turned into problems.

An error answer becomes 502 (`kubernetes-error`, naming the call, the answer and, for 401/403,
the permission the api's ServiceAccount lacks); an unreachable API or an overloaded one
(429/503/504) becomes 503 (`kubernetes-unavailable`). Request handlers never see a client
exception.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Final, TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException

from ai_models.api.metrics import ApiMetrics
from ai_models.api.problems import ApiProblem, kubernetes_error, kubernetes_unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")
# The API's answer to these means it cannot serve now, not that it refused the request.
UNAVAILABLE_STATUSES: Final = frozenset({429, 503, 504})


def status_message(error: ApiException) -> str:
    """The Kubernetes Status message of an error answer, if it has one."""
    try:
        body = json.loads(error.body or "{}")
    except (TypeError, ValueError):
        return ""
    message = body.get("message") if isinstance(body, dict) else None
    return str(message) if message else ""


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
        except ApiException as error:
            status = error.status or 0
            if status == 404 and on_missing is not None:
                self._metrics.kubernetes_calls.labels(name, "Success").inc()
                return on_missing()
            raise self._answered(name, error, needs=needs) from error
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise self._unreachable(name, error) from error
        self._metrics.kubernetes_calls.labels(name, "Success").inc()
        return answer

    def _answered(self, name: str, error: ApiException, *, needs: str) -> ApiProblem:
        status = error.status or 0
        message = status_message(error) or str(error.reason or "no message")
        unavailable = status in UNAVAILABLE_STATUSES
        self._metrics.kubernetes_calls.labels(name, "Unavailable" if unavailable else "Error").inc()
        log.warning("%s failed", name, extra={"status": status, "error": message})
        if unavailable:
            return kubernetes_unavailable(
                f"the Kubernetes API cannot answer the {name} now ({status}: {message}); retry later"
            )
        hint = f"; the api's ServiceAccount needs {needs}" if status in (401, 403) else ""
        return kubernetes_error(f"the Kubernetes API answered the {name} with {status} ({message}){hint}")

    def _unreachable(self, name: str, error: Exception) -> ApiProblem:
        self._metrics.kubernetes_calls.labels(name, "Unavailable").inc()
        log.warning("%s failed: Kubernetes API unreachable", name, extra={"error": repr(error)})
        return kubernetes_unavailable(
            f"cannot reach the Kubernetes API for the {name} ({type(error).__name__}); retry later, "
            "and if it persists check the api pod's network access to the API server"
        )
