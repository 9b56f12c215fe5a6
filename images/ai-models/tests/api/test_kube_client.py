"""The shared Kubernetes client: kubeconfig or pod ServiceAccount, bounded retries, clear errors."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import urllib3
from kubernetes import client
from kubernetes.config import incluster_config

from ai_models.adapters.kube import ClientOptions, KubeConfigError, new_api_client
from ai_models.adapters.kube import client as kube_client
from kubeemu.authn import Identity
from kubeemu.pytest_fixtures import RunningEmulator
from testbed.access_levels import grant_access_level


def test_a_kubeconfig_client_reaches_the_cluster_with_bounded_retries(kube_emulator: RunningEmulator) -> None:
    api = new_api_client(ClientOptions(retries=2), kubeconfig=str(kube_emulator.kubeconfig()))
    try:
        names = [ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items]
        assert "default" in names
        retries = api.configuration.retries
        assert isinstance(retries, urllib3.Retry)
        assert retries.total == 2
        assert "POST" not in (retries.allowed_methods or ())
    finally:
        api.close()


def test_the_pod_service_account_is_used_inside_a_pod(
    kube_emulator: RunningEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = kube_emulator.add_identity(Identity.service_account("default", "reader"))
    grant_access_level(kube_emulator.cluster, account, "User")
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text(account.token)
    ca.write_text(kube_emulator.server.ca_pem or "")
    # Where a pod has them: /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}.
    monkeypatch.setattr(kube_client, "IN_CLUSTER_TOKEN_FILE", token)
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    server = urlsplit(kube_emulator.url)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", server.hostname or "")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")  # inside a pod a stray KUBECONFIG is not used
    api = new_api_client()
    try:
        review: Any = client.AuthenticationV1Api(api).create_self_subject_review(
            client.V1SelfSubjectReview(api_version="authentication.k8s.io/v1", kind="SelfSubjectReview")
        )
        assert review.status.user_info.username == "system:serviceaccount:default:reader"
    finally:
        api.close()


def test_a_missing_kubeconfig_names_itself_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    with pytest.raises(KubeConfigError) as error:
        new_api_client()
    assert "/nonexistent/kubeconfig" in str(error.value)
    assert "set KUBECONFIG" in str(error.value)


def test_an_unreachable_api_server_fails_fast(kube_emulator: RunningEmulator) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    kubeconfig = kube_emulator.kubeconfig()
    text = kubeconfig.read_text().replace(kube_emulator.url, f"https://127.0.0.1:{closed_port}")
    moved = kubeconfig.with_name("kubeconfig-closed")
    moved.write_text(text)
    options = ClientOptions(retries=2, backoff_seconds=0.1)
    api = new_api_client(options, kubeconfig=str(moved))
    try:
        started = time.monotonic()
        with pytest.raises(urllib3.exceptions.MaxRetryError):
            client.CoreV1Api(api).list_namespace(_request_timeout=options.request_timeout)
        assert time.monotonic() - started < 3
    finally:
        api.close()
