"""Delivery in the controller process: the admission webhook on every replica, the delivery
reconciler on the leader, both in the mode `delivery.mode` names, chosen here and nowhere else
(`delivery_mode`).

The webhook reads Models (and what its mode reads) directly (a standby replica runs no informers);
the reconciler reads the Models from the leader's Model informers, which it is hung on, so a Model
that becomes Ready wakes the workloads that name it.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ai_models.adapters.kube.events import EventRecorder
from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.secrets import Secrets
from ai_models.controller.delivery.admission import ModelReads, WorkloadAdmission
from ai_models.controller.delivery.informers import DeliveryInformers
from ai_models.controller.delivery.jobs import DOCKER_CONFIG_KEY, MATERIALIZER_CONTAINER
from ai_models.controller.delivery.node_cache import NodeCacheAdmission, NodeCacheDelivery
from ai_models.controller.delivery.runtime import DeliveryRuntime
from ai_models.controller.delivery.shared_pvc import (
    ClaimReads,
    SharedPVCAdmission,
    SharedPVCDelivery,
    SharedPVCSettings,
)
from ai_models.controller.delivery.steps import DeliverySettings
from ai_models.controller.delivery.storage import StorageClassChoice
from ai_models.controller.delivery.strategy import AdmissionStrategy, DeliveryStrategy
from ai_models.controller.jobs.templates import pod_template_from_setting
from ai_models.controller.runtime import Manager
from ai_models.controller.runtime.webhook import WebhookServer
from ai_models.controller.settings import ControllerSettings
from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.domain.delivery.placement import NodeCacheSeen
from ai_models.domain.models.reference import ModelKey
from ai_models.names import MATERIALIZER_TEMPLATE_CONFIGMAP, ModelKind

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class DeliveryModeWiring:
    """The mode the settings name: its leader strategy (made for the informers every mode shares)
    and its webhook strategy."""

    delivery: Callable[[DeliveryInformers], DeliveryStrategy]
    admission: Callable[[], AdmissionStrategy]


def delivery_mode(api_client: Any, settings: ControllerSettings) -> DeliveryModeWiring:
    """The one place the delivery mode is tested."""
    if settings.delivery_mode is DeliveryMode.NODE_CACHE:
        node_cache = node_cache_settings(settings)
        return DeliveryModeWiring(
            delivery=lambda informers: NodeCacheDelivery(api_client, settings=node_cache),
            admission=lambda: NodeCacheAdmission(settings=node_cache),
        )
    shared_pvc = shared_pvc_settings(settings)
    sources = Sources(api_client, settings)
    return DeliveryModeWiring(
        delivery=lambda informers: SharedPVCDelivery(
            api_client,
            informers=informers,
            settings=shared_pvc,
            storage_class=StorageClassChoice(api_client, settings),
            materializer_template=sources.materializer_template,
            registry_credentials=sources.registry_credentials,
            module_namespace=settings.namespace,
        ),
        admission=lambda: SharedPVCAdmission(read_claim=ClaimReads(api_client), policy=shared_pvc.policy),
    )


def start_webhook(
    api_client: Any,
    settings: ControllerSettings,
    *,
    observe_duration: Callable[[float], None] = lambda seconds: None,
) -> WebhookServer | None:
    """Serve the admission webhook when the chart mounted its certificate; None without one.
    `observe_duration` gets each admission's duration in seconds."""
    cert_dir = settings.controller_webhook_cert_dir
    if cert_dir is None:
        log.info(
            "no admission webhook: %s is not set", ControllerSettings.variable("controller_webhook_cert_dir")
        )
        return None
    return WebhookServer(
        admit=WorkloadAdmission(
            read_model=ModelReads(api_client), strategy=delivery_mode(api_client, settings).admission()
        ),
        address=settings.controller_webhook_address,
        port=settings.controller_webhook_port,
        cert_file=cert_dir / "tls.crt",
        key_file=cert_dir / "tls.key",
        path=settings.controller_webhook_path,
        observe_duration=observe_duration,
    ).start()


def node_cache_settings(settings: ControllerSettings) -> NodeCacheSeen:
    """delivery.nodeCache's selector and size, and why no node plugin runs (no Nodes yet)."""
    return NodeCacheSeen(
        selector=dict(settings.delivery_node_cache_selector),
        size_bytes=settings.delivery_node_cache_size_bytes,
        unavailable=settings.delivery_node_cache_unavailable,
    )


def shared_pvc_settings(settings: ControllerSettings) -> SharedPVCSettings:
    return SharedPVCSettings(
        api_url=settings.delivery_api_url,
        ca_file=settings.delivery_api_ca_file,
        max_concurrent_materializations=settings.delivery_max_concurrent_materializations,
        provisioning_deadline=settings.delivery_provisioning_timeout,
        materialization_retry=datetime.timedelta(seconds=settings.delivery_materialization_retry_seconds),
    )


def delivery_settings(settings: ControllerSettings) -> DeliverySettings:
    return DeliverySettings(
        claim_grace=datetime.timedelta(seconds=settings.delivery_claim_grace_seconds),
        orphan_pass_interval=datetime.timedelta(seconds=settings.delivery_orphan_pass_seconds),
    )


class Sources:
    """What SharedPVC delivery reads outside its own caches, from the settings."""

    def __init__(self, api_client: Any, settings: ControllerSettings) -> None:
        self._settings = settings
        self._secrets = Secrets(api_client)

    def materializer_template(self) -> Mapping[str, Any]:
        return pod_template_from_setting(
            self._settings.delivery_materializer_template_file,
            variable=ControllerSettings.variable("delivery_materializer_template_file"),
            container=MATERIALIZER_CONTAINER,
            configmap=MATERIALIZER_TEMPLATE_CONFIGMAP,
        )

    def registry_credentials(self) -> bytes | None:
        name = self._settings.delivery_registry_secret
        if not name:
            return None
        found = self._secrets.read(self._settings.namespace, name)
        if found is None or DOCKER_CONFIG_KEY not in found.values:
            raise RuntimeError(
                f"the module's image pull Secret {self._settings.namespace}/{name} is missing or has no "
                f"{DOCKER_CONFIG_KEY}; materialize Jobs could not pull the module image"
            )
        return found.values[DOCKER_CONFIG_KEY]


def attach_delivery(
    manager: Manager,
    *,
    api_client: Any,
    settings: ControllerSettings,
    models: Mapping[ModelKind, Informer],
    events: EventRecorder,
) -> DeliveryRuntime:
    """The delivery reconciler on the leader's manager, woken by the Model informers `models`
    (the Model room's, which the manager already runs)."""

    def model_of(key: ModelKey) -> Mapping[str, Any] | None:
        return models[key.kind].get(key.namespace, key.name)

    delivery = DeliveryRuntime(
        api_client=api_client,
        model_of=model_of,
        strategy=delivery_mode(api_client, settings).delivery,
        settings=delivery_settings(settings),
        events=events,
        workers=settings.delivery_workers,
        resync_seconds=settings.model_resync_seconds,
    )
    delivery.attach(manager)
    for informer in models.values():
        informer.add_handler(delivery.model_changed)
    return delivery
