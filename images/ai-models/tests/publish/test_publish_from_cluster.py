"""Publishing from another ai-models cluster: the ClusterModel's files copied from a serving API
over HTTP (a small stand-in that answers as the serving API does) into a directory store, every
sha256 checked against that cluster's manifest, the artifact ending with that cluster's digest."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import http.server
import socket
import ssl
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from publish.conftest import Kit

from ai_models.domain.artifacts.manifest import (
    ArtifactFile,
    ArtifactManifest,
    ArtifactSource,
    manifest_to_json,
)
from ai_models.domain.publication.request import AIModelsPublication, FileSpec
from ai_models.domain.storage.ledger import Owner
from ai_models.names import SERVING_API_PREFIX, ModelKind, ModelReason, SourceType
from ai_models.publish.main import EXIT_FAILED, EXIT_PUBLISHED
from fakes.model_files import safetensors_bytes
from support.forward_proxy import ForwardProxy
from support.scenarios import CertificatePair, generated_certificate

TOKEN = "other-cluster-token"
NAME = "shared-llama"
DIGEST = "sha256:" + hashlib.sha256(b"the other cluster's artifact").hexdigest()
FILES = {
    "config.json": b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}',
    "model.safetensors": safetensors_bytes({"w": ("BF16", (64, 64))}),
}
RESOLVED = {"format": "Safetensors", "architecture": "LlamaForCausalLM", "parameterCount": 4096}


@dataclasses.dataclass
class OtherCluster:
    """What the stand-in serves: one Ready ClusterModel, and the faults a test asks for."""

    url: str = ""
    digest: str = DIGEST
    files: dict[str, bytes] = dataclasses.field(default_factory=lambda: dict(FILES))
    listed: dict[str, bytes] = dataclasses.field(
        default_factory=lambda: dict(FILES)
    )  # what the manifest says
    status: int | None = None  # answer every request with this status instead
    requests: list[str] = dataclasses.field(default_factory=list)

    def manifest(self) -> bytes:
        owner = Owner(kind=ModelKind.CLUSTER_MODEL.value, namespace="", name=NAME, uid="uid-there")
        return manifest_to_json(
            ArtifactManifest(
                owner=owner,
                digest=self.digest,
                source=ArtifactSource(
                    type=SourceType.HUGGING_FACE, repository="acme/llama", revision="c0ffee"
                ),
                files=tuple(
                    ArtifactFile(path=path, size=len(data), sha256=hashlib.sha256(data).hexdigest())
                    for path, data in sorted(self.listed.items())
                ),
                resolved=RESOLVED,
                published_at="2026-01-02T03:04:05Z",
            )
        )


@contextlib.contextmanager
def serve(tls: CertificatePair | None = None) -> Iterator[OtherCluster]:
    served = OtherCluster()
    prefix = f"{SERVING_API_PREFIX}/clustermodels/{NAME}"

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            path = urllib.parse.unquote(self.path)
            served.requests.append(path)
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._answer(401, b'{"detail": "token not accepted"}')
            if served.status is not None:
                return self._answer(served.status, b'{"detail": "no"}')
            if path == f"{prefix}/manifest":
                return self._answer(200, served.manifest())
            file = path.removeprefix(f"{prefix}/files/")
            if path.startswith(f"{prefix}/files/") and file in served.files:
                return self._answer(200, served.files[file])
            return self._answer(404, b'{"detail": "not found"}')

        def _answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    scheme = "http"
    if tls is not None:
        scheme = "https"
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as name:
            directory = Path(name)
            (directory / "cert.pem").write_text(tls.cert_pem)
            (directory / "key.pem").write_text(tls.key_pem)
            context.load_cert_chain(directory / "cert.pem", directory / "key.pem")
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    served.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def other() -> Iterator[OtherCluster]:
    with serve() as served:
        yield served


def source(
    other: OtherCluster, *, url: str | None = None, ca_bundle: str | None = None
) -> AIModelsPublication:
    """What the controller plans from that cluster's manifest."""
    return AIModelsPublication(
        endpoint=url or other.url,
        ca_bundle=ca_bundle,
        cluster_model=NAME,
        files=tuple(
            FileSpec(path=path, size=len(data), lfsSha256=hashlib.sha256(data).hexdigest())
            for path, data in sorted(FILES.items())
        ),
    )


def run(
    kit: Kit, publication: AIModelsPublication, *, token: str | None = TOKEN
) -> tuple[int, dict[str, Any]]:
    job = kit._job(kit.owner, DIGEST, publication, token=token, report_progress=False, store_url=None)
    code = kit.run(job)
    return code, kit.outcome(job)


def test_the_copy_has_the_other_clusters_digest_files_and_facts(kit: Kit, other: OtherCluster) -> None:
    code, outcome = run(kit, source(other))

    assert code == EXIT_PUBLISHED, outcome
    published = kit.manifest(DIGEST)
    assert published.digest == DIGEST
    assert {item.path: item.sha256 for item in published.files} == {
        path: hashlib.sha256(data).hexdigest() for path, data in FILES.items()
    }
    for path, data in FILES.items():
        assert kit.file_bytes(DIGEST, path) == data
    assert published.source == ArtifactSource(
        type=SourceType.AI_MODELS, repository=NAME, revision="c0ffee", endpoint=other.url
    )
    assert published.resolved == RESOLVED
    # The manifest is read again before the files: the plan is checked against that cluster.
    assert other.requests[0].endswith("/manifest")


def test_a_file_whose_bytes_differ_from_the_manifest_is_artifact_damaged(
    kit: Kit, other: OtherCluster
) -> None:
    data = bytearray(FILES["model.safetensors"])
    data[-1] ^= 0xFF
    other.files["model.safetensors"] = bytes(data)

    code, outcome = run(kit, source(other))

    assert code == EXIT_FAILED
    assert outcome["reason"] == ModelReason.ARTIFACT_DAMAGED
    assert "model.safetensors" in outcome["message"]
    assert outcome["retryable"] is True
    assert not kit.has_manifest(DIGEST)
    assert kit.keys(DIGEST) == []


def test_a_clustermodel_published_again_since_the_plan_is_not_copied(kit: Kit, other: OtherCluster) -> None:
    other.digest = "sha256:" + "0" * 64

    code, outcome = run(kit, source(other))

    assert code == EXIT_FAILED
    assert outcome["reason"] == ModelReason.SOURCE_NOT_FOUND
    assert "published again there" in outcome["message"]
    assert [path for path in other.requests if "/files/" in path] == []


@pytest.mark.parametrize(
    "refusal",
    [
        (None, "wrong-token", ModelReason.PUBLICATION_FAILED, "did not accept the token"),
        (403, TOKEN, ModelReason.PUBLICATION_FAILED, "may not read the ClusterModel"),
        (404, TOKEN, ModelReason.SOURCE_NOT_FOUND, f"ClusterModel {NAME} of the cluster at"),
    ],
)
def test_a_refusal_of_the_other_cluster_ends_with_its_reason(
    kit: Kit, other: OtherCluster, refusal: tuple[int | None, str, ModelReason, str]
) -> None:
    status, token, reason, words = refusal
    other.status = status

    code, outcome = run(kit, source(other), token=token)

    assert code == EXIT_FAILED
    assert outcome["reason"] == reason
    assert words in outcome["message"]
    assert token not in outcome["message"]


@pytest.fixture
def nothing_listens() -> Iterator[int]:
    """A port bound and never listened on, held for the test: a connect to it is refused."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield int(bound.getsockname()[1])


def test_an_unreachable_cluster_is_a_retryable_publication_failure(
    kit: Kit, other: OtherCluster, nothing_listens: int
) -> None:
    code, outcome = run(kit, source(other, url=f"http://127.0.0.1:{nothing_listens}"))

    assert code == EXIT_FAILED
    assert outcome["reason"] == ModelReason.PUBLICATION_FAILED
    assert "unreachable" in outcome["message"]
    assert outcome["retryable"] is True


def test_an_https_cluster_is_read_with_the_sources_ca_bundle(kit: Kit) -> None:
    pair = generated_certificate(("127.0.0.1",))
    with serve(pair) as served:
        code, outcome = run(kit, source(served, ca_bundle=pair.ca_pem))

    assert code == EXIT_PUBLISHED, outcome
    assert kit.manifest(DIGEST).digest == DIGEST


def test_an_https_cluster_whose_ca_is_not_in_the_bundle_is_not_trusted(kit: Kit) -> None:
    with serve(generated_certificate(("127.0.0.1",))) as served:
        code, outcome = run(kit, source(served, ca_bundle=generated_certificate(("example.com",)).ca_pem))

    assert code == EXIT_FAILED
    assert outcome["reason"] == ModelReason.PUBLICATION_FAILED
    assert "spec.aiModels.caBundle" in outcome["message"]
    assert served.requests == []


def test_a_cloud_metadata_endpoint_is_never_contacted(kit: Kit, other: OtherCluster) -> None:
    code, outcome = run(kit, source(other, url="http://169.254.169.254"))

    assert code == EXIT_FAILED
    assert outcome["reason"] == ModelReason.PUBLICATION_FAILED
    assert "cloud metadata" in outcome["message"]


def test_the_other_cluster_is_reached_through_the_egress_proxy(
    kit: Kit, other: OtherCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = other.url.rsplit(":", 1)[1]
    # A name only the proxy resolves: the copy works through the proxy and nowhere else.
    with ForwardProxy(hosts={"ai-models.other.test": "127.0.0.1"}) as proxy:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            monkeypatch.setenv(name, proxy.url)
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        code, outcome = run(kit, source(other, url=f"http://ai-models.other.test:{port}"))

        assert code == EXIT_PUBLISHED, outcome
        assert proxy.targets() == {f"ai-models.other.test:{port}"}
    assert kit.manifest(DIGEST).digest == DIGEST


def test_a_link_local_endpoint_needs_the_module_setting(kit: Kit, other: OtherCluster) -> None:
    code, outcome = run(kit, source(other, url="http://169.254.10.10"))

    assert code == EXIT_FAILED
    assert outcome["reason"] == ModelReason.PUBLICATION_FAILED
    assert "sources.allowLinkLocalEndpoints" in outcome["message"]
