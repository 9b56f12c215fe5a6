"""Uploads against real peers: the api under uvicorn, the Kubernetes API emulator (the api's own
ServiceAccount, with the chart's RBAC), the directory store and moto S3.

Token rejections: 401 `upload-token-invalid` for a token that is malformed or not signed with the
current key (forged, or signed with a key rotated away), 403 `upload-token-expired` for a genuine
token past its expiry: the first is "not a credential", the second "a credential no longer good".
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ai_models.adapters.objectstore import DirectoryStore, ObjectStore, S3Store
from ai_models.domain.artifacts.layout import upload_payload_key, upload_record_key
from ai_models.domain.artifacts.upload_record import record_from_json
from ai_models.domain.publication.upload_token import issue
from ai_models.domain.storage.ledger import EntryState, Ledger, LedgerEntry, Owner, Scope
from fakes.model_files import safetensors_bytes, tiny_gguf
from fakes.s3 import S3Bucket
from fakes.upload_clients import offer as offer_url
from fakes.upload_clients import upload_path
from support.eventually import eventually

KEY = b"upload-signing-key-for-tests-32b"
GIB = 1024**3
MIB = 1024**2
NAMESPACE = "team-a"
WAITING = {"phase": "WaitForUpload"}
GGUF = tiny_gguf()
HTML = b"<!DOCTYPE html><html><head><title>404</title></head><body>Not Found</body></html>\n" * 20
PUBLISHED = LedgerEntry(
    owner=Owner("Model", "other", "old", "u-old"),
    scope=Scope.NAMESPACED,
    size_bytes=1 * GIB,
    state=EntryState.PUBLISHED,
)


# The token each waiting object's status.upload holds now, as the controller would have issued it.
OFFERED: dict[Owner, str] = {}


def token_for(owner: Owner, *, key: bytes = KEY, expires_in: float = 3600) -> str:
    """The object's current URL token; any other key or expiry issues a token nobody offered."""
    if key == KEY and expires_in == 3600 and owner in OFFERED:
        return OFFERED[owner]
    expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=expires_in)
    return issue(owner, expires_at=expires, key=key)


def offer(cluster: Any, owner: Owner, *, key: bytes = KEY) -> str:
    OFFERED[owner] = offer_url(cluster, owner, key=key)
    return OFFERED[owner]


def waiting(cluster: Any, name: str, *, namespace: str | None = None) -> Owner:
    """A Model (a ClusterModel without a namespace) waiting for an upload, with its URL issued."""
    owner: Owner = cluster.model(name, namespace=namespace)
    offer(cluster, owner)
    return owner


def problem(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["type"] == f"urn:ai-models:problem:{kind}"
    return body


def reservations(ledger: Ledger | None) -> list[LedgerEntry]:
    return [entry for entry in (ledger.entries if ledger else ()) if entry.state is EntryState.RESERVED]


def stored_keys(store: DirectoryStore) -> list[str]:
    """Every object under uploads/, and any file at all on disk (temp files included)."""
    on_disk = [str(path.relative_to(store.root)) for path in store.root.rglob("*") if path.is_file()]
    return sorted(on_disk)


@pytest.fixture
def cluster(api_cluster: Any) -> Any:
    api_cluster.put_signing_key(KEY)
    api_cluster.put_ledger(Ledger(entries=(PUBLISHED,), confirmed=True))
    # Allowed to update Models anywhere and ClusterModels: whom an upload is for.
    uploader = api_cluster.user("uploader", level="ClusterEditor")
    api_cluster.auth = {"Authorization": f"Bearer {uploader.token}"}
    return api_cluster


@pytest.fixture
def api(cluster: Any, start_api: Any, store: DirectoryStore) -> Any:
    return start_api(store, capacity_limit_bytes=10 * GIB, api_upload_signing_key_cache_seconds=60)


@pytest.fixture
def http(api: Any, cluster: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, timeout=60, headers=cluster.auth) as client:
        yield client


def test_an_upload_is_stored_recorded_and_reserved(
    cluster: Any, api: Any, http: httpx.Client, store: DirectoryStore
) -> None:
    owner = waiting(cluster, "llama", namespace=NAMESPACE)
    response = http.put(upload_path(token_for(owner)), params={"filename": "llama-q4.gguf"}, content=GGUF)
    assert response.status_code == 201, response.text
    receipt = response.json()
    # The name kept as given: no note.
    assert set(receipt) == {"sizeBytes", "sha256", "format", "receivedAt", "filename"}
    assert receipt["filename"] == "llama-q4.gguf"
    assert receipt["sizeBytes"] == len(GGUF)
    assert receipt["sha256"] == hashlib.sha256(GGUF).hexdigest()
    assert receipt["format"] == "GGUF"
    assert store.get_bytes(upload_payload_key(owner)) == GGUF
    record = record_from_json(store.get_bytes(upload_record_key(owner)))
    assert (record.sha256, record.size_bytes, record.format.value) == (
        receipt["sha256"],
        len(GGUF),
        "GGUF",
    )
    assert record.filename == "llama-q4.gguf"
    assert datetime.datetime.fromisoformat(record.received_at) == datetime.datetime.fromisoformat(
        receipt["receivedAt"]
    )
    # Reserved under the Model itself, so the controller's reservation and commit replace it.
    ledger = cluster.ledger()
    assert ledger is not None
    assert ledger.confirmed
    assert reservations(ledger) == [
        LedgerEntry(owner=owner, scope=Scope.NAMESPACED, size_bytes=len(GGUF), state=EntryState.RESERVED)
    ]
    assert PUBLISHED in ledger.entries
    metrics = api.runtime.metrics.registry
    assert metrics.get_sample_value("d8_ai_models_api_upload_bytes_total") == len(GGUF)
    route = "/api/upload/v1/uploads/{token}"
    assert (
        metrics.get_sample_value(
            "d8_ai_models_api_requests_total", {"route": route, "method": "PUT", "code": "201"}
        )
        == 1
    )


def test_curl_upload_file_works(cluster: Any, api: Any, store: DirectoryStore, tmp_path: Path) -> None:
    owner = waiting(cluster, "from-curl", namespace=NAMESPACE)
    payload = safetensors_bytes({"w": ("BF16", (64, 64))})
    path = tmp_path / "model.safetensors"
    path.write_bytes(payload)
    result = subprocess.run(
        [
            "curl",
            "--silent",
            "--show-error",
            "--fail-with-body",
            "-H",
            f"Authorization: {cluster.auth['Authorization']}",
            "-T",
            str(path),
            api.url + upload_path(token_for(owner)),
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode() + result.stdout.decode()
    receipt = json.loads(result.stdout)
    assert receipt["format"] == "Safetensors"
    assert store.get_bytes(upload_payload_key(owner)) == payload
    # curl -T names the file in the URL path only; the record falls back to the format's default.
    assert record_from_json(store.get_bytes(upload_record_key(owner))).filename == "model.safetensors"


def test_the_file_name_may_come_from_content_disposition(
    cluster: Any, http: httpx.Client, store: DirectoryStore
) -> None:
    owner = waiting(cluster, "named", namespace=NAMESPACE)
    response = http.put(
        upload_path(token_for(owner)),
        content=GGUF,
        headers={"Content-Disposition": 'attachment; filename="../../etc/tiny.gguf"'},
    )
    assert response.status_code == 201, response.text
    assert record_from_json(store.get_bytes(upload_record_key(owner))).filename == "tiny.gguf"
    assert response.json()["filenameNote"] == (
        "'../../etc/tiny.gguf' is stored as 'tiny.gguf': only the last segment of a path is kept"
    )


def test_a_name_that_is_not_kept_is_explained_in_the_answer(
    cluster: Any, http: httpx.Client, store: DirectoryStore
) -> None:
    """`?filename=my%20model%20(v2).gguf` becomes model.gguf: the answer says so, and why."""
    owner = waiting(cluster, "spaced", namespace=NAMESPACE)
    response = http.put(
        upload_path(token_for(owner)), params={"filename": "my model (v2).gguf"}, content=GGUF
    )
    assert response.status_code == 201, response.text
    receipt = response.json()
    assert receipt["filename"] == "model.gguf"
    assert receipt["filenameNote"].startswith("'my model (v2).gguf' is stored as 'model.gguf': a stored ")
    assert "so the default name is used" in receipt["filenameNote"]
    assert record_from_json(store.get_bytes(upload_record_key(owner))).filename == "model.gguf"


def test_content_decides_not_the_name(cluster: Any, http: httpx.Client, store: DirectoryStore) -> None:
    html_owner = waiting(cluster, "html", namespace=NAMESPACE)
    before = cluster.ledger()
    refused = http.put(upload_path(token_for(html_owner)), params={"filename": "model.gguf"}, content=HTML)
    body = problem(refused, 415, "unsupported-payload")
    assert "GGUF or safetensors file" in body["detail"]
    assert "Model team-a/html" in body["detail"]
    assert store.head(upload_payload_key(html_owner)) is None
    assert store.head(upload_record_key(html_owner)) is None
    assert cluster.ledger() == before  # the reservation taken before sniffing was released

    gguf_owner = waiting(cluster, "bin-named", namespace=NAMESPACE)
    accepted = http.put(upload_path(token_for(gguf_owner)), params={"filename": "weights.bin"}, content=GGUF)
    assert accepted.status_code == 201, accepted.text
    assert accepted.json()["format"] == "GGUF"
    assert record_from_json(store.get_bytes(upload_record_key(gguf_owner))).filename == "weights.bin.gguf"
    assert accepted.json()["filenameNote"] == (
        "'weights.bin' is stored as 'weights.bin.gguf': the extension follows the content (GGUF)"
    )


def test_a_chunked_upload_needs_content_length_when_a_budget_is_set(
    cluster: Any, http: httpx.Client, store: DirectoryStore
) -> None:
    owner = waiting(cluster, "chunked", namespace=NAMESPACE)
    before = cluster.ledger()
    body = problem(http.put(upload_path(token_for(owner)), content=iter([GGUF])), 411, "length-required")
    assert "Content-Length" in body["detail"]
    assert stored_keys(store) == []
    assert cluster.ledger() == before


def test_a_chunked_upload_is_taken_without_a_budget(
    cluster: Any, start_api: Any, store: DirectoryStore
) -> None:
    api = start_api(store)
    owner = waiting(cluster, "chunked", namespace=NAMESPACE)
    before = cluster.ledger()
    with httpx.Client(base_url=api.url, timeout=60, headers=cluster.auth) as http:
        response = http.put(upload_path(token_for(owner)), content=iter([GGUF[:100], GGUF[100:]]))
    assert response.status_code == 201, response.text
    assert store.get_bytes(upload_payload_key(owner)) == GGUF
    assert cluster.ledger() == before  # no size to reserve


def test_an_upload_over_the_budget_is_refused_before_anything_is_stored(
    cluster: Any, start_api: Any, store: DirectoryStore
) -> None:
    api = start_api(store, capacity_limit_bytes=1 * GIB + 1000)  # 1 GiB is published: 1000 bytes left
    owner = waiting(cluster, "big", namespace=NAMESPACE)
    before = cluster.ledger()
    with httpx.Client(base_url=api.url, timeout=60, headers=cluster.auth) as http:
        body = problem(http.put(upload_path(token_for(owner)), content=GGUF), 507, "insufficient-storage")
    assert "1000 bytes" in body["detail"]
    assert "capacityLimit" in body["detail"]
    assert stored_keys(store) == []
    assert cluster.ledger() == before


def test_a_refused_upload_is_never_sent_by_a_client_that_expects_100_continue(
    cluster: Any, start_api: Any, store: DirectoryStore, tmp_path: Path
) -> None:
    api = start_api(store, capacity_limit_bytes=1 * GIB + 1000)
    owner = waiting(cluster, "big", namespace=NAMESPACE)
    path = tmp_path / "big.gguf"
    path.write_bytes(GGUF + bytes(16 * MIB))  # large enough for curl to send Expect: 100-continue
    url = api.url + upload_path(token_for(owner))
    result = subprocess.run(
        [
            "curl",
            "--silent",
            "-H",
            f"Authorization: {cluster.auth['Authorization']}",
            "-T",
            str(path),
            "-w",
            "%{http_code} %{size_upload}",
            "-o",
            "/dev/null",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    code, uploaded = result.stdout.split()
    assert code == "507"
    assert int(uploaded) == 0
    assert stored_keys(store) == []


def test_unknown_usage_refuses_with_its_own_problem(
    cluster: Any, start_api: Any, store: DirectoryStore
) -> None:
    cluster.put_ledger(Ledger(entries=(PUBLISHED,), confirmed=False))
    api = start_api(store, capacity_limit_bytes=10 * GIB)
    owner = waiting(cluster, "early", namespace=NAMESPACE)
    with httpx.Client(base_url=api.url, timeout=60, headers=cluster.auth) as http:
        body = problem(http.put(upload_path(token_for(owner)), content=GGUF), 507, "storage-usage-unknown")
    assert "inventory pass has to confirm" in body["detail"]
    assert stored_keys(store) == []


def test_the_first_upload_creates_a_missing_ledger(
    cluster: Any, start_api: Any, store: DirectoryStore
) -> None:
    cluster.delete_ledger()
    api = start_api(store)  # no budget: nothing is refused for lack of room
    owner = waiting(cluster, "first")  # a ClusterModel
    with httpx.Client(base_url=api.url, timeout=60, headers=cluster.auth) as http:
        assert http.put(upload_path(token_for(owner)), content=GGUF).status_code == 201
    ledger = cluster.ledger()
    assert ledger is not None
    assert not ledger.confirmed  # only an inventory pass confirms
    assert reservations(ledger) == [
        LedgerEntry(owner=owner, scope=Scope.CLUSTER, size_bytes=len(GGUF), state=EntryState.RESERVED)
    ]


def test_token_rejections(cluster: Any, http: httpx.Client) -> None:
    owner = waiting(cluster, "guarded", namespace=NAMESPACE)
    forged = problem(
        http.put(upload_path(token_for(owner, key=b"x" * 32)), content=GGUF), 401, "upload-token-invalid"
    )
    assert "status.upload" in forged["detail"]
    malformed = http.put(upload_path("not-a-token"), content=GGUF)
    problem(malformed, 401, "upload-token-invalid")
    assert malformed.headers["www-authenticate"] == 'UploadToken realm="ai-models"'
    tampered_payload = token_for(Owner("Model", NAMESPACE, "other", owner.uid)).split(".")[0]
    tampered = tampered_payload + "." + token_for(owner).split(".")[1]
    problem(http.put(upload_path(tampered), content=GGUF), 401, "upload-token-invalid")
    expired = problem(
        http.put(upload_path(token_for(owner, expires_in=-5)), content=GGUF), 403, "upload-token-expired"
    )
    assert "expired" in expired["detail"]


def test_a_rotated_key_works_at_once(cluster: Any, http: httpx.Client) -> None:
    owner = waiting(cluster, "rotated", namespace=NAMESPACE)
    # The api reads the key and keeps it (60 s here).
    problem(http.put(upload_path(token_for(owner, expires_in=-5)), content=GGUF), 403, "upload-token-expired")
    old_token = token_for(owner)
    cluster.put_signing_key(b"a-new-key-after-rotation-32bytes")
    new_token = offer(cluster, owner, key=b"a-new-key-after-rotation-32bytes")
    time.sleep(1.1)  # the api re-reads a key at most once a second
    response = http.put(upload_path(new_token), content=GGUF)
    assert response.status_code == 201, response.text
    problem(http.put(upload_path(old_token), content=GGUF), 401, "upload-token-invalid")


def test_the_object_must_wait_for_this_upload(cluster: Any, http: httpx.Client) -> None:
    publishing = cluster.model("busy", namespace=NAMESPACE, status={"phase": "Publishing"})
    body = problem(http.put(upload_path(token_for(publishing)), content=GGUF), 409, "wrong-phase")
    assert "Model team-a/busy is in phase Publishing, not WaitForUpload" in body["detail"]
    fresh = cluster.model("fresh", namespace=NAMESPACE)
    # No phase yet reads as Pending, as every reader of a Model reads it (ModelSeen.of).
    assert (
        "Model team-a/fresh is in phase Pending, not WaitForUpload"
        in problem(http.put(upload_path(token_for(fresh)), content=GGUF), 409, "wrong-phase")["detail"]
    )

    gone = waiting(cluster, "gone", namespace=NAMESPACE)
    cluster.delete_object(gone)
    body = problem(http.put(upload_path(token_for(gone)), content=GGUF), 410, "object-gone")
    assert "no longer exists" in body["detail"]

    old = waiting(cluster, "recreated", namespace=NAMESPACE)
    cluster.delete_object(old)
    new = waiting(cluster, "recreated", namespace=NAMESPACE)
    assert new.uid != old.uid
    body = problem(http.put(upload_path(token_for(old)), content=GGUF), 410, "object-gone")
    assert new.uid in body["detail"]


def test_one_upload_at_a_time_and_only_once(
    cluster: Any, api: Any, http: httpx.Client, store: DirectoryStore
) -> None:
    owner = waiting(cluster, "once", namespace=NAMESPACE)
    release = threading.Event()
    payload = GGUF + bytes(MIB)

    def slow() -> Iterator[bytes]:
        yield payload[:4096]
        assert release.wait(timeout=30)
        yield payload[4096:]

    results: list[httpx.Response] = []

    def first() -> None:
        with httpx.Client(base_url=api.url, timeout=60, headers=cluster.auth) as client:
            results.append(
                client.put(
                    upload_path(token_for(owner)),
                    content=slow(),
                    headers={"Content-Length": str(len(payload))},
                )
            )

    thread = threading.Thread(target=first)
    thread.start()
    try:
        # Reserved: the first upload holds its claim and is reading the body.
        eventually(
            lambda: reservations(cluster.ledger()), timeout=10, interval=0.02, message="the first upload"
        )
        body = problem(http.put(upload_path(token_for(owner)), content=GGUF), 409, "upload-conflict")
        assert "in progress" in body["detail"]
    finally:
        release.set()
        thread.join(timeout=30)
    assert results[0].status_code == 201, results[0].text
    again = problem(http.put(upload_path(token_for(owner)), content=GGUF), 409, "upload-conflict")
    assert "already received" in again["detail"]
    assert store.get_bytes(upload_payload_key(owner)) == payload


def test_a_client_that_goes_away_leaves_nothing_behind(
    cluster: Any, api: Any, store: DirectoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    owner = waiting(cluster, "dropped", namespace=NAMESPACE)
    total = 64 * MIB
    sent = GGUF + bytes(8 * MIB)
    host, port = api.server.host, api.server.port
    connection = socket.create_connection((host, port), timeout=30)
    try:
        head = (
            f"PUT {upload_path(token_for(owner))} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {total}\r\n"
            f"Authorization: {cluster.auth['Authorization']}\r\n\r\n"
        )
        connection.sendall(head.encode())
        connection.sendall(sent)
        # Reserved and streaming: the bytes are on their way into the store.
        eventually(
            lambda: (
                (api.runtime.metrics.registry.get_sample_value("d8_ai_models_api_upload_bytes_total") or 0)
                >= len(sent) // 2
            ),
            timeout=20,
            interval=0.02,
            message="the upload to stream",
        )
        assert [entry.owner for entry in reservations(cluster.ledger())] == [owner]
    finally:
        connection.close()

    def discarded() -> bool:
        return any(record.getMessage() == "failed upload discarded" for record in caplog.records)

    # The log line comes last, once the payload is gone and the reservation released.
    eventually(
        discarded,
        timeout=20,
        interval=0.05,
        message=lambda: f"the upload discarded (now {reservations(cluster.ledger())}, {stored_keys(store)})",
    )
    assert reservations(cluster.ledger()) == []
    assert stored_keys(store) == []


def test_upload_tokens_never_reach_the_logs(
    cluster: Any, http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    owner = waiting(cluster, "secret", namespace=NAMESPACE)
    tokens = [token_for(owner, expires_in=-5), token_for(owner, key=b"y" * 32), token_for(owner)]
    for token in tokens:
        http.put(upload_path(token), content=HTML)
        http.put(upload_path(token), content=GGUF)
    # The test's own HTTP client logs the URLs it requests; everything else is the api's side.
    logged = "\n".join(
        f"{record.getMessage()} {vars(record)}"
        for record in caplog.records
        if not record.name.startswith(("httpx", "httpcore"))
    )
    assert "Model team-a/secret" in logged  # uploads are logged, by owner
    for token in tokens:
        assert token.split(".")[1] not in logged


def test_uploads_stream_into_s3(cluster: Any, start_api: Any, s3_bucket: S3Bucket) -> None:
    store: ObjectStore = S3Store(
        s3_bucket.name, endpoint_url=s3_bucket.server.endpoint_url, session=s3_bucket.server.session()
    )
    api = start_api(store, capacity_limit_bytes=10 * GIB)
    owner = waiting(cluster, "in-s3", namespace=NAMESPACE)
    payload = safetensors_bytes({"w": ("F32", (1024, 1024))})  # 4 MiB
    with httpx.Client(base_url=api.url, timeout=60, headers=cluster.auth) as http:
        response = http.put(upload_path(token_for(owner)), content=payload)
    assert response.status_code == 201, response.text
    assert store.get_bytes(upload_payload_key(owner)) == payload
    assert (
        record_from_json(store.get_bytes(upload_record_key(owner))).sha256
        == hashlib.sha256(payload).hexdigest()
    )
