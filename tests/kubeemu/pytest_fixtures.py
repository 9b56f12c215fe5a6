"""Pytest fixtures that run the emulator for any test suite.

Import them into a conftest.py::

    from kubeemu.pytest_fixtures import (  # noqa: F401
        kube_api_client, kube_emulator, kube_emulator_factory, kubectl)

- `kube_emulator_factory(crd_dirs=..., identities=..., bookmark_interval=..., tls=True)` starts an
  emulator (HTTPS on 127.0.0.1, ephemeral port) and returns a `RunningEmulator`; all are stopped at
  teardown. `RunningEmulator.apply` writes over the API (admission webhooks apply), `route_service`
  points a webhook's Service at a local port; `cluster.apply` is the in-process back door.
- `kube_emulator`: one running emulator with the repository's `crds/` loaded.
- `kube_api_client`: a superuser `kubernetes.client.ApiClient` for `kube_emulator`.
- `kubectl`: runs the venv's kubectl against `kube_emulator` (`kubectl("get", "widgets", "-A")`).

Nothing here plays a cluster controller: what runs a project's Jobs (or, later, its Deployments) lives
with that project's test bed, beside this package.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kubeemu.authn import Identity
from kubeemu.cluster import Cluster
from kubeemu.crds import load_crd_manifests
from kubeemu.kubeconfig import kubeconfig_document, write_kubeconfig
from kubeemu.request_metrics import METRIC as REQUEST_METRIC
from kubeemu.server import DEFAULT_BOOKMARK_INTERVAL, EmulatorServer

REPO_CRDS = Path(__file__).resolve().parents[2] / "crds"
KUBECTL = Path(sys.executable).parent / "kubectl"


@dataclass
class RunningEmulator:
    """A started emulator plus the client-side plumbing tests need."""

    server: EmulatorServer
    workdir: Path
    _clients: list[Any] = field(default_factory=list)
    _identities: dict[str, Identity] = field(default_factory=dict)

    @property
    def cluster(self) -> Cluster:
        return self.server.cluster

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def superuser(self) -> Identity:
        return self.cluster.superuser

    @property
    def ca_pem(self) -> str | None:
        """The CA clients must trust (None for a plain-HTTP emulator)."""
        return self.server.ca_pem

    def add_identity(self, identity: Identity) -> Identity:
        self.cluster.authn.add(identity)
        self._identities[identity.name] = identity
        return identity

    def route_service(self, namespace: str, name: str, port: int) -> None:
        """Admission webhook calls to Service `namespace/name` go to 127.0.0.1:port."""
        self.server.route_service(namespace, name, port)

    def api_client(self, identity: Identity | None = None) -> Any:
        client = self.server.api_client(identity)
        self._clients.append(client)
        return client

    def connection(self, *, timeout: float = 10) -> http.client.HTTPConnection:
        parts = urlsplit(self.url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 0
        if parts.scheme == "https":
            context = ssl.create_default_context(cafile=str(self.server.ca_file))
            return http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
        return http.client.HTTPConnection(host, port, timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        identity: Identity | None = None,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, http.client.HTTPMessage, Any]:
        """One raw HTTP request; returns (status, headers, decoded JSON body or text)."""
        sent = dict(headers or {})
        if token is None:
            token = (identity or self.superuser).token
        if token:
            sent["Authorization"] = f"Bearer {token}"
        payload = None
        if body is not None:
            payload = body if isinstance(body, (bytes, str)) else json.dumps(body)
            sent["Content-Type"] = content_type
        connection = self.connection()
        try:
            connection.request(method, path, body=payload, headers=sent)
            response = connection.getresponse()
            raw = response.read().decode()
        finally:
            connection.close()
        try:
            decoded: Any = json.loads(raw)
        except ValueError:
            decoded = raw
        return response.status, response.headers, decoded

    def request_counts(self) -> dict[tuple[str, str, str], int]:
        """The emulator's `apiserver_request_total` as read from its /metrics:
        (verb, resource, code) -> requests answered (this read not yet among them)."""
        status, _, text = self.request("GET", "/metrics")
        assert status == 200, text
        counts: dict[tuple[str, str, str], int] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == f"{REQUEST_METRIC}_total":
                    labels = sample.labels
                    counts[(labels["verb"], labels["resource"], labels["code"])] = int(sample.value)
        return counts

    def apply(self, manifest: dict[str, Any], *, identity: Identity | None = None) -> dict[str, Any]:
        """Create the object, or replace it if it exists, over the API: unlike the in-process
        `cluster.apply`, the write goes through authorization and mutating admission webhooks."""
        rtype = self.cluster.resource_for(manifest.get("apiVersion", ""), manifest.get("kind", ""))
        meta = manifest.get("metadata") or {}
        base = f"/api/{rtype.version}" if not rtype.group else f"/apis/{rtype.group}/{rtype.version}"
        if rtype.namespaced:
            base += f"/namespaces/{meta.get('namespace') or 'default'}"
        collection = f"{base}/{rtype.plural}"
        status, _, body = self.request("POST", collection, body=manifest, identity=identity)
        if status == 409 and isinstance(body, dict) and body.get("reason") == "AlreadyExists":
            item = f"{collection}/{meta['name']}"
            status, _, current = self.request("GET", item, identity=identity)
            if status == 200:
                replacement = json.loads(json.dumps(manifest))
                replacement.setdefault("metadata", {})["resourceVersion"] = current["metadata"][
                    "resourceVersion"
                ]
                status, _, body = self.request("PUT", item, body=replacement, identity=identity)
        if status not in (200, 201):
            raise AssertionError(f"apply of {rtype.kind} {meta.get('name')!r} failed ({status}): {body}")
        applied: dict[str, Any] = body
        return applied

    def kubeconfig(self, identity: Identity | None = None) -> Path:
        """A kubeconfig file whose only context authenticates as `identity` (default: superuser)."""
        who = identity or self.superuser
        path = self.workdir / f"kubeconfig-{abs(hash(who.token))}"
        if not path.exists():
            write_kubeconfig(
                path, kubeconfig_document(self.url, [("emulator", who)], ca_pem=self.server.ca_pem)
            )
        return path

    def kubectl(
        self,
        *args: str,
        identity: Identity | None = None,
        input: str | None = None,
        check: bool = True,
        timeout: float = 30,
    ) -> subprocess.CompletedProcess[str]:
        """Run the venv's kubectl against this emulator; raises on failure unless check=False."""
        command = [
            str(KUBECTL),
            "--kubeconfig",
            str(self.kubeconfig(identity)),
            "--cache-dir",
            str(self.workdir / "kubectl-cache"),
            *args,
        ]
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        result = subprocess.run(
            command, input=input, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self._clients.clear()
        self.server.stop()


def start_emulator(
    workdir: Path,
    *,
    crd_dirs: Iterable[Path] = (),
    crds: Iterable[dict[str, Any]] = (),
    identities: Sequence[Identity] = (),
    bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
    tls: bool = True,
    event_log_size: int = 2000,
) -> RunningEmulator:
    cluster = Cluster(identities=identities, event_log_size=event_log_size)
    for directory in crd_dirs:
        if directory.is_dir():
            cluster.load_crds(load_crd_manifests(directory))
    cluster.load_crds(crds)
    server = EmulatorServer(cluster, tls=tls, bookmark_interval=bookmark_interval).start()
    workdir.mkdir(parents=True, exist_ok=True)
    running = RunningEmulator(server=server, workdir=workdir)
    for identity in identities:
        running._identities[identity.name] = identity
    return running


EmulatorFactory = Callable[..., RunningEmulator]


def api_status(exc: Exception) -> dict[str, Any]:
    """The Status object a `kubernetes` client ApiException carries."""
    body = getattr(exc, "body", None)
    status: dict[str, Any] = json.loads(body or "{}")
    return status


@pytest.fixture
def kube_emulator_factory(tmp_path: Path) -> Iterator[EmulatorFactory]:
    started: list[RunningEmulator] = []

    def factory(**kwargs: Any) -> RunningEmulator:
        running = start_emulator(tmp_path / f"emulator-{len(started)}", **kwargs)
        started.append(running)
        return running

    yield factory
    for running in started:
        running.close()


@pytest.fixture
def kube_emulator(kube_emulator_factory: EmulatorFactory) -> RunningEmulator:
    """A running emulator with the repository's CRDs (crds/, without doc-* files) loaded."""
    return kube_emulator_factory(crd_dirs=[REPO_CRDS])


@pytest.fixture
def kube_api_client(kube_emulator: RunningEmulator) -> Any:
    return kube_emulator.api_client()


@pytest.fixture
def kubectl(kube_emulator: RunningEmulator) -> Callable[..., subprocess.CompletedProcess[str]]:
    return kube_emulator.kubectl
