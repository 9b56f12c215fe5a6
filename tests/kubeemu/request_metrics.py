"""The emulator's `apiserver_request_total{verb,resource,code}`, served on `/metrics` as the API
server serves its own: what a test compares with a client's count of what it sent.

A request is counted when its answer is complete (a watch when it ends), with the verb and resource
the request info names (`models/status` for a subresource; "" for a non-resource path).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, generate_latest

from kubeemu.requestinfo import RequestInfo

METRIC = "apiserver_request"


class RequestCounts:
    def __init__(self) -> None:
        self._registry = CollectorRegistry()
        self._counter = Counter(
            METRIC,
            "Requests the emulator answered, by verb, resource and code.",
            ["verb", "resource", "code"],
            registry=self._registry,
        )

    def count(self, info: RequestInfo, code: int) -> None:
        resource = ""
        if info.resource_request:
            resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        self._counter.labels(info.verb, resource, str(code)).inc()

    def exposition(self) -> bytes:
        return generate_latest(self._registry)
