"""The StorageClass a new shared claim gets: the one resolution chain of docs/internal/ARCHITECTURE.md §7
(`domain.delivery.claims.claim_storage_class`) over the cluster's StorageClasses.

Asked only when a workload needs a claim it has not got; the list is kept for a few seconds so a
burst of new workloads (ten Deployments applied at once) costs one read, and a class an admin has
just fixed is seen within seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Final

from ai_models.controller.prerequisites import storage_classes
from ai_models.controller.settings import ControllerSettings
from ai_models.domain.delivery.claims import ClassChoice, claim_storage_class
from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.domain.storage.prerequisites import StorageClassFacts, StorageInputs

CACHE_SECONDS: Final = 3.0


class StorageClassChoice:
    def __init__(
        self,
        api_client: Any,
        settings: ControllerSettings,
        *,
        cache_seconds: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api_client
        self._settings = settings
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._classes: tuple[StorageClassFacts, ...] | None = None
        self._read_at = 0.0

    def __call__(self) -> ClassChoice:
        return claim_storage_class(
            StorageInputs(
                mode=DeliveryMode.SHARED_PVC,
                shared_pvc_storage_class=self._settings.delivery_shared_pvc_storage_class,
                global_storage_class=self._settings.delivery_global_storage_class,
                storage_classes=self._read(),
            )
        )

    def _read(self) -> tuple[StorageClassFacts, ...]:
        with self._lock:
            now = self._clock()
            if self._classes is None or now - self._read_at >= self._cache_seconds:
                self._classes = storage_classes(self._api)
                self._read_at = now
            return self._classes
