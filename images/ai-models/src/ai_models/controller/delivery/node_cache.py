"""NodeCache delivery in the controller process (`strategy.DeliveryStrategy`).

It follows the Nodes `delivery.nodeCache.nodeSelector` selects (a server-side label selector),
trimmed to name, labels and the cache report: a selected Node that appears, goes or changes its
cache report wakes the workloads reported `InsufficientNodeCacheCapacity` (a Delivered one is
judged again at the resync). Its facts of a workload are the settings with those Nodes; the webhook
reads no Node (D111). It asks for no effect of its own: no claim, no Job.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.resources import NODES
from ai_models.controller.delivery.keys import WorkloadKey
from ai_models.controller.delivery.strategy import Handler, Triggers
from ai_models.controller.runtime import Manager
from ai_models.domain.delivery.contract import DeliveryRequest
from ai_models.domain.delivery.modes.node_cache import NodeCache
from ai_models.domain.delivery.placement import NodeCacheSeen, selected_nodes
from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.models.reference import ModelKey
from ai_models.names import NODE_CACHE_REPORT_ANNOTATION, DeliveryReason


def trim_node(obj: dict[str, Any]) -> dict[str, Any]:
    """A Node as placement reads it: its name, labels and cache report (a Node's status, its
    images above all, is most of its size)."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    trimmed_meta: dict[str, Any] = {"name": meta.get("name"), "labels": meta.get("labels") or {}}
    if NODE_CACHE_REPORT_ANNOTATION in annotations:
        trimmed_meta["annotations"] = {
            NODE_CACHE_REPORT_ANNOTATION: annotations[NODE_CACHE_REPORT_ANNOTATION]
        }
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": trimmed_meta}


def label_selector_of(selector: Mapping[str, str]) -> str | None:
    """`delivery.nodeCache.nodeSelector` as a label selector (None selects every Node)."""
    return ",".join(f"{key}={value}" for key, value in sorted(selector.items())) or None


class NodeCacheDelivery:
    def __init__(self, api_client: Any, *, settings: NodeCacheSeen) -> None:
        """`settings`: delivery.nodeCache's selector and size (its `nodes` are read at each pass)."""
        self.rules = NodeCache()
        self.settings = dataclasses.replace(settings, nodes=())
        self.nodes = Informer(
            api_client,
            NODES,
            name="node-cache-nodes",
            label_selector=label_selector_of(settings.selector),
            transform=trim_node,
        )

    def informers(self) -> list[Informer]:
        return [self.nodes]

    def attach(self, manager: Manager, triggers: Triggers) -> None:
        manager.informer(self.nodes)

        def node_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
            # The informer keeps nothing else of a Node, so a status heartbeat compares equal.
            if old is None or new is None or old != new:
                triggers.enqueue_reporting(DeliveryReason.INSUFFICIENT_NODE_CACHE_CAPACITY.value)

        self.nodes.add_handler(node_changed)

    def facts(
        self, key: WorkloadKey, request: DeliveryRequest | None, models: Mapping[ModelKey, ModelSeen]
    ) -> NodeCacheSeen:
        """The settings with the Nodes they select, as cached now."""
        return dataclasses.replace(
            self.settings, nodes=selected_nodes(self.nodes.objects(), self.settings.selector)
        )

    def handlers(self) -> Mapping[type[Any], Handler]:
        return {}

    def forget(self, key: WorkloadKey) -> None:
        """Nothing is remembered of a workload in NodeCache mode."""


class NodeCacheAdmission:
    """NodeCache in the webhook: the settings, no Node (D111)."""

    def __init__(self, *, settings: NodeCacheSeen) -> None:
        self.rules = NodeCache()
        self.settings = dataclasses.replace(settings, nodes=())

    def facts(
        self, namespace: str, request: DeliveryRequest | None, models: Mapping[ModelKey, ModelSeen]
    ) -> NodeCacheSeen:
        return self.settings
