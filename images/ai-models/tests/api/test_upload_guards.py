"""The upload API against hostile callers, over HTTP on 127.0.0.1 (real uvicorn, the API emulator,
real stores): readers who are not writers, old URLs, tricklers, clients that leave, two replicas
racing for one object, and malformed tokens and headers.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import hmac
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ai_models.adapters.objectstore import DirectoryStore, ObjectStore, S3Store
from ai_models.api.upload.claims import CLAIM_LEASE_SECONDS
from ai_models.domain.artifacts.layout import (
    upload_claim_key,
    upload_payload_key,
    upload_prefix,
    upload_record_key,
)
from ai_models.domain.artifacts.upload_record import UploadClaim, claim_from_json, claim_to_json
from ai_models.domain.storage.ledger import EntryState, Ledger, LedgerEntry, Owner, Scope
from fakes.model_files import tiny_gguf
from fakes.s3 import S3Bucket
from fakes.upload_clients import RawUpload, Trickler, offer, upload_path
from support.eventually import eventually

KEY = b"upload-signing-key-for-guards-32"
GIB = 1024**3
MIB = 1024**2
NAMESPACE = "team-a"
GGUF = tiny_gguf()
PUBLISHED = LedgerEntry(
    owner=Owner("Model", "other", "old", "u-old"),
    scope=Scope.NAMESPACED,
    size_bytes=1 * GIB,
    state=EntryState.PUBLISHED,
)


def problem(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["type"] == f"urn:ai-models:problem:{kind}"
    assert set(body) == {"type", "title", "status", "detail"}
    return body


def reservations(ledger: Ledger | None) -> list[LedgerEntry]:
    return [entry for entry in (ledger.entries if ledger else ()) if entry.state is EntryState.RESERVED]


def uploaded(store: ObjectStore, owner: Owner) -> list[str]:
    return [info.key for info in store.list(upload_prefix(owner))]


def bearer(identity: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {identity.token}"}


@pytest.fixture
def cluster(api_cluster: Any) -> Any:
    api_cluster.put_signing_key(KEY)
    api_cluster.put_ledger(Ledger(entries=(PUBLISHED,), confirmed=True))
    return api_cluster


@pytest.fixture
def editor(cluster: Any) -> Any:
    """May update Models in team-a (the Editor level there): whom a Model's upload is for."""
    cluster.emulator.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    return cluster.user("editor", level="Editor", namespace=NAMESPACE)


def waiting(cluster: Any, name: str, *, namespace: str | None = NAMESPACE) -> tuple[Owner, str]:
    owner: Owner = cluster.model(name, namespace=namespace)
    return owner, offer(cluster, owner, key=KEY)


# ----- who may upload ---------------------------------------------------------------------------


def test_an_upload_without_the_callers_own_token_is_refused_with_the_fix(
    cluster: Any, start_api: Any, store: DirectoryStore
) -> None:
    api = start_api(store, capacity_limit_bytes=10 * GIB)
    owner, token = waiting(cluster, "no-bearer")
    with httpx.Client(base_url=api.url, timeout=60) as http:
        body = problem(http.put(upload_path(token), content=GGUF), 401, "unauthenticated")
    assert "Authorization: Bearer" in body["detail"]
    assert "Model team-a/no-bearer" in body["detail"]
    assert uploaded(store, owner) == []
    assert reservations(cluster.ledger()) == []


@pytest.mark.parametrize("level", ["User", "PrivilegedUser"])
def test_a_reader_of_the_model_cannot_upload_to_it(
    cluster: Any, start_api: Any, store: DirectoryStore, level: str
) -> None:
    api = start_api(store, capacity_limit_bytes=10 * GIB)
    owner, token = waiting(cluster, "readable")
    reader = cluster.user("reader", level=level, namespace=NAMESPACE)
    with httpx.Client(base_url=api.url, timeout=60, headers=bearer(reader)) as http:
        body = problem(http.put(upload_path(token), content=GGUF), 403, "forbidden")
    assert "update models.ai.deckhouse.io 'readable' in namespace 'team-a'" in body["detail"]
    assert "Editor access level in namespace 'team-a'" in body["detail"]
    assert uploaded(store, owner) == []
    assert reservations(cluster.ledger()) == []


def test_an_editor_uploads_and_an_old_url_is_refused_once_a_new_one_was_issued(
    cluster: Any, start_api: Any, store: DirectoryStore, editor: Any
) -> None:
    api = start_api(store, capacity_limit_bytes=10 * GIB)
    owner, old = waiting(cluster, "reissued")
    new = offer(cluster, owner, key=KEY)
    assert new != old
    with httpx.Client(base_url=api.url, timeout=60, headers=bearer(editor)) as http:
        body = problem(http.put(upload_path(old), content=GGUF), 403, "upload-token-expired")
        assert "replaced by a newer one" in body["detail"]
        assert uploaded(store, owner) == []
        assert http.put(upload_path(new), content=GGUF).status_code == 201
    assert store.get_bytes(upload_payload_key(owner)) == GGUF


# ----- slow, gone and racing clients --------------------------------------------------------------


def pace_settings(**extra: Any) -> dict[str, Any]:
    """64 KiB/s over 1 s windows: a drip of a byte every 0.2 s is far below."""
    return {
        "api_upload_min_bytes_per_second": 64 * 1024,
        "api_upload_rate_window_seconds": 1.0,
        **extra,
    }


def test_a_trickling_upload_is_cut_off_and_its_reservation_released(
    cluster: Any, start_api: Any, store: DirectoryStore, editor: Any
) -> None:
    # 1 GiB is published; the trickler announces the rest of the budget.
    api = start_api(store, capacity_limit_bytes=1 * GIB + 64 * MIB, **pace_settings())
    trickling, slow_token = waiting(cluster, "trickling")
    other, other_token = waiting(cluster, "other")
    trickler = Trickler(
        api.server.host,
        api.server.port,
        upload_path(slow_token),
        content_length=64 * MIB,
        head=GGUF,
        headers=bearer(editor),
    ).start()
    try:
        eventually(lambda: bool(reservations(cluster.ledger())), message="the trickler's reservation")
        with httpx.Client(base_url=api.url, timeout=60, headers=bearer(editor)) as http:
            problem(http.put(upload_path(other_token), content=GGUF), 507, "insufficient-storage")
            answer = trickler.answer()
            assert answer.status == 408, answer.raw
            assert b"below the minimum rate" in answer.raw
            assert reservations(cluster.ledger()) == []
            assert http.put(upload_path(other_token), content=GGUF).status_code == 201
    finally:
        trickler.close()
    assert uploaded(store, trickling) == []
    assert store.get_bytes(upload_payload_key(other)) == GGUF


def test_tricklers_never_hold_every_upload_slot(
    cluster: Any, start_api: Any, store: DirectoryStore, editor: Any
) -> None:
    api = start_api(store, capacity_limit_bytes=10 * GIB, api_max_concurrent_uploads=5, **pace_settings())
    tricklers = []
    try:
        for number in range(5):
            _owner, token = waiting(cluster, f"trickler-{number}")
            tricklers.append(
                Trickler(
                    api.server.host,
                    api.server.port,
                    upload_path(token),
                    content_length=64 * MIB,
                    head=GGUF,
                    headers=bearer(editor),
                ).start()
            )
        eventually(lambda: len(reservations(cluster.ledger())) == 5, message="five tricklers reserved")
        sixth, token = waiting(cluster, "sixth")
        with httpx.Client(base_url=api.url, timeout=60, headers=bearer(editor)) as http:
            busy = http.put(upload_path(token), content=GGUF)
            if busy.status_code == 503:  # taken while all five still held a slot
                assert busy.headers["retry-after"].isdigit()
                assert busy.json()["type"] == "urn:ai-models:problem:replica-busy"
                assert "upload slots of this api replica are busy" in busy.json()["detail"]
            for trickler in tricklers:
                assert trickler.answer().status == 408
            assert http.put(upload_path(token), content=GGUF).status_code == 201
    finally:
        for trickler in tricklers:
            trickler.close()
    assert store.get_bytes(upload_payload_key(sixth)) == GGUF
    assert [entry.owner for entry in reservations(cluster.ledger())] == [sixth]


class HeldStore:
    """A directory store whose payload writes wait, once complete, until the test lets them finish."""

    def __init__(self, inner: DirectoryStore) -> None:
        self.inner = inner
        self.description = inner.description
        self.written = threading.Event()
        self.release = threading.Event()

    def put_stream(self, key: str, stream: Any, *, size: int | None = None) -> Any:
        info = self.inner.put_stream(key, stream, size=size)
        self.written.set()
        assert self.release.wait(timeout=30), "the test never released the store"
        return info

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_body_whose_client_left_before_it_was_recorded_is_not_kept(
    cluster: Any, start_api: Any, store: DirectoryStore, editor: Any
) -> None:
    held = HeldStore(store)
    api = start_api(held, capacity_limit_bytes=10 * GIB)
    owner, token = waiting(cluster, "abandoned")
    client = RawUpload(
        api.server.host, api.server.port, upload_path(token), content_length=len(GGUF), headers=bearer(editor)
    )
    try:
        assert client.send(GGUF)
        assert held.written.wait(timeout=30)
    finally:
        client.close()  # the client gives up after the whole body was sent
    # uvicorn drops a closed connection from its state once it has seen it go.
    server_state = api.server._server.server_state
    eventually(lambda: not server_state.connections, message="the api to notice the client left")
    held.release.set()
    eventually(lambda: uploaded(store, owner) == [], message="the payload removed")
    eventually(lambda: reservations(cluster.ledger()) == [], message="the reservation released")
    assert store.head(upload_record_key(owner)) is None


@pytest.fixture(params=["directory", "s3"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], ObjectStore]]:
    """A store two replicas open each on their own (a directory, a moto S3 bucket)."""
    if request.param == "directory":
        yield lambda: DirectoryStore(tmp_path / "shared")
        return
    bucket: S3Bucket = request.getfixturevalue("s3_bucket")
    yield lambda: S3Store(
        bucket.name, endpoint_url=bucket.server.endpoint_url, session=bucket.server.session()
    )


def test_two_replicas_accept_one_upload_for_one_object(
    cluster: Any, start_api: Any, shared_store: Callable[[], ObjectStore], editor: Any
) -> None:
    first_api = start_api(shared_store(), capacity_limit_bytes=10 * GIB)
    second_api = start_api(shared_store(), capacity_limit_bytes=10 * GIB)
    owner, token = waiting(cluster, "raced")
    release = threading.Event()
    payload = GGUF + bytes(MIB)

    def slow() -> Iterator[bytes]:
        yield payload[:4096]
        assert release.wait(timeout=30)
        yield payload[4096:]

    results: list[httpx.Response] = []

    def first() -> None:
        with httpx.Client(base_url=first_api.url, timeout=60, headers=bearer(editor)) as client:
            results.append(
                client.put(upload_path(token), content=slow(), headers={"Content-Length": str(len(payload))})
            )

    thread = threading.Thread(target=first)
    thread.start()
    store = shared_store()
    try:
        eventually(
            lambda: store.head(upload_claim_key(owner)) is not None, message="the first upload's claim"
        )
        second = GGUF + b"\1" * 100
        with httpx.Client(base_url=second_api.url, timeout=60, headers=bearer(editor)) as http:
            body = problem(http.put(upload_path(token), content=second), 409, "upload-conflict")
        assert "in progress (on api replica" in body["detail"]
    finally:
        release.set()
        thread.join(timeout=30)
    assert results[0].status_code == 201, results[0].text
    assert store.get_bytes(upload_payload_key(owner)) == payload
    assert results[0].json()["sha256"] == hashlib.sha256(payload).hexdigest()
    assert store.head(upload_claim_key(owner)) is None  # released once the record was written
    assert [entry.size_bytes for entry in reservations(cluster.ledger())] == [len(payload)]


def test_a_claim_stands_for_one_lease_not_for_the_uploads_whole_deadline(
    cluster: Any, start_api: Any, store: DirectoryStore, editor: Any
) -> None:
    # A 100 GiB upload may take up to 12 h at the minimum rate; were its claim to stand that long,
    # a replica dying mid-upload would block the object for half a day.
    api = start_api(store, capacity_limit_bytes=1024 * GIB)
    owner, token = waiting(cluster, "leased")
    release = threading.Event()
    announced = 100 * GIB

    def body() -> Iterator[bytes]:
        yield GGUF
        assert release.wait(timeout=30)

    def send() -> None:
        # The body ends short of what it announced: the client's own HTTP library refuses that.
        with (
            contextlib.suppress(Exception),
            httpx.Client(base_url=api.url, timeout=60, headers=bearer(editor)) as client,
        ):
            client.put(upload_path(token), content=body(), headers={"Content-Length": str(announced)})

    thread = threading.Thread(target=send)
    thread.start()
    try:
        eventually(lambda: store.head(upload_claim_key(owner)) is not None, message="the upload's claim")
        held = claim_from_json(store.get_bytes(upload_claim_key(owner)))
        assert held.expires_at - held.claimed_at <= datetime.timedelta(seconds=CLAIM_LEASE_SECONDS)
    finally:
        release.set()
        thread.join(timeout=30)
    eventually(lambda: store.head(upload_claim_key(owner)) is None, message="the claim released")


def claim(*, expires_in: float) -> bytes:
    now = datetime.datetime.now(datetime.UTC)
    return claim_to_json(
        UploadClaim(
            claim_id="0" * 32,
            replica="api-gone",
            claimed_at=now - datetime.timedelta(hours=1),
            expires_at=now + datetime.timedelta(seconds=expires_in),
        )
    )


def test_a_live_claim_refuses_and_a_lapsed_one_is_taken_over(
    cluster: Any, start_api: Any, store: DirectoryStore, editor: Any
) -> None:
    api = start_api(store, capacity_limit_bytes=10 * GIB)
    owner, token = waiting(cluster, "claimed")
    store.put_bytes(upload_claim_key(owner), claim(expires_in=600))
    with httpx.Client(base_url=api.url, timeout=60, headers=bearer(editor)) as http:
        body = problem(http.put(upload_path(token), content=GGUF), 409, "upload-conflict")
        assert "api replica api-gone" in body["detail"]
        assert store.head(upload_payload_key(owner)) is None
        # The replica died long ago: its claim lapsed.
        store.put_bytes(upload_claim_key(owner), claim(expires_in=-1))
        assert http.put(upload_path(token), content=GGUF).status_code == 201
    assert store.get_bytes(upload_payload_key(owner)) == GGUF
    assert store.head(upload_claim_key(owner)) is None


def test_a_failed_upload_releases_its_claim(
    cluster: Any, start_api: Any, store: DirectoryStore, editor: Any
) -> None:
    api = start_api(store, capacity_limit_bytes=10 * GIB)
    owner, token = waiting(cluster, "refused")
    with httpx.Client(base_url=api.url, timeout=60, headers=bearer(editor)) as http:
        problem(http.put(upload_path(token), content=b"<html>" * 200), 415, "unsupported-payload")
        assert uploaded(store, owner) == []
        assert http.put(upload_path(token), content=GGUF).status_code == 201


# ----- malformed tokens and headers --------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def signed(payload: bytes, key: bytes = KEY) -> str:
    encoded = b64(payload)
    return f"{encoded}.{b64(hmac.new(key, encoded.encode(), hashlib.sha256).digest())}"


@pytest.fixture
def guarded(cluster: Any, start_api: Any, store: DirectoryStore) -> Iterator[httpx.Client]:
    api = start_api(store, capacity_limit_bytes=10 * GIB, api_upload_signing_key_cache_seconds=60)
    with httpx.Client(base_url=api.url, timeout=60) as http:
        yield http


@pytest.mark.parametrize("expiry", ["1e400", "-1e400", str(10**400), "NaN"])
def test_a_signed_token_with_an_expiry_beyond_the_calendar_is_401(guarded: httpx.Client, expiry: str) -> None:
    token = signed(f'{{"e":{expiry},"k":"Model","m":"x","n":"team-a","u":"u"}}'.encode())
    body = problem(guarded.put(upload_path(token), content=GGUF), 401, "upload-token-invalid")
    assert "malformed" in body["detail"]


TOKEN_TEXT = st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~%!$", max_size=200
)
DOCUMENTS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("eknmui"), inner, max_size=6),
    max_leaves=12,
)


@given(token=TOKEN_TEXT | DOCUMENTS.map(lambda document: signed(json.dumps(document).encode())))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_upload_token_is_answered_with_a_problem_never_a_crash(guarded: httpx.Client, token: str) -> None:
    response = guarded.put(f"/api/upload/v1/uploads/{token}", content=GGUF)
    assert response.status_code in (400, 401, 403, 404, 405, 410), response.text
    assert response.headers["content-type"] == "application/problem+json"


def test_a_content_disposition_over_the_contract_limit_is_refused(
    cluster: Any, start_api: Any, store: DirectoryStore, editor: Any
) -> None:
    api = start_api(store, capacity_limit_bytes=10 * GIB)
    owner, token = waiting(cluster, "long-name")
    long = 'attachment; filename="' + "a" * 1000 + '.gguf"'
    assert len(long) > 1024
    with httpx.Client(base_url=api.url, timeout=60, headers=bearer(editor)) as http:
        body = problem(
            http.put(upload_path(token), content=GGUF, headers={"Content-Disposition": long}),
            400,
            "invalid-parameter",
        )
        assert "Content-Disposition" in body["detail"]
        assert uploaded(store, owner) == []
        at_limit = 'attachment; filename="' + "b" * (1024 - 29) + '.gguf"'
        assert len(at_limit) <= 1024
        response = http.put(upload_path(token), content=GGUF, headers={"Content-Disposition": at_limit})
        assert response.status_code == 201, response.text
