"""Every request a process sends to the API server, counted by verb, resource and answer code.

`CountingApiClient` is the `kubernetes` ApiClient with one hook: each call through it (every get,
list, create, update, patch, delete, and each watch once, when it is opened) reports
`(verb, resource, code)` to an observer, the process's `*_kubernetes_requests_total` counter. The
verb and resource are read from the path as the API server reads them, so the figures line up with
the server's own `apiserver_request_total`. urllib3's retries of one call count once: the counter
says what the code asked for, the server's counter what reached it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry, Counter

# The code of a request that got no answer (refused, reset, timed out, TLS failure), as client-go.
NO_ANSWER_CODE: Final = "<error>"
RequestObserver = Callable[[str, str, str], None]  # verb, resource, code

_VERBS: Final = {"POST": "create", "PUT": "update", "PATCH": "patch"}
# Under /api/v1/namespaces/<name>/ these are the Namespace's own subresources, not kinds in it.
_NAMESPACE_SUBRESOURCES: Final = frozenset({"status", "finalize"})


def request_kind(method: str, url: str) -> tuple[str, str]:
    """The Kubernetes verb and resource (`pods`, `models/status`) of `method url`; a path that is
    not a resource (discovery, /version) has the resource ""."""
    split = urlsplit(url)
    parts = [part for part in split.path.split("/") if part]
    method = method.upper()
    plain_verb = _VERBS.get(method, "delete" if method == "DELETE" else "get")
    if not parts or parts[0] not in ("api", "apis"):
        return plain_verb, ""
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    watching = bool(rest) and rest[0] == "watch"
    if watching:
        rest = rest[1:]
    if len(rest) > 2 and rest[0] == "namespaces" and rest[2] not in _NAMESPACE_SUBRESOURCES:
        rest = rest[2:]  # a kind in the namespace: the namespace is not what is asked for
    if not rest:
        return plain_verb, ""
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    named = len(rest) > 1
    if method in ("GET", "HEAD"):
        query = parse_qs(split.query)
        if watching or query.get("watch", [""])[0].lower() in ("true", "1"):
            return "watch", resource
        return ("get" if named else "list"), resource
    if method == "DELETE":
        return ("delete" if named else "deletecollection"), resource
    return plain_verb, resource


class CountingApiClient(k8s.ApiClient):  # type: ignore[misc]
    def __init__(self, configuration: Any, *, observe: RequestObserver | None = None) -> None:
        super().__init__(configuration)
        self._observe = observe

    def call_api(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if self._observe is None:
            return super().call_api(method, url, *args, **kwargs)
        verb, resource = request_kind(method, url)
        try:
            response = super().call_api(method, url, *args, **kwargs)
        except ApiException as error:
            self._observe(verb, resource, str(error.status) if error.status else NO_ANSWER_CODE)
            raise
        except BaseException:
            self._observe(verb, resource, NO_ANSWER_CODE)
            raise
        self._observe(verb, resource, str(response.status))
        return response


def request_counter(registry: CollectorRegistry, name: str) -> RequestObserver:
    """A `<name>_total{verb,resource,code}` counter in `registry`, as the observer to count with."""
    counter = Counter(
        name,
        "Requests this process sent to the Kubernetes API server, by verb, resource and answer code "
        "(a watch once, when it is opened).",
        ["verb", "resource", "code"],
        registry=registry,
    )

    def observe(verb: str, resource: str, code: str) -> None:
        counter.labels(verb, resource, code).inc()

    return observe
