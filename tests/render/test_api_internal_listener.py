"""The api's internal TLS listener as rendered: present exactly when the internal TLS hook has
issued the api's certificate, and then wired end to end (Secret -> read-only mount -> process
settings -> container port -> Service port 443)."""

from __future__ import annotations

import base64
import dataclasses
import os
import ssl
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from ai_models.api.settings import ApiSettings
from support.render import RenderedChart
from support.scenarios import API_SERVICE_NAMES, scenario

NAMESPACE = "d8-ai-models"
API = "ai-models-api"
SECRET = "ai-models-api-tls"
WITH_CERT = "api-internal-tls"
INTERNAL_ENV = ("AI_MODELS_API_INTERNAL_PORT", "AI_MODELS_API_TLS_CERT_FILE", "AI_MODELS_API_TLS_KEY_FILE")


@cache
def rendered(name: str) -> RenderedChart:
    return scenario(name).render()


def api_pod(chart: RenderedChart) -> dict[str, Any]:
    template: dict[str, Any] = chart.get("Deployment", API, NAMESPACE)["spec"]["template"]
    return template


def api_container(chart: RenderedChart) -> dict[str, Any]:
    (main,) = [item for item in api_pod(chart)["spec"]["containers"] if item["name"] == "api"]
    found: dict[str, Any] = main
    return found


def env(chart: RenderedChart) -> dict[str, str]:
    return {item["name"]: item.get("value", "") for item in api_container(chart)["env"]}


def cert_values(name: str) -> dict[str, str]:
    values: dict[str, str] = scenario(name).values()["aiModels"]["internal"]["apiCert"]
    return values


@pytest.mark.parametrize("name", ["minimal", "https-custom-certificate"])
def test_without_the_certificate_there_is_no_internal_listener(name: str) -> None:
    chart = rendered(name)
    assert not cert_values(name).get("crt")
    assert [obj for obj in chart.of_kind("Secret") if obj["metadata"]["name"] == SECRET] == []
    assert [port["name"] for port in api_container(chart)["ports"]] == ["http"]
    assert not set(INTERNAL_ENV) & set(env(chart))
    assert "api-tls" not in {volume["name"] for volume in api_pod(chart)["spec"]["volumes"]}
    assert "https-internal" not in {
        port["name"] for port in chart.get("Service", API, NAMESPACE)["spec"]["ports"]
    }


def test_the_secret_holds_the_issued_certificate() -> None:
    secret = rendered(WITH_CERT).get("Secret", SECRET, NAMESPACE)
    values = cert_values(WITH_CERT)
    assert secret["type"] == "kubernetes.io/tls"
    decoded = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    assert decoded == {"tls.crt": values["crt"], "tls.key": values["key"], "ca.crt": values["ca"]}


def test_the_process_serves_the_mounted_certificate_on_https_internal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chart = rendered(WITH_CERT)
    main = api_container(chart)
    assert {"name": "https-internal", "containerPort": 9443, "protocol": "TCP"} in main["ports"]
    (mount,) = [item for item in main["volumeMounts"] if item["name"] == "api-tls"]
    assert mount["readOnly"] is True
    (volume,) = [item for item in api_pod(chart)["spec"]["volumes"] if item["name"] == "api-tls"]
    assert volume["secret"]["secretName"] == SECRET
    # What the kubelet would put into the mount, read by the process's own settings.
    secret = chart.get("Secret", SECRET, NAMESPACE)
    mounted = tmp_path / "mount"
    mounted.mkdir()
    for item in volume["secret"]["items"]:
        (mounted / item["path"]).write_bytes(base64.b64decode(secret["data"][item["key"]]))
    for key in [key for key in os.environ if key.startswith("AI_MODELS_")]:
        monkeypatch.delenv(key)
    for key, value in env(chart).items():
        if key in INTERNAL_ENV:
            monkeypatch.setenv(key, value.replace(mount["mountPath"], str(mounted)))
    settings = ApiSettings(namespace=NAMESPACE)
    assert settings.api_internal_port == 9443
    tls = settings.internal_tls()
    assert tls is not None
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(*tls)  # the key matches the certificate
    client = ssl.create_default_context(cadata=cert_values(WITH_CERT)["ca"])
    # A client trusting the module CA accepts it for every name the Service is reached by.
    for host in API_SERVICE_NAMES:
        handshake(server, client, host)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server, client, "ai-models-api.other-namespace.svc")


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str) -> None:
    """A TLS handshake between the two contexts in memory; raises what the client refuses."""
    pipes = [ssl.MemoryBIO() for _ in range(4)]
    accepting = server.wrap_bio(pipes[0], pipes[1], server_side=True)
    connecting = client.wrap_bio(pipes[2], pipes[3], server_hostname=host)
    done = {"server": False, "client": False}
    for _ in range(20):
        for side, tls, outgoing, incoming in (
            ("client", connecting, pipes[3], pipes[0]),
            ("server", accepting, pipes[1], pipes[2]),
        ):
            try:
                tls.do_handshake()
                done[side] = True
            except ssl.SSLWantReadError:
                pass
            incoming.write(outgoing.read())
        if all(done.values()):
            return
    raise AssertionError(f"the handshake for {host} did not complete")


def test_the_service_publishes_the_internal_listener_on_443() -> None:
    ports = {
        port["name"]: port for port in rendered(WITH_CERT).get("Service", API, NAMESPACE)["spec"]["ports"]
    }
    assert ports["https-internal"] == {
        "name": "https-internal",
        "port": 443,
        "targetPort": "https-internal",
        "protocol": "TCP",
    }


def test_pods_restart_when_the_certificate_changes() -> None:
    base = scenario(WITH_CERT)
    first = api_pod(rendered(WITH_CERT))["metadata"]["annotations"]["checksum/api-tls"]
    changed = dataclasses.replace(
        base, internal={"apiCert": {**cert_values(WITH_CERT), "crt": cert_values(WITH_CERT)["ca"]}}
    ).render()
    second = api_pod(changed)["metadata"]["annotations"]["checksum/api-tls"]
    assert first != second
    assert "annotations" not in api_pod(rendered("minimal"))["metadata"]
