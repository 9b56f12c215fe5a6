"""`status.progress` of the object being published: a percentage, patched at most every few
seconds and only when it changed, from a thread of its own so the data path never waits on the
Kubernetes API. It never says 100% (the controller says Ready), and a failed patch is logged and
forgotten: progress is a courtesy, never a reason to fail a publication.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ai_models.domain.storage.ledger import Owner
from ai_models.names import ModelKind

logger = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 2.0
Report = Callable[[str], None]


class Cancelled(Exception):
    """The publication is stopping (another file failed); raised into the data path of the rest."""


def percent(done: int, total: int) -> int:
    """Whole percent done, never 100 while running."""
    if total <= 0:
        return 0
    return max(0, min(99, done * 100 // total))


class Progress:
    """Counts bytes towards `total` and hands a changed percentage to `report` every `interval`."""

    def __init__(
        self, *, total: int, report: Report | None, interval: float = DEFAULT_INTERVAL_SECONDS
    ) -> None:
        self.total = total
        self._report = report
        self._interval = interval
        self._done = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._cancelled = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: str | None = None

    @property
    def done(self) -> int:
        with self._lock:
            return self._done

    def add(self, count: int) -> None:
        """Count bytes stored; raises Cancelled once `cancel` was called, which stops the caller's
        stream at its next piece."""
        if self._cancelled.is_set():
            raise Cancelled("the publication is stopping")
        with self._lock:
            self._done += count

    def cancel(self) -> None:
        self._cancelled.set()

    def start(self) -> Progress:
        if self._report is not None:
            self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            self.tick()

    def tick(self) -> None:
        """Report the percentage if it changed since the last report."""
        if self._report is None or self.total <= 0:
            return  # nothing to measure against yet
        value = f"{percent(self.done, self.total)}%"
        if value == self._last:
            return
        try:
            self._report(value)
        except Exception as error:  # any failure of the API is the same to us: try next time
            logger.warning(
                "cannot report progress",
                extra={"progress": value, "error": f"{type(error).__name__}: {error}"},
            )
            return
        self._last = value
        logger.debug("progress reported", extra={"progress": value})


def kube_reporter(owner: Owner) -> Report | None:
    """A `Report` that merge-patches `status.progress` of `owner`; None when no Kubernetes client can
    be configured here (logged: the publication goes on without progress)."""
    # Imported here: the kubernetes client is slow to import, and only this reporter needs it.
    from ai_models.adapters.kube.client import ClientOptions, KubeConfigError, new_api_client  # noqa: PLC0415
    from ai_models.adapters.kube.objects import Objects  # noqa: PLC0415
    from ai_models.adapters.kube.resources import CLUSTER_MODELS, MODELS  # noqa: PLC0415

    options = ClientOptions(retries=1, read_timeout_seconds=5.0)
    try:
        api_client = new_api_client(options)
    except KubeConfigError as error:
        logger.warning("progress is not reported: no Kubernetes client", extra={"error": str(error)})
        return None
    kind = MODELS if ModelKind(owner.kind) is ModelKind.MODEL else CLUSTER_MODELS
    objects = Objects(api_client, kind, timeout=options.request_timeout)

    def report(value: str) -> None:
        objects.patch(
            owner.name, {"status": {"progress": value}}, owner.namespace or None, subresource="status"
        )

    return report
