"""What the app's routes answer from; one instance per app, on `app.state.api`."""

from __future__ import annotations

import dataclasses
import threading

from fastapi import Request

from ai_models.api.auth import Gatekeeper
from ai_models.api.catalog import Catalog
from ai_models.api.metrics import ApiMetrics


@dataclasses.dataclass
class ApiState:
    catalog: Catalog
    gatekeeper: Gatekeeper
    metrics: ApiMetrics
    first_index_pass_complete: threading.Event
    shutting_down: threading.Event = dataclasses.field(default_factory=threading.Event)


def api_state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state
