"""Running kopf inside the leader: standalone (no peering), cluster-wide, our own finalizer."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import kopf

log = logging.getLogger(__name__)
FINALIZER = "ai.deckhouse.io/catalog-controller"


def configure(settings: kopf.OperatorSettings) -> None:
    settings.persistence.finalizer = FINALIZER
    # Keep kopf's bookkeeping under our own prefix instead of kopf.zalando.org.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix="controller.ai.deckhouse.io"
    )
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="controller.ai.deckhouse.io", key="last-handled-configuration"
    )
    settings.posting.level = logging.INFO
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60


def register_login(registry: kopf.OperatorRegistry) -> None:
    """Authenticate kopf the way the rest of the process does: the kubernetes client's config."""

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return kopf.login_via_client(**kwargs)


def run_operator(*, registry: kopf.OperatorRegistry, stop: threading.Event) -> None:
    """Run kopf in this thread until `stop` is set; kopf reads `stop` as its stop flag."""
    settings = kopf.OperatorSettings()
    configure(settings)
    ready = threading.Event()
    log.info("operator starting")
    asyncio.run(
        kopf.operator(
            registry=registry,
            settings=settings,
            standalone=True,
            clusterwide=True,
            stop_flag=stop,
            ready_flag=ready,
        )
    )
    log.info("operator stopped")
