"""The real controller against hostile catalog endpoints: nothing they say reaches status or Events,
their redirects and addresses are refused, their huge or stalled answers cost it neither memory nor
its liveness. Memory is measured on the controller process (VmHWM, its peak RSS)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as typed_client

from cluster.catalog_stack import CatalogStack, catalog_stack
from fakes.hostile_hub import MIB, HostileHub
from fakes.hub import FakeModel
from fakes.hub_corpus import make_corpus
from support.processes import ModuleProcess

client: Any = typed_client
SECRET = "hf_FAKESECRETdoNotReflect0123456789"


__all__ = ["catalog_stack"]  # the `stack` fixture


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return make_corpus(60, seed=11)


@pytest.fixture
def hostile() -> Iterator[HostileHub]:
    with HostileHub() as hub:
        yield hub


def hostile_source(stack: CatalogStack, name: str, endpoint: str) -> None:
    stack.create_source(
        name, opted_in=True, spec={"provider": "HuggingFace", "huggingFace": {"endpoint": endpoint}}
    )


def indexing_reason(stack: CatalogStack, name: str) -> str | None:
    reason: str | None = stack.condition(name, "Indexing").get("reason")
    return reason


def failed_with(stack: CatalogStack, name: str, reason: str) -> None:
    stack.eventually(lambda: indexing_reason(stack, name) == reason, timeout=60, what=f"{name}: {reason}")


def everything_users_read(stack: CatalogStack, name: str) -> str:
    """The source as a User reads it, and every Event's message."""
    events = client.CoreV1Api(stack.emulator.api_client()).list_event_for_all_namespaces()
    return json.dumps(stack.source(name)) + "\n".join(str(event.message) for event in events.items)


def peak_rss(process: ModuleProcess) -> int:
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for the controller process {process.pid}")


def warmed_up(stack: CatalogStack, **env: str) -> ModuleProcess:
    """A controller that has indexed one ordinary source: its baseline is a working controller's."""
    controller = stack.controller(**env)
    stack.create_source("ordinary", opted_in=True)
    stack.eventually(
        lambda: stack.condition("ordinary", "Ready").get("reason") == "CatalogServed", what="the warm-up pass"
    )
    return controller


def test_an_endpoints_error_body_and_message_never_reach_status_or_events(
    stack: CatalogStack, hostile: HostileHub
) -> None:
    hostile.reject_with(
        400,
        body=f'{{"error": "invalid filter, and here is your token: {SECRET}"}}'.encode(),
        headers={"X-Error-Message": f"token {SECRET}", "X-Error-Code": "BadRequest"},
    )
    stack.controller()
    hostile_source(stack, "reflecting", hostile.url)

    failed_with(stack, "reflecting", "ProviderRequestRejected")
    stack.eventually(lambda: bool(stack.events("IndexingFailed")), what="the failure event")

    seen = everything_users_read(stack, "reflecting")
    assert SECRET not in seen
    message = stack.condition("reflecting", "Indexing")["message"]
    assert "HTTP 400" in message
    assert "provider code BadRequest" in message


def test_a_redirect_to_the_controllers_own_metrics_port_is_not_followed(
    stack: CatalogStack, hostile: HostileHub
) -> None:
    metrics_port = stack.controller().metrics_port()
    hostile.redirect_to(f"http://127.0.0.1:{metrics_port}/metrics")
    hostile_source(stack, "redirecting", hostile.url)

    failed_with(stack, "redirecting", "ProviderInvalidResponse")

    message = stack.condition("redirecting", "Indexing")["message"]
    assert "redirected to another host" in message
    assert str(metrics_port) not in message
    assert "d8_ai_models" not in everything_users_read(stack, "redirecting")


def test_a_300_mib_listing_is_cut_off_and_the_controller_memory_stays_flat(
    stack: CatalogStack, hostile: HostileHub
) -> None:
    controller = warmed_up(stack)
    baseline = peak_rss(controller)
    hostile.huge_listing(300 * MIB)
    hostile_source(stack, "huge", hostile.url)

    failed_with(stack, "huge", "ProviderInvalidResponse")

    peak = peak_rss(controller)
    print(
        f"controller peak RSS: {baseline / MIB:.0f} MiB before, {peak / MIB:.0f} MiB after a 300 MiB listing"
    )
    assert "too large" in stack.condition("huge", "Indexing")["message"]
    # Before: the whole body, then its parse (about 1 GB). Now: at most the 16 MiB cap, three tries.
    assert peak - baseline < 96 * MIB


def test_a_listing_that_stalls_or_trickles_fails_the_pass_and_the_controller_goes_on(
    stack: CatalogStack, hostile: HostileHub
) -> None:
    warmed_up(
        stack, AI_MODELS_CATALOG_HUB_TIMEOUT_SECONDS="1", AI_MODELS_CATALOG_LISTING_DEADLINE_SECONDS="1"
    )
    hostile.stall_after(1024, announced=MIB)
    hostile_source(stack, "stalled", hostile.url)
    failed_with(stack, "stalled", "ProviderUnavailable")

    with HostileHub() as trickling:
        trickling.trickle(every=0.05)
        hostile_source(stack, "trickling", trickling.url)
        failed_with(stack, "trickling", "ProviderUnavailable")
        assert "too slow" in stack.condition("trickling", "Indexing")["message"]

    # Neither took a worker with it: an ordinary pass still completes.
    served = stack.source("ordinary")["status"]["servedGeneration"]
    stack.request_sync("ordinary")
    stack.eventually(
        lambda: stack.source("ordinary")["status"].get("servedGeneration") != served,
        what="another ordinary pass",
    )


@pytest.mark.parametrize(
    "endpoint", ["http://169.254.169.254", "http://metadata.google.internal", "http://[fd00:ec2::254]"]
)
def test_a_metadata_endpoint_is_refused_even_when_link_local_mirrors_are_allowed(
    stack: CatalogStack, endpoint: str
) -> None:
    stack.controller(AI_MODELS_SOURCES_ALLOW_LINK_LOCAL_ENDPOINTS="true")
    hostile_source(stack, "metadata", endpoint)

    failed_with(stack, "metadata", "ProviderEndpointRefused")

    assert "cloud metadata" in stack.condition("metadata", "Indexing")["message"]


def test_a_link_local_endpoint_is_contacted_only_when_the_admin_allows_it(stack: CatalogStack) -> None:
    # Nothing listens there; what matters is whether the controller refuses before trying.
    first = stack.controller("strict", AI_MODELS_CATALOG_HUB_TIMEOUT_SECONDS="1")
    hostile_source(stack, "mirror", "http://169.254.10.10:9")
    failed_with(stack, "mirror", "ProviderEndpointRefused")
    assert "sources.allowLinkLocalEndpoints" in stack.condition("mirror", "Indexing")["message"]
    assert first.terminate() == 0

    stack.controller(
        "permissive",
        AI_MODELS_SOURCES_ALLOW_LINK_LOCAL_ENDPOINTS="true",
        AI_MODELS_CATALOG_HUB_TIMEOUT_SECONDS="1",
    )
    stack.request_sync("mirror")
    # Whatever answers there (nothing, or an egress proxy refusing), the controller tried.
    stack.eventually(
        lambda: indexing_reason(stack, "mirror") not in (None, "Indexing", "ProviderEndpointRefused"),
        timeout=60,
        what="a pass that contacts the link-local mirror",
    )


def test_the_largest_allowed_filter_product_indexes_with_flat_controller_memory(stack: CatalogStack) -> None:
    controller = warmed_up(stack)
    baseline = peak_rss(controller)
    authors = sorted({model.id.split("/")[0] for model in stack.hub.models})
    authors += [f"nobody-{index:02d}" for index in range(64 - len(authors))]
    stack.create_source(
        "widest",
        opted_in=True,
        spec={
            "provider": "HuggingFace",
            "huggingFace": {
                "authors": authors,
                "pipelineTags": ["text-generation", "feature-extraction"],
                "libraries": ["transformers", "gguf"],
                "maxModels": 0,
            },
        },
    )
    stack.eventually(
        lambda: stack.condition("widest", "Ready").get("reason") == "CatalogServed",
        timeout=120,
        what="the 256-listing pass",
    )

    peak = peak_rss(controller)
    print(f"controller peak RSS: {baseline / MIB:.0f} MiB before, {peak / MIB:.0f} MiB after 256 listings")
    assert stack.hub.count("api") >= 256
    assert peak - baseline < 32 * MIB
