"""What the catalog source reconciler needs from the process; built once by the controller's main."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ai_models.adapters.hub import HubClient
from ai_models.adapters.objectstore import ObjectStore
from ai_models.adapters.serving.listing import ServingListingClient
from ai_models.catalog.remote import RemoteListing, RemoteSourceSpec
from ai_models.catalog.source import SourceSpec
from ai_models.controller.metrics import ControllerMetrics
from ai_models.controller.settings import ControllerSettings


class RecordEvent(Protocol):
    """`adapters.kube.events.EventRecorder.record`: an Event about `obj`, as `kubectl describe` shows it."""

    def __call__(self, obj: Mapping[str, Any], *, type_: str, reason: str, message: str) -> None: ...


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def remote_listing(spec: RemoteSourceSpec) -> ServingListingClient:
    """The listing client of an AIModels source, under the process's endpoint policy."""
    return ServingListingClient(endpoint=spec.endpoint, token=spec.token, ca_bundle=spec.ca_bundle)


@dataclasses.dataclass
class CatalogRuntime:
    settings: ControllerSettings
    store: ObjectStore
    api: Any
    hub_for: Callable[[SourceSpec], HubClient]
    metrics: ControllerMetrics
    record_event: RecordEvent
    clock: Callable[[], datetime.datetime] = utcnow
    # The listing of an AIModels source's cluster, opened for one pass.
    remote_for: Callable[[RemoteSourceSpec], contextlib.AbstractContextManager[RemoteListing]] = (
        remote_listing
    )

    @property
    def retry_base(self) -> datetime.timedelta:
        return datetime.timedelta(seconds=self.settings.catalog_retry_base_seconds)

    @property
    def retry_cap(self) -> datetime.timedelta:
        return datetime.timedelta(seconds=self.settings.catalog_retry_cap_seconds)
