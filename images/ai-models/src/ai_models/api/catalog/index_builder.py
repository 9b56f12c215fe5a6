"""Keeps the local index equal to the generations the object store serves, in a background thread.

Every `interval` the builder lists the sources under `catalog/` and reads each manifest (one
small GET per source). A source whose served generation differs from the indexed one is
re-indexed and swapped in atomically; a source whose manifest is gone is dropped. A failure
(store unreachable, damaged chunk) leaves the last indexed generation served and is retried with
backoff, so a broken generation is not re-read every few seconds.

Requests never wait for the builder: until a source is indexed it is simply not served yet.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator

from ai_models.adapters.objectstore import ObjectStore
from ai_models.api.catalog.index import CatalogIndex, IndexingStopped
from ai_models.api.metrics import ApiMetrics
from ai_models.catalog.layout import CATALOG_PREFIX, CatalogManifest
from ai_models.catalog.reading import iter_records, read_manifest
from ai_models.domain.backoff import Backoff
from ai_models.domain.catalog.record import CatalogRecord

log = logging.getLogger(__name__)


@dataclasses.dataclass
class _Failure:
    generation: str | None
    retry_at: float
    failures: int  # in a row, on this generation


@dataclasses.dataclass(frozen=True)
class BuilderTiming:
    interval_seconds: float = 5.0
    retry_base_seconds: float = 10.0
    retry_cap_seconds: float = 300.0


def _records_by_chunk(store: ObjectStore, manifest: CatalogManifest) -> Iterator[CatalogRecord]:
    """The generation's records read one chunk at a time, in chunk order.

    `iter_records` deduplicates a whole generation in memory (about 150 MB for 80,000 records);
    reading it chunk by chunk keeps one chunk in memory, and the index's upsert applies the same
    rule across chunks: where an id repeats, the later chunk wins.
    """
    for chunk in manifest.chunks:
        yield from iter_records(store, manifest.model_copy(update={"chunks": (chunk,)}))


class IndexBuilder:
    def __init__(
        self,
        *,
        store: ObjectStore,
        index: CatalogIndex,
        metrics: ApiMetrics,
        timing: BuilderTiming | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._index = index
        self._metrics = metrics
        self._timing = timing or BuilderTiming()
        self._backoff = Backoff(base=self._timing.retry_base_seconds, cap=self._timing.retry_cap_seconds)
        self._clock = clock
        self._wall_clock = wall_clock
        self._failures: dict[str, _Failure] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.first_pass_complete = threading.Event()

    def start(self) -> None:
        # Daemon: a thread stuck in a store read must not keep a stopping process alive.
        self._thread = threading.Thread(target=self._run, name="catalog-index-builder", daemon=True)
        self._thread.start()

    def stop(self, *, timeout: float = 10.0) -> bool:
        """Ask the thread to stop and wait; False when it is still busy (blocked in a store read)."""
        self._stop.set()
        if self._thread is None:
            return True
        self._thread.join(timeout=timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except IndexingStopped:
                return
            except Exception:  # the loop must outlive any single failure; poll_once logs specifics
                log.exception("catalog index poll failed; retrying at the next interval")
            self.first_pass_complete.set()
            self._stop.wait(self._timing.interval_seconds)

    def poll_once(self) -> bool:
        """Bring every source up to date once; True when nothing failed."""
        try:
            prefixes = self._store.list_prefixes(CATALOG_PREFIX)
        except Exception as error:
            log.warning(
                "cannot list catalog sources in the object store; serving the indexed generations",
                extra={"store": self._store.description, "error": str(error)},
            )
            self._metrics.index_errors.labels("").inc()
            return False
        present = [prefix[len(CATALOG_PREFIX) :].rstrip("/") for prefix in prefixes]
        served = self._index.generations()
        healthy = True
        for source in present:
            if self._stop.is_set():
                raise IndexingStopped(source)
            healthy = self._refresh(source, served_generation=served.get(source)) and healthy
        for source in sorted(set(served) - set(present)):
            self._drop(source, why="its catalog is gone from the object store")
        if healthy:
            self._metrics.index_refresh.set(self._wall_clock())
        return healthy

    def _refresh(self, source: str, *, served_generation: str | None) -> bool:
        generation: str | None = None
        try:
            manifest = read_manifest(self._store, source)
            if manifest is None:
                if served_generation is not None:
                    self._drop(source, why="its manifest is gone")
                return True
            generation = manifest.generation
            if manifest.source != source:
                raise ValueError(
                    f"the manifest under catalog/{source}/ names source {manifest.source!r}; "
                    "the next completed indexing pass rewrites it"
                )
            if generation == served_generation:
                self._failures.pop(source, None)
                self._metrics.index_source_refresh.labels(source).set(self._wall_clock())
                return True
            failure = self._failures.get(source)
            if failure is not None and failure.generation == generation and self._clock() < failure.retry_at:
                return False
            started = self._clock()
            row = self._index.replace_source(
                manifest, _records_by_chunk(self._store, manifest), should_stop=self._stop.is_set
            )
        except IndexingStopped:
            raise
        except Exception as error:
            self._record_failure(source, generation=generation, error=error)
            return False
        seconds = self._clock() - started
        self._failures.pop(source, None)
        self._metrics.index_build_duration.labels(source).observe(seconds)
        self._metrics.index_entries.labels(source).set(row.models)
        self._metrics.index_source_refresh.labels(source).set(self._wall_clock())
        log.info(
            "catalog source indexed",
            extra={
                "source": source,
                "generation": row.generation,
                "previous_generation": served_generation,
                "models": row.models,
                "seconds": round(seconds, 3),
            },
        )
        return True

    def _record_failure(self, source: str, *, generation: str | None, error: Exception) -> None:
        previous = self._failures.get(source)
        failures = previous.failures + 1 if previous is not None and previous.generation == generation else 1
        delay = self._backoff.delay(failures)
        self._failures[source] = _Failure(
            generation=generation, retry_at=self._clock() + delay, failures=failures
        )
        self._metrics.index_errors.labels(source).inc()
        log.warning(
            "cannot index catalog source; its last indexed generation stays served",
            extra={
                "source": source,
                "generation": generation,
                "store": self._store.description,
                "error": f"{type(error).__name__}: {error}",
                "retry_in_seconds": delay,
            },
        )

    def _drop(self, source: str, *, why: str) -> None:
        self._index.remove_source(source)
        self._failures.pop(source, None)
        self._metrics.forget_source(source)
        log.info("catalog source no longer served", extra={"source": source, "reason": why})
