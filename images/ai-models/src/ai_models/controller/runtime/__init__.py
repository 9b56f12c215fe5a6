"""The one controller runtime of every kind: informers feed keys into rate-limited work queues,
workers reconcile them, and a manager starts it all only while this replica holds the Lease."""

from ai_models.controller.runtime.controller import Controller
from ai_models.controller.runtime.manager import Manager
from ai_models.controller.runtime.queue import WorkQueue
from ai_models.domain.backoff import Backoff

__all__ = ["Backoff", "Controller", "Manager", "WorkQueue"]
