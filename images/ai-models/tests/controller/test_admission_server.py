"""The admission webhook's HTTPS listener: AdmissionReview in and out, bounded bodies and clients."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from ai_models.controller.runtime.admission_review import Admission
from ai_models.controller.runtime.webhook import HANDLER_FAILED, WebhookServer
from kubeemu.tlscert import self_signed

PATH = "/mutate-workloads"
WAIT = 10.0


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed().write(tmp_path_factory.mktemp("webhook-tls"))


def review(uid: str = "u-1", **request: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": uid, "kind": {"group": "apps", "version": "v1", "kind": "Deployment"}, **request},
    }


class Webhook:
    def __init__(self, server: WebhookServer, cert: Path) -> None:
        self.server = server
        self.context = ssl.create_default_context(cafile=str(cert))

    def post(
        self, body: bytes, *, path: str = PATH, headers: Mapping[str, str] | None = None
    ) -> tuple[int, Any]:
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.server.port, context=self.context, timeout=WAIT
        )
        try:
            connection.request(
                "POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})}
            )
            response = connection.getresponse()
            return response.status, json.loads(response.read() or b"null")
        finally:
            connection.close()


@pytest.fixture
def start(certificate: tuple[Path, Path]) -> Iterator[Any]:
    started: list[WebhookServer] = []

    def run(admit: Any, **kwargs: Any) -> Webhook:
        cert, key = certificate
        server = WebhookServer(
            admit=admit, address="127.0.0.1", port=0, cert_file=cert, key_file=key, path=PATH, **kwargs
        ).start()
        started.append(server)
        return Webhook(server, cert)

    yield run
    for server in started:
        server.stop()


def test_a_review_is_answered_with_its_uid_and_the_patch_base64_encoded(start: Any) -> None:
    seen: list[Mapping[str, Any]] = []

    def admit(request: Mapping[str, Any]) -> Admission:
        seen.append(request)
        return Admission(patch=[{"op": "add", "path": "/metadata/labels/x", "value": "y"}])

    webhook = start(admit)
    status, document = webhook.post(json.dumps(review("abc", name="web", namespace="team-a")).encode())
    assert status == 200
    assert document["apiVersion"] == "admission.k8s.io/v1"
    response = document["response"]
    assert (response["uid"], response["allowed"], response["patchType"]) == ("abc", True, "JSONPatch")
    assert json.loads(base64.b64decode(response["patch"])) == [
        {"op": "add", "path": "/metadata/labels/x", "value": "y"}
    ]
    assert seen[0]["name"] == "web"


def test_a_refusal_carries_its_message_and_code(start: Any) -> None:
    webhook = start(lambda request: Admission.refuse("ai.deckhouse.io/model: '' is empty; name a Model"))
    _, document = webhook.post(json.dumps(review()).encode())
    response = document["response"]
    assert response["allowed"] is False
    assert "patch" not in response
    assert response["status"] == {
        "code": 403,
        "message": "ai.deckhouse.io/model: '' is empty; name a Model",
        "reason": "Forbidden",
    }


def test_a_handler_that_fails_refuses_without_a_traceback(start: Any) -> None:
    def admit(request: Mapping[str, Any]) -> Admission:
        raise RuntimeError("secret internals")

    webhook = start(admit)
    _, document = webhook.post(json.dumps(review()).encode())
    response = document["response"]
    assert response["allowed"] is False
    assert response["status"]["message"] == HANDLER_FAILED
    assert "secret internals" not in json.dumps(document)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"not json", "not JSON"),
        (b"[]", "not a JSON object"),
        (json.dumps({"apiVersion": "v1", "kind": "Pod"}).encode(), "expected kind AdmissionReview"),
        (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(), "uid"),
    ],
)
def test_a_body_that_is_not_a_review_is_refused_before_the_handler(
    start: Any, body: bytes, expected: str
) -> None:
    called: list[Any] = []

    def admit(request: Mapping[str, Any]) -> Admission:
        called.append(request)
        return Admission()

    webhook = start(admit)
    status, document = webhook.post(body)
    assert status == 400
    assert expected in document["message"]
    assert called == []


def test_an_oversized_review_is_refused_before_it_is_read(start: Any) -> None:
    webhook = start(lambda request: Admission(), max_body_bytes=1024)
    status, document = webhook.post(b"x" * 2048)
    assert status == 413
    assert "at most 1024 bytes" in document["message"]


def test_other_paths_are_not_found(start: Any) -> None:
    webhook = start(lambda request: Admission())
    status, _ = webhook.post(json.dumps(review()).encode(), path="/other")
    assert status == 404


def test_a_client_that_never_finishes_its_handshake_does_not_hold_the_others(start: Any) -> None:
    webhook = start(lambda request: Admission(), max_handlers=2, timeout_seconds=1.0)
    idle = [socket.create_connection(("127.0.0.1", webhook.server.port)) for _ in range(2)]
    try:
        # Both handlers wait for a handshake that never comes, until their timeout ends them.
        result: list[int] = []

        def call() -> None:
            for _ in range(40):
                try:
                    result.append(webhook.post(json.dumps(review()).encode())[0])
                    return
                except (ConnectionError, ssl.SSLError, http.client.HTTPException, OSError):
                    threading.Event().wait(0.1)

        caller = threading.Thread(target=call)
        caller.start()
        caller.join(WAIT)
        assert result == [200]
    finally:
        for connection in idle:
            connection.close()
