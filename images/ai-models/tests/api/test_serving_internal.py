"""The serving API on the internal TLS listener (D159): the node plugin's and the materializers'
way in. A Kubernetes token is accepted there only when it was issued for the module audience, so
a token the API server would accept never has to cross the network; the public listener keeps
serving users' tokens as documented."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.names import MODULE_TOKEN_AUDIENCE
from kubeemu.authn import Identity
from testbed.access_levels import grant_access_level

from .test_serving import FILES, NAMESPACE, base, problem, publish

ACCOUNT = "node-reader"


@pytest.fixture
def api(start_api: Any, store: DirectoryStore) -> Any:
    return start_api(store, api_object_cache_seconds=0, internal_tls=True)


@pytest.fixture
def model(api_cluster: Any, store: DirectoryStore) -> Any:
    owner, _, manifest = publish(api_cluster, store, "llama", FILES, namespace=NAMESPACE)
    return owner, manifest


@pytest.fixture
def account(api_cluster: Any, model: Any) -> Identity:
    """A ServiceAccount allowed to read the Models of NAMESPACE (as the node plugin reads any)."""
    status, _, body = api_cluster.emulator.request(
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
        body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ACCOUNT}},
    )
    assert status == 201, body
    identity = Identity.service_account(NAMESPACE, ACCOUNT)
    grant_access_level(api_cluster.emulator.cluster, identity, "User", namespace=NAMESPACE)
    return identity


def minted(api_cluster: Any, *, audiences: list[str]) -> str:
    """A token of ACCOUNT from the TokenRequest API, as kubelet projects one."""
    status, _, body = api_cluster.emulator.request(
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{ACCOUNT}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": audiences},
        },
    )
    assert status == 201, body
    token: str = body["status"]["token"]
    return token


@pytest.fixture
def internal(api: Any) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=api.internal_url, timeout=30, verify=ssl.create_default_context(cafile=str(api.ca_file))
    ) as client:
        yield client


@pytest.fixture
def public(api: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, timeout=30) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_internal_serving_api_refuses_a_token_of_the_api_server_audience(
    api_cluster: Any, model: Any, account: Identity, internal: httpx.Client, public: httpx.Client
) -> None:
    owner, _ = model
    token = minted(api_cluster, audiences=[])
    refused = problem(internal.get(f"{base(owner)}/manifest", headers=bearer(token)), 401, "unauthenticated")
    assert MODULE_TOKEN_AUDIENCE in refused["detail"]
    # The same token is a user's on the public listener, which keeps serving it.
    assert public.get(f"{base(owner)}/manifest", headers=bearer(token)).status_code == 200


def test_the_internal_serving_api_serves_a_token_of_the_module_audience(
    api_cluster: Any, model: Any, account: Identity, internal: httpx.Client, public: httpx.Client
) -> None:
    owner, manifest = model
    token = minted(api_cluster, audiences=[MODULE_TOKEN_AUDIENCE])
    answer = internal.get(f"{base(owner)}/manifest", headers=bearer(token))
    assert answer.status_code == 200, answer.text
    assert answer.content == manifest
    weights = internal.get(f"{base(owner)}/files/weights.bin", headers=bearer(token))
    assert weights.content == FILES["weights.bin"]
    # Bound to the module, the token is nobody's on the public listener (nor at the API server).
    problem(public.get(f"{base(owner)}/manifest", headers=bearer(token)), 401, "unauthenticated")
    status, _, _ = api_cluster.emulator.request("GET", "/api/v1/namespaces", token=token)
    assert status == 401


def test_the_internal_listener_serves_the_serving_contract_but_not_the_catalog(
    api: Any, internal: httpx.Client
) -> None:
    assert internal.get("/api/serving/v1/openapi.json").status_code == 200
    problem(internal.get("/api/catalog-import/v1/sources"), 404, "not-found")
