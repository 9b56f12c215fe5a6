"""The serving API's listing of Ready ClusterModels (what an `AIModels` catalog source of another
cluster indexes), against the emulator with the api's rendered RBAC: order, paging, what is left
out, and who may list."""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ai_models.adapters.hub.errors import (
    ProviderEndpointRefused,
    ProviderForbidden,
    ProviderNotFound,
    ProviderRequestRejected,
    ProviderUnauthorized,
    ProviderUnavailable,
)
from ai_models.adapters.objectstore import DirectoryStore
from ai_models.adapters.serving.listing import ServingListingClient
from ai_models.api.models_serving import CLUSTER_MODELS_PATH
from ai_models.api.server import BackgroundServer
from ai_models.api.serving.listing import served
from ai_models.catalog.remote import RemoteSourceSpec, run_remote_pass
from ai_models.domain.storage.ledger import Ledger, Owner
from support.eventually import eventually

RESOLVED = {
    "format": "Safetensors",
    "architecture": "LlamaForCausalLM",
    "parameterCount": 8_030_000_000,
    "contextWindowTokens": 131072,
    "supportedEndpointTypes": ["Chat", "TextGeneration"],
    "resources": {"format": "Safetensors", "parameterCount": 8_030_000_000, "dtype": "BF16", "layers": 32},
}


def ready(
    cluster: Any, name: str, *, size: int = 1000, resolved: Any = RESOLVED, namespace: str = ""
) -> Owner:
    owner: Owner = cluster.model(name, namespace=namespace or None, status={"phase": "Publishing"})
    digest = "sha256:" + hashlib.sha256(name.encode()).hexdigest()
    status: dict[str, Any] = {
        "phase": "Ready",
        "artifact": {"uri": f"store://{name}", "digest": digest, "sizeBytes": size},
        "source": {"resolvedType": "Upload", "resolvedRevision": f"rev-{name}"},
    }
    if resolved is not None:
        status["resolved"] = resolved
    cluster.set_status(owner, status)
    return owner


@pytest.fixture
def api(start_api: Any, store: DirectoryStore) -> Any:
    return start_api(store, api_object_cache_seconds=0)


@pytest.fixture
def http(api: Any, api_cluster: Any) -> Iterator[httpx.Client]:
    reader = api_cluster.user("remote-cluster")
    with httpx.Client(base_url=api.url, timeout=60, headers={"Authorization": f"Bearer {reader.token}"}) as c:
        yield c


def names(page: dict[str, Any]) -> list[str]:
    return [item["name"] for item in page["items"]]


def test_ready_cluster_models_are_listed_in_name_order_with_digest_size_and_profile(
    api_cluster: Any, http: httpx.Client
) -> None:
    for name in ("zephyr", "bge-m3", "llama"):
        ready(api_cluster, name, size=len(name) * 1000)
    api_cluster.model("publishing", status={"phase": "Publishing"})
    api_cluster.model("failed", status={"phase": "Failed"})
    ready(api_cluster, "namespaced", namespace="team-a")  # a Model: never listed

    response = http.get(CLUSTER_MODELS_PATH)

    assert response.status_code == 200, response.text
    page = response.json()
    assert names(page) == ["bge-m3", "llama", "zephyr"]
    assert "nextPageToken" not in page
    llama = page["items"][1]
    assert llama == {
        "name": "llama",
        "digest": "sha256:" + hashlib.sha256(b"llama").hexdigest(),
        "sizeBytes": 5000,
        "revision": "rev-llama",
        "resolved": RESOLVED,
    }


def test_pages_walk_every_ready_cluster_model_once_also_when_one_is_deleted_between_pages(
    api_cluster: Any, http: httpx.Client
) -> None:
    owners = {name: ready(api_cluster, name) for name in ("a1", "a2", "a3", "a4", "a5")}

    first = http.get(CLUSTER_MODELS_PATH, params={"pageSize": 2}).json()
    assert names(first) == ["a1", "a2"]
    api_cluster.delete_object(owners["a2"])  # the last one of the page: the token still continues
    api_cluster.delete_object(owners["a3"])
    second = http.get(CLUSTER_MODELS_PATH, params={"pageSize": 2, "pageToken": first["nextPageToken"]}).json()
    assert names(second) == ["a4", "a5"]
    assert "nextPageToken" not in second


def test_a_cluster_model_whose_status_breaks_the_contract_is_left_out() -> None:
    """The CRD keeps such statuses out; one written past it (an older CRD) must not break the page."""
    status: dict[str, Any] = {
        "phase": "Ready",
        "artifact": {"digest": "sha256:" + "a" * 64, "sizeBytes": 10},
        "resolved": {"format": "Pickle"},
    }
    body = {"metadata": {"name": "broken"}, "status": status}
    assert served(body) is None
    good = {**body, "status": {**status, "resolved": {"format": "GGUF"}}}
    item = served(good)
    assert item is not None
    assert item.size_bytes == 10


@pytest.mark.parametrize(
    ("params", "status", "kind"),
    [
        ({"pageToken": "bm90LWEtdG9rZW4"}, 400, "invalid-page-token"),
        ({"pageSize": 0}, 400, "invalid-parameter"),
        ({"pageSize": 501}, 400, "invalid-parameter"),
        ({"page_size": 5}, 400, "invalid-parameter"),
    ],
)
def test_parameters_outside_the_contract_are_refused(
    http: httpx.Client, params: dict[str, Any], status: int, kind: str
) -> None:
    response = http.get(CLUSTER_MODELS_PATH, params=params)
    assert response.status_code == status, response.text
    assert response.json()["type"] == f"urn:ai-models:problem:{kind}"


def test_only_subjects_that_may_list_cluster_models_get_the_listing(api: Any, api_cluster: Any) -> None:
    ready(api_cluster, "shared")
    ready(api_cluster, "in-team-a", namespace="team-a")  # creates the namespace
    limited = api_cluster.user("team-a-editor", level="Editor", namespace="team-a")
    with httpx.Client(base_url=api.url, timeout=60) as client:
        anonymous = client.get(CLUSTER_MODELS_PATH)
        assert anonymous.status_code == 401
        assert anonymous.headers["WWW-Authenticate"].startswith("Bearer")
        refused = client.get(CLUSTER_MODELS_PATH, headers={"Authorization": f"Bearer {limited.token}"})
        assert refused.status_code == 403, refused.text
        assert "list clustermodels.ai.deckhouse.io" in refused.json()["detail"]
        delivery = client.get(CLUSTER_MODELS_PATH, headers={"Authorization": "Bearer aimd1.x.y"})
        assert delivery.status_code in (401, 403), delivery.text


def test_the_aimodels_client_walks_the_listing_the_api_serves_and_names_each_refusal(
    api: Any, api_cluster: Any
) -> None:
    """The client an AIModels source of another cluster uses, against this cluster's real api."""
    for name in ("c1", "c2", "c3"):
        ready(api_cluster, name, size=7)
    reader = api_cluster.user("other-cluster")
    with ServingListingClient(endpoint=api.url, token=reader.token) as client:
        first = client.list_page(None, 2)
        second = client.list_page(first.next_page_token, 2)
    assert [i.name for i in first.items + second.items] == ["c1", "c2", "c3"]
    assert second.next_page_token is None
    assert first.items[0].size_bytes == 7
    assert first.items[0].resolved == RESOLVED
    assert first.items[0].revision == "rev-c1"

    with (
        ServingListingClient(endpoint=api.url, token="not-a-token") as client,
        pytest.raises(ProviderUnauthorized, match="refused the token"),
    ):
        client.list_page(None, 2)
    with (
        ServingListingClient(endpoint=api.url, token=reader.token) as client,
        pytest.raises(ProviderRequestRejected),
    ):
        client.list_page("bm90LWEtdG9rZW4", 2)  # not a token the listing issued
    ready(api_cluster, "in-team-b", namespace="team-b")
    limited = api_cluster.user("team-b-user", level="User", namespace="team-b")
    with (
        ServingListingClient(endpoint=api.url, token=limited.token) as client,
        pytest.raises(ProviderForbidden, match="list on clustermodels"),
    ):
        client.list_page(None, 2)
    with (
        ServingListingClient(endpoint=api.url + "/nothing-here", token=reader.token) as client,
        pytest.raises(ProviderNotFound),
    ):
        client.list_page(None, 2)


def test_ready_cluster_models_listed_here_become_catalog_entries_whose_verdict_reserves_their_size(
    start_api: Any, api_cluster: Any, store: DirectoryStore
) -> None:
    """Listing -> AIModels pass -> catalog API, end to end: the entry a user of the consuming cluster
    sees is the ClusterModel, with its facts, and its verdict asks for the artifact's size."""
    api = start_api(store, api_object_cache_seconds=0, capacity_limit_bytes=10**12)
    api_cluster.put_ledger(Ledger(confirmed=True))
    ready(api_cluster, "qwen3-8b", size=16_000_000_000)
    ready(api_cluster, "bge-m3", size=2_270_000_000, resolved={"format": "Safetensors"})
    reader = api_cluster.user("consuming-cluster")
    spec = RemoteSourceSpec(name="cluster-a", endpoint=api.url, token=reader.token, chunk_size=1)
    with ServingListingClient(endpoint=spec.endpoint, token=spec.token) as listing:
        result = run_remote_pass(
            spec=spec,
            listing=listing,
            store=store,
            resume=None,
            on_checkpoint=lambda _: None,
            clock=lambda: datetime.datetime.now(datetime.UTC),
        )
    assert result is not None
    assert (result.models, result.chunks) == (2, 2)

    with httpx.Client(base_url=api.url, timeout=60, headers={"Authorization": f"Bearer {reader.token}"}) as c:

        def served() -> dict[str, Any] | None:
            response = c.get("/api/catalog-import/v1/sources/cluster-a/models/qwen3-8b")
            return response.json() if response.status_code == 200 else None

        entry = eventually(served, message="the api to serve the AIModels source")
    assert entry is not None
    assert entry["provider"] == "AIModels"
    assert entry["metadata"]["sha"] == "sha256:" + hashlib.sha256(b"qwen3-8b").hexdigest()
    assert entry["resources"]["weightsBytes"] == 16_000_000_000
    assert entry["resources"]["parameterCount"] == 8_030_000_000
    assert entry["resources"]["contextLength"] == 131072
    assert entry["downloadVerdict"]["verdict"] == "Feasible"
    assert entry["downloadVerdict"]["requiredBytes"] == 16_000_000_000


def test_the_aimodels_client_checks_the_other_clusters_certificate_with_the_ca_bundle(
    api: Any, api_cluster: Any, tmp_path: Path, write_tls_files: Callable[[Path], tuple[Path, Path, Path]]
) -> None:
    cert, key, ca = write_tls_files(tmp_path / "tls")
    tls = BackgroundServer(api.runtime.app, shutting_down=api.runtime.state.shutting_down, tls=(cert, key))
    tls.start()
    try:
        ready(api_cluster, "over-tls")
        token = api_cluster.user("tls-reader").token
        with ServingListingClient(endpoint=tls.url, token=token, ca_bundle=ca.read_text()) as client:
            assert [item.name for item in client.list_page(None, 10).items] == ["over-tls"]
        with (
            ServingListingClient(endpoint=tls.url, token=token) as client,
            pytest.raises(ProviderUnavailable, match=r"does not trust .*spec\.aiModels\.caBundle"),
        ):
            client.list_page(None, 10)
        with pytest.raises(ProviderEndpointRefused, match="not a PEM bundle"):
            ServingListingClient(
                endpoint=tls.url, token=token, ca_bundle="-----BEGIN CERTIFICATE-----\nnope\n"
            )
    finally:
        tls.stop()
