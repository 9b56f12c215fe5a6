"""The node's word about its cache, on its own Node object: the readiness label the controller
places pods by (`"true"` while the cache root is usable, `"false"` otherwise and on shutdown) and the
report annotation (limit, used, available, ready digests) the controller and admins read.

A patch goes out when either changes (the report's time aside), at most once per interval, and
again every `refresh_seconds` so a label someone removed comes back. A failed patch is logged and
tried at the next tick; the plugin serves mounts whether or not its Node could be patched.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import NODES
from ai_models.domain.delivery.node_cache import CacheReport
from ai_models.names import NODE_CACHE_READY_LABEL, NODE_CACHE_REPORT_ANNOTATION

logger = logging.getLogger(__name__)

INTERVAL_SECONDS: Final = 5.0
REFRESH_SECONDS: Final = 300.0
REQUEST_TIMEOUT: Final = (3.0, 10.0)
READY: Final = "true"
NOT_READY: Final = "false"


class ReportedCache(Protocol):
    def report(self) -> CacheReport: ...

    def usable(self) -> bool: ...


class NodeReporter:
    def __init__(
        self,
        *,
        cache: ReportedCache,
        api_client: Any,
        node_name: str,
        interval_seconds: float = INTERVAL_SECONDS,
        refresh_seconds: float = REFRESH_SECONDS,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._cache = cache
        self._nodes = Objects(api_client, NODES, timeout=REQUEST_TIMEOUT)
        self._node = node_name
        self._interval = interval_seconds
        self._refresh = refresh_seconds
        self._clock = clock or time.monotonic
        self._sent: tuple[str, CacheReport] | None = None
        self._sent_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="node-cache-report", daemon=True)

    def start(self) -> NodeReporter:
        self._thread.start()
        return self

    def publish(self) -> bool:
        """Patch the Node when what it says differs from the cache (or is due a refresh); whether
        the Node now says what the cache does."""
        report = self._cache.report()
        label = READY if self._cache.usable() else NOT_READY
        now = self._clock()
        if self._sent == (label, report) and now - self._sent_at < self._refresh:
            return True
        if not self._patch(label, report):
            return False
        self._sent, self._sent_at = (label, report), now
        return True

    def close(self) -> None:
        """Stop reporting and say on the Node that its cache is not ready (pods placed by the label
        stop coming while the plugin is away)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=REQUEST_TIMEOUT[1] * 2)
        self._patch(NOT_READY, None)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.publish()
            self._stop.wait(self._interval)

    def _patch(self, label: str, report: CacheReport | None) -> bool:
        metadata: dict[str, Any] = {"labels": {NODE_CACHE_READY_LABEL: label}}
        if report is not None:
            annotation = report.annotation(now=datetime.datetime.now(datetime.UTC))
            metadata["annotations"] = {NODE_CACHE_REPORT_ANNOTATION: annotation}
        try:
            self._nodes.patch(self._node, {"metadata": metadata})
        except KubeError as error:
            if error.status == 0:
                logger.warning(
                    "cannot reach the Kubernetes API to patch the node's cache report",
                    extra={"node": self._node, "error": error.message},
                )
                return False
            logger.warning(
                "cannot patch the node's cache report",
                extra={
                    "node": self._node,
                    "status": error.status,
                    "fix": "the node cache's ClusterRole must grant get and patch on nodes",
                },
            )
            return False
        return True
