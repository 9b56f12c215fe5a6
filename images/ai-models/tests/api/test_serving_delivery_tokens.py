"""The serving API with delivery tokens (the materialize Jobs' credential, D86) against real peers:
the api under uvicorn, the API emulator holding the delivery signing key, a directory store.

A delivery token reads the manifest and files of exactly the artifacts it lists, while each object
still has the listed digest; it is never a Kubernetes token, and Kubernetes tokens keep working.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest

from ai_models.adapters.objectstore import DirectoryStore, ObjectStore
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage.ledger import Owner
from ai_models.names import DELIVERY_SIGNING_SECRET
from fakes.served_artifacts import (
    WORKLOAD,
    delivery_token,
    mark_ready,
    model_key,
    publish_ready,
    put_delivery_key,
    store_artifact,
)
from support.eventually import eventually

NAMESPACE = "team-a"
KEY = b"delivery-signing-key-of-32-bytes"
FILES = {"weights.bin": bytes(range(256)) * 64, "config.json": b'{"model_type": "llama"}'}


def publish(
    cluster: Any, store: ObjectStore, name: str, files: Mapping[str, bytes], *, namespace: str | None
) -> tuple[Owner, str]:
    return publish_ready(cluster.emulator, store, name, files, namespace=namespace)


def republish(
    cluster: Any, store: ObjectStore, owner: Owner, files: Mapping[str, bytes], *, salt: str
) -> str:
    digest = store_artifact(store, owner, files, salt=salt)
    mark_ready(cluster.emulator, owner, digest, size=1)
    return digest


def token_for(
    *artifacts: tuple[Owner, str],
    key: bytes = KEY,
    lifetime: datetime.timedelta = datetime.timedelta(hours=1),
) -> str:
    return delivery_token(artifacts, key=key, lifetime=lifetime)


def key_of(owner: Owner) -> ModelKey:
    return model_key(owner)


def base(owner: Owner) -> str:
    if owner.namespace:
        return f"/api/serving/v1/models/{owner.namespace}/{owner.name}"
    return f"/api/serving/v1/clustermodels/{owner.name}"


def problem(response: httpx.Response, status: int, kind: str) -> str:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["type"] == f"urn:ai-models:problem:{kind}", body
    return str(body["detail"])


@pytest.fixture
def store(tmp_path: Any) -> DirectoryStore:
    return DirectoryStore(tmp_path / "store")


@pytest.fixture
def http(api_cluster: Any, start_api: Any, store: DirectoryStore) -> Iterator[httpx.Client]:
    put_delivery_key(api_cluster.emulator, KEY)
    api = start_api(store, api_object_cache_seconds=0)
    with httpx.Client(base_url=api.url, timeout=30) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_delivery_token_reads_the_manifest_and_files_of_the_artifacts_it_lists(
    api_cluster: Any, store: DirectoryStore, http: httpx.Client
) -> None:
    model, model_digest = publish(api_cluster, store, "llama", FILES, namespace=NAMESPACE)
    shared, shared_digest = publish(api_cluster, store, "qwen", FILES, namespace=None)
    headers = bearer(token_for((model, model_digest), (shared, shared_digest)))
    for owner, digest in ((model, model_digest), (shared, shared_digest)):
        manifest = http.get(f"{base(owner)}/manifest", headers=headers)
        assert manifest.status_code == 200, manifest.text
        assert manifest.headers["etag"] == f'"{digest}"'
        whole = http.get(f"{base(owner)}/files/weights.bin", headers=headers)
        assert whole.status_code == 200, whole.text
        assert whole.content == FILES["weights.bin"]
        rest = http.get(f"{base(owner)}/files/weights.bin", headers={**headers, "Range": "bytes=100-"})
        assert rest.status_code == 206
        assert rest.content == FILES["weights.bin"][100:]
    # Kubernetes tokens keep working beside them.
    reader = api_cluster.user("reader")
    assert http.get(f"{base(model)}/manifest", headers=bearer(reader.token)).status_code == 200


def test_a_forged_delivery_token_is_refused_401(
    api_cluster: Any, store: DirectoryStore, http: httpx.Client
) -> None:
    model, digest = publish(api_cluster, store, "llama", FILES, namespace=NAMESPACE)
    other_key = token_for((model, digest), key=b"another-key-that-is-not-the-one!")
    detail = problem(http.get(f"{base(model)}/manifest", headers=bearer(other_key)), 401, "unauthenticated")
    assert "not genuine" in detail
    genuine = token_for((model, digest))
    payload, signature = genuine.rsplit(".", 1)
    widened = payload[:-2] + ("A" if payload[-2] != "A" else "B") + payload[-1]
    tampered = f"{widened}.{signature}"
    response = http.get(f"{base(model)}/files/weights.bin", headers=bearer(tampered))
    assert problem(response, 401, "unauthenticated")
    assert KEY.decode() not in response.text


def test_an_expired_delivery_token_is_refused_401_naming_its_workload(
    api_cluster: Any, store: DirectoryStore, http: httpx.Client
) -> None:
    model, digest = publish(api_cluster, store, "llama", FILES, namespace=NAMESPACE)
    expired = token_for((model, digest), lifetime=datetime.timedelta(seconds=-1))
    detail = problem(
        http.get(f"{base(model)}/files/weights.bin", headers=bearer(expired)), 401, "unauthenticated"
    )
    assert "expired" in detail
    assert WORKLOAD.describe() in detail


def test_a_delivery_token_does_not_read_an_artifact_it_does_not_list(
    api_cluster: Any, store: DirectoryStore, http: httpx.Client
) -> None:
    listed, listed_digest = publish(api_cluster, store, "llama", FILES, namespace=NAMESPACE)
    other, _ = publish(api_cluster, store, "mistral", FILES, namespace=NAMESPACE)
    shared, _ = publish(api_cluster, store, "qwen", FILES, namespace=None)
    headers = bearer(token_for((listed, listed_digest)))
    for owner in (other, shared):
        for path in ("manifest", "files/weights.bin"):
            detail = problem(http.get(f"{base(owner)}/{path}", headers=headers), 403, "forbidden")
            assert key_of(owner).describe() in detail
            assert WORKLOAD.describe() in detail


def test_a_delivery_token_does_not_read_a_model_of_another_namespace_even_when_it_lists_it(
    api_cluster: Any, store: DirectoryStore, http: httpx.Client
) -> None:
    foreign, digest = publish(api_cluster, store, "llama", FILES, namespace="team-b")
    # What a buggy issuer (or a leaked key) might sign: a team-a workload listing a team-b Model.
    headers = bearer(token_for((foreign, digest)))
    detail = problem(http.get(f"{base(foreign)}/files/weights.bin", headers=headers), 403, "forbidden")
    assert "Model team-b/llama" in detail
    assert "own namespace" in detail


def test_a_listed_model_published_again_is_refused_403_naming_it_and_both_digests(
    api_cluster: Any, store: DirectoryStore, http: httpx.Client
) -> None:
    model, old = publish(api_cluster, store, "llama", FILES, namespace=NAMESPACE)
    headers = bearer(token_for((model, old)))
    assert http.get(f"{base(model)}/manifest", headers=headers).status_code == 200
    new = republish(api_cluster, store, model, FILES, salt="again")
    for path in ("manifest", "files/weights.bin"):
        detail = problem(http.get(f"{base(model)}/{path}", headers=headers), 403, "forbidden")
        assert "Model team-a/llama" in detail
        assert old in detail
        assert new in detail


def test_without_the_delivery_signing_key_delivery_tokens_are_refused_naming_the_secret(
    api_cluster: Any, start_api: Any, store: DirectoryStore
) -> None:
    model, digest = publish(api_cluster, store, "llama", FILES, namespace=NAMESPACE)
    api = start_api(store, api_object_cache_seconds=0)
    with httpx.Client(base_url=api.url, timeout=30) as client:
        response = client.get(f"{base(model)}/manifest", headers=bearer(token_for((model, digest))))
        assert DELIVERY_SIGNING_SECRET in problem(response, 401, "unauthenticated")
        # Created later (as the controller does): a token verifies without a restart, once the key
        # may be read again (at most once a second, so forged tokens cannot flood the API server).
        put_delivery_key(api_cluster.emulator, KEY)
        headers = bearer(token_for((model, digest)))
        eventually(
            lambda: client.get(f"{base(model)}/manifest", headers=headers).status_code == 200,
            timeout=10,
            message="a delivery token to verify once the signing key exists",
        )


def test_a_delivery_token_is_never_sent_to_the_kubernetes_api(
    api_cluster: Any, store: DirectoryStore, http: httpx.Client
) -> None:
    model, digest = publish(api_cluster, store, "llama", FILES, namespace=NAMESPACE)
    authn = api_cluster.emulator.cluster.authn
    looked_up: list[str] = []
    original = authn.by_token

    def recording(token: str) -> Any:
        looked_up.append(token)
        return original(token)

    authn.by_token = recording
    good = token_for((model, digest))
    forged = token_for((model, digest), key=b"another-key-that-is-not-the-one!")
    assert http.get(f"{base(model)}/files/weights.bin", headers=bearer(good)).status_code == 200
    assert http.get(f"{base(model)}/manifest", headers=bearer(forged)).status_code == 401
    # The api's own calls (its ServiceAccount reading the Model and the key) are all the API saw.
    assert looked_up
    assert good not in looked_up
    assert forged not in looked_up
