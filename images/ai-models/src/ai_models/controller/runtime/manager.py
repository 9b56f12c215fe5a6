"""What runs while this replica holds the Lease: informers, controllers and background loops.

`run(stop)` starts every informer, waits (bounded) for their first lists, starts the controllers and
the loops, blocks until `stop` is set, then stops them all and waits briefly for the workers, so a
replica that lost the Lease stops writing before the new leader starts.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ai_models.adapters.kube.informer import Informer
from ai_models.controller.runtime.controller import Controller
from ai_models.controller.runtime.observer import NO_OBSERVER, ControllerObserver

log = logging.getLogger(__name__)
Loop = Callable[[threading.Event], None]


@dataclasses.dataclass
class Manager:
    sync_timeout_seconds: float = 60.0
    stop_timeout_seconds: float = 10.0
    # Sees every controller's queue and reconciles (the controller metrics).
    observer: ControllerObserver = NO_OBSERVER
    informers: list[Informer] = dataclasses.field(default_factory=list)
    controllers: list[Controller[Any]] = dataclasses.field(default_factory=list)
    loops: dict[str, Loop] = dataclasses.field(default_factory=dict)
    on_started: list[Callable[[], None]] = dataclasses.field(default_factory=list)
    # Called once `stop` is set: wakes loops that wait on events of their own.
    on_stopping: list[Callable[[], None]] = dataclasses.field(default_factory=list)

    def informer(self, informer: Informer) -> Informer:
        self.informers.append(informer)
        return informer

    def controller(self, controller: Controller[Any]) -> Controller[Any]:
        controller.observe_with(self.observer)
        self.controllers.append(controller)
        return controller

    def loop(self, name: str, loop: Loop) -> None:
        """Run `loop(stop)` in its own thread while leading; it must return soon after `stop` is set."""
        self.loops[name] = loop

    def run(self, stop: threading.Event) -> None:
        for informer in self.informers:
            informer.start()
        deadline = time.monotonic() + self.sync_timeout_seconds
        for informer in self.informers:
            if not informer.wait_synced(max(deadline - time.monotonic(), 0)):
                log.warning("informer not synced in time; starting anyway", extra={"informer": informer.name})
            if stop.is_set():
                break
        threads: list[threading.Thread] = []
        try:
            if not stop.is_set():
                for controller in self.controllers:
                    controller.start()
                threads = [
                    threading.Thread(target=loop, args=(stop,), name=name, daemon=True)
                    for name, loop in self.loops.items()
                ]
                for thread in threads:
                    thread.start()
                for callback in self.on_started:
                    callback()
                log.info(
                    "reconciling",
                    extra={
                        "controllers": [controller.name for controller in self.controllers],
                        "informers": len(self.informers),
                    },
                )
            stop.wait()
        finally:
            stop.set()
            for callback in self.on_stopping:
                callback()
            for controller in self.controllers:
                controller.stop()
            for informer in self.informers:
                informer.stop()
            deadline = time.monotonic() + self.stop_timeout_seconds
            for controller in self.controllers:
                if not controller.join(max(deadline - time.monotonic(), 0)):
                    log.warning(
                        "controller workers still busy at stop", extra={"controller": controller.name}
                    )
            for thread in threads:
                thread.join(max(deadline - time.monotonic(), 0))
