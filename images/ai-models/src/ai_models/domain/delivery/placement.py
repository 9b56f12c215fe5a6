"""Where NodeCache delivery places a workload's pods, and whether its models fit a node's cache.

Placement: the pods go to the nodes of `delivery.nodeCache.nodeSelector` whose node plugin says its
cache is usable (`NODE_CACHE_READY_LABEL: "true"`, which the plugin sets and removes on its own
Node), by `spec.nodeSelector` (`template.rewrite_for_node_cache` adds the entries). Every model of
a pod lives in one node's cache at once, so the sum of the artifacts' sizes must fit one cache: at
most `delivery.nodeCache.size` (the budget of every node) and, when the selected Nodes report their
caches (`NODE_CACHE_REPORT_ANNOTATION`, JSON with `limitBytes`: the budget capped by the node's
free space), at most the largest reported limit (D110). A node that does not report (its plugin
has not started yet) neither allows nor forbids anything.

A Node's report is written by the node plugin, a privileged process of the module, but a Node's
annotations can be patched by whoever may patch Nodes: it is read bounded, and what cannot be read
counts as no report.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ai_models.domain.models.reference import ModelKey
from ai_models.domain.sizes import size_text
from ai_models.names import NODE_CACHE_READY_LABEL, NODE_CACHE_REPORT_ANNOTATION

READY_VALUE: Final = "true"
# A report lists at most 256 digests of 71 characters: far below this; anything longer is not one.
REPORT_MAX_CHARACTERS: Final = 64 * 1024
SIZE_SETTING: Final = "delivery.nodeCache.size"
SELECTOR_SETTING: Final = "delivery.nodeCache.nodeSelector"


@dataclasses.dataclass(frozen=True)
class NodeSeen:
    """A Node that `delivery.nodeCache.nodeSelector` selects, with the limit its cache reports
    (None: no report, or one that cannot be read)."""

    name: str
    limit_bytes: int | None = None


@dataclasses.dataclass(frozen=True)
class NodeCacheSeen:
    """The NodeCache settings and the selected Nodes, as one reconcile sees them."""

    selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    size_bytes: int | None = None  # delivery.nodeCache.size (None: not set)
    nodes: tuple[NodeSeen, ...] = ()
    # Why the release runs no node plugin (the chart's AI_MODELS_DELIVERY_NODE_CACHE_UNAVAILABLE,
    # D162), None when it runs one.
    unavailable: str | None = None

    @property
    def placement(self) -> dict[str, str]:
        return placement(self.selector)


def placement(selector: Mapping[str, str]) -> dict[str, str]:
    """The nodeSelector entries of a delivering pod: the setting's, and the cache readiness."""
    return {**dict(selector), NODE_CACHE_READY_LABEL: READY_VALUE}


def selects(selector: Mapping[str, str], labels: Mapping[str, Any]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def reported_limit(annotation: Any) -> int | None:
    """`limitBytes` of a Node's cache report; None when there is none or it cannot be read."""
    if not isinstance(annotation, str) or len(annotation) > REPORT_MAX_CHARACTERS:
        return None
    try:
        document = json.loads(annotation)
    except ValueError:
        return None
    limit = document.get("limitBytes") if isinstance(document, dict) else None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        return None
    return limit


def node_seen(node: Mapping[str, Any]) -> NodeSeen:
    meta = node.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return NodeSeen(
        str(meta.get("name") or ""), reported_limit(annotations.get(NODE_CACHE_REPORT_ANNOTATION))
    )


def selected_nodes(nodes: Iterable[Mapping[str, Any]], selector: Mapping[str, str]) -> tuple[NodeSeen, ...]:
    """The Nodes the setting selects (readiness aside: a node whose cache is not ready yet still
    tells what its cache may hold), in name order."""
    found = [
        node_seen(node)
        for node in nodes
        if selects(selector, ((node.get("metadata") or {}).get("labels")) or {})
    ]
    return tuple(sorted(found, key=lambda node: node.name))


def capacity_problem(artifacts: Sequence[tuple[ModelKey, str, int]], seen: NodeCacheSeen) -> str | None:
    """Why the models (each with its artifact's digest and size) cannot fit one node's cache, None
    if they can. The cache is content addressed: two models of one digest take its size once.

    The message names what the models need, each model's size, the limit they exceed and its
    source, and the fix."""
    needed = sum({digest: size for _, digest, size in artifacts}.values())
    limits: list[str] = []
    if seen.size_bytes is not None and needed > seen.size_bytes:
        limits.append(f"{SIZE_SETTING} is {size_text(seen.size_bytes)}")
    reported = [node for node in seen.nodes if node.limit_bytes is not None]
    largest = max(reported, key=lambda node: (node.limit_bytes or 0, node.name), default=None)
    if largest is not None and largest.limit_bytes is not None and needed > largest.limit_bytes:
        limits.append(
            f"the largest cache the nodes of {SELECTOR_SETTING} report is "
            f"{size_text(largest.limit_bytes)} (node {largest.name}, of {len(reported)} reporting; a cache "
            "is at most the node's free disk space)"
        )
    if not limits:
        return None
    each = ", ".join(f"{key.describe()} {size_text(size)}" for key, _, size in artifacts)
    return (
        f"the models need {size_text(needed)} in one node's cache ({each}), but {' and '.join(limits)}; "
        f"raise {SIZE_SETTING} (and free disk space on the nodes), select nodes with larger disks by "
        f"{SELECTOR_SETTING}, or name fewer or smaller models"
    )
