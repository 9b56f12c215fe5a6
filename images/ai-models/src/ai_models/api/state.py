"""What the app's routes answer from; one instance per app, on `app.state.api`."""

from __future__ import annotations

import dataclasses
import threading

from fastapi import Request

from ai_models.api.auth import Gatekeeper
from ai_models.api.catalog.catalog import Catalog
from ai_models.api.catalog.ledger_view import LedgerView
from ai_models.api.lookup.lookup import Lookup
from ai_models.api.metrics import ApiMetrics
from ai_models.api.serving.delivery_tokens import DeliveryTokens
from ai_models.api.serving.listing import ClusterModelListing
from ai_models.api.serving.serving import ArtifactServer
from ai_models.api.upload.uploads import Uploads


@dataclasses.dataclass
class ApiState:
    catalog: Catalog
    ledger: LedgerView
    gatekeeper: Gatekeeper
    uploads: Uploads
    serving: ArtifactServer
    lookup: Lookup
    metrics: ApiMetrics
    first_index_pass_complete: threading.Event
    delivery: DeliveryTokens
    listing: ClusterModelListing
    # Who admits a Kubernetes token on the serving routes: `gatekeeper` on the public listener; the
    # internal one's app gets a copy with a gatekeeper bound to the module audience (D159).
    serving_gatekeeper: Gatekeeper
    shutting_down: threading.Event = dataclasses.field(default_factory=threading.Event)


def api_state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state
