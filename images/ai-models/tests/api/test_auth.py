"""Who may use the catalog: real HTTP to the api, real TokenReview/SubjectAccessReview in the
emulator, evaluated from the module's rendered access-level roles."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.catalog.layout import CatalogManifest
from ai_models.domain.catalog.record import CatalogRecord
from kubeemu.authn import Identity, new_token

RecordMaker = Callable[..., CatalogRecord]
GenerationWriter = Callable[..., CatalogManifest]

SEARCH = "/api/catalog-import/v1/models"
SOURCES = "/api/catalog-import/v1/sources"
ENTRY = "/api/catalog-import/v1/sources/hf/models/org/model"
CATALOG_PATHS = [SEARCH, SOURCES, ENTRY]


@pytest.fixture
def api(
    start_api: Any, store: DirectoryStore, make_record: RecordMaker, write_generation: GenerationWriter
) -> Any:
    write_generation(store, "hf", "g1", [[make_record("hf", "org/model", downloads=1)]])
    running = start_api(store)
    assert running.runtime.builder.first_pass_complete.wait(timeout=10)
    return running


@pytest.fixture
def http(api: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, timeout=30) as client:
        yield client


def bearer(identity: Identity) -> dict[str, str]:
    return {"Authorization": f"Bearer {identity.token}"}


def assert_problem(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["type"] == f"urn:ai-models:problem:{kind}"
    assert body["status"] == status
    return body


def test_no_or_an_invalid_token_is_401_with_a_bearer_challenge(http: httpx.Client) -> None:
    headers: list[dict[str, str]] = [
        {},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer two words"},
        {"Authorization": "Bearer not-a-known-token"},
    ]
    for path in CATALOG_PATHS:
        for header in headers:
            response = http.get(path, headers=header)
            assert_problem(response, 401, "unauthenticated")
            assert response.headers["www-authenticate"] == "Bearer"


def test_a_user_limited_to_a_namespace_is_403(api_cluster: Any, http: httpx.Client) -> None:
    user = api_cluster.user("namespace-user", namespace="default")
    for path in CATALOG_PATHS:
        body = assert_problem(http.get(path, headers=bearer(user)), 403, "forbidden")
        assert "namespace-user" in body["detail"]
        assert "catalogimports.ai.deckhouse.io" in body["detail"]


def test_a_cluster_wide_user_is_allowed(api_cluster: Any, http: httpx.Client) -> None:
    user = api_cluster.user("cluster-user")
    for path in CATALOG_PATHS:
        response = http.get(path, headers=bearer(user))
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/json"


def test_search_needs_list_and_an_entry_needs_get(api_cluster: Any, http: httpx.Client) -> None:
    emulator = api_cluster.emulator
    lister = emulator.add_identity(Identity(name="lister", token=new_token()))
    emulator.cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "catalog-list-only"},
            "rules": [{"apiGroups": ["ai.deckhouse.io"], "resources": ["catalogimports"], "verbs": ["list"]}],
        }
    )
    emulator.cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "catalog-list-only"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "catalog-list-only",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "lister"}],
        }
    )
    assert http.get(SEARCH, headers=bearer(lister)).status_code == 200
    assert http.get(SOURCES, headers=bearer(lister)).status_code == 200
    assert_problem(http.get(ENTRY, headers=bearer(lister)), 403, "forbidden")


def test_a_stopped_kubernetes_api_is_503_for_callers_not_yet_reviewed(
    api_cluster: Any, http: httpx.Client
) -> None:
    reviewed = api_cluster.user("reviewed")
    fresh = api_cluster.user("fresh")
    assert http.get(SEARCH, headers=bearer(reviewed)).status_code == 200
    api_cluster.emulator.server.stop()
    # The reviewed caller's answers are cached for a few seconds; the fresh one needs the API.
    assert http.get(SEARCH, headers=bearer(reviewed)).status_code == 200
    body = assert_problem(http.get(SEARCH, headers=bearer(fresh)), 503, "kubernetes-unavailable")
    assert "TokenReview" in body["detail"]
    body = assert_problem(http.get(ENTRY, headers=bearer(reviewed)), 503, "kubernetes-unavailable")
    assert "SubjectAccessReview" in body["detail"]


def test_an_api_account_without_review_rights_is_502_naming_the_missing_permission(
    api_cluster: Any, start_api: Any, store: DirectoryStore
) -> None:
    powerless = api_cluster.emulator.add_identity(Identity.service_account("d8-ai-models", "powerless"))
    api = start_api(store, account=powerless)
    user = api_cluster.user("cluster-user")
    with httpx.Client(base_url=api.url, timeout=30) as client:
        body = assert_problem(client.get(SEARCH, headers=bearer(user)), 502, "kubernetes-error")
    assert "403" in body["detail"]
    assert "create on tokenreviews.authentication.k8s.io" in body["detail"]


def test_tokens_never_reach_the_logs(
    api_cluster: Any, http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    allowed = api_cluster.user("allowed")
    limited = api_cluster.user("limited", namespace="default")
    unknown = "never-issued-" + new_token()
    http.get(SEARCH, headers=bearer(allowed))
    http.get(SEARCH, headers=bearer(limited))
    http.get(SEARCH, headers={"Authorization": f"Bearer {unknown}"})
    api_cluster.emulator.server.stop()
    http.get(ENTRY, headers={"Authorization": f"Bearer {unknown}"})
    logged = "\n".join(f"{record.getMessage()} {vars(record)}" for record in caplog.records)
    assert "limited" in logged  # the forbidden request was logged, by user name
    for token in (allowed.token, limited.token, unknown):
        assert token not in logged
