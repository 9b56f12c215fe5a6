"""Another ai-models cluster's serving API, as a publication from an AIModels catalog source reads
it: the manifest of one of its ClusterModels, and that artifact's files.

The controller reads the manifest to plan (digest, size, files and their sha256) and the publish Job
reads it again before copying, so a ClusterModel published again in between is noticed before the
first byte; then the Job streams the files. Requests go out as the catalog listing's do
(`adapters.serving.listing`): with the source's token and CA bundle, through the cluster's egress
proxy (httpx reads HTTP_PROXY / HTTPS_PROXY / NO_PROXY, which the chart gives the controller and the
publish Jobs), never to a cloud metadata address (the URL's host before each request, the address
reached right after connecting), never following a redirect (the token stays on its endpoint).

Answers are sorted as the materializer's client sorts them (`adapters.serving.client`): `Momentary`
(unreachable, 429, 5xx, cut off: a retry may help) or `Refused` (with the status: what a retry of the
same request does not change). Messages are our words only, never what the other cluster sent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ssl
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any, Final

import httpx2

from ai_models.adapters.hub.http import AddressRefused, EndpointPolicy, default_policy, peer_check
from ai_models.adapters.serving.client import Momentary, Refused, object_path
from ai_models.adapters.serving.listing import ssl_context
from ai_models.domain.artifacts.manifest import ArtifactManifest, ManifestFormatError, manifest_from_json
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.publication.request import DIGEST_PATTERN
from ai_models.names import ModelKind

CONNECT_TIMEOUT_SECONDS: Final = 10.0
# Between two pieces of an answer, not for the whole file.
READ_TIMEOUT_SECONDS: Final = 60.0
MAX_MANIFEST_BYTES: Final = 16 * 1024 * 1024
READ_BYTES: Final = 1024 * 1024
# What each refusal of the other cluster means here (cause and fix, never its own words).
REMOTE_REFUSALS: Final[Mapping[int, str]] = {
    401: "that cluster did not accept the token of the ModelCatalogSource (spec.aiModels.tokenSecretRef); "
    "put a token it accepts (a ServiceAccount token of that cluster) into the Secret under the key `token`",
    403: "the token's subject may not read the ClusterModel in that cluster; grant it read access to "
    "ClusterModels there (access level User)",
    404: "that cluster has no such ClusterModel (it was deleted there since it was indexed, or never "
    "existed); choose another entry of the catalog",
    409: "the ClusterModel is not Ready in that cluster; the publication waits until it is",
}
ENDPOINT_HINT: Final = (
    "point spec.aiModels.endpoint at the other cluster's public serving API on an ordinary address"
)


class RemoteManifestInvalid(Exception):
    """The other cluster answered with a manifest this cluster cannot use."""


def cluster_model(name: str) -> ModelKey:
    return ModelKey(ModelKind.CLUSTER_MODEL, "", name)


class RemoteServing:
    """The serving API of one other cluster with one token; connections kept alive between requests."""

    def __init__(
        self,
        *,
        endpoint: str,
        token: str,
        ca_bundle: str | None = None,
        policy: EndpointPolicy | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
        read_timeout: float = READ_TIMEOUT_SECONDS,
    ) -> None:
        """`Refused` (status 0) when the endpoint or the CA bundle cannot be used: a fix of the
        source, not a retry."""
        self.endpoint = endpoint.rstrip("/")
        self._policy = policy if policy is not None else default_policy()
        problem = self._policy.url_problem(self.endpoint)
        if problem is not None:
            raise Refused(
                f"{self.endpoint} was not contacted: the URL {problem}; {ENDPOINT_HINT}",
                status=0,
                retryable=False,
            )
        try:
            verify = ssl_context(ca_bundle)
        except ValueError as error:
            raise Refused(f"{error}; fix the bundle", status=0, retryable=False) from error
        self._headers = {"Authorization": f"Bearer {token}", "Accept-Encoding": "identity"}
        self._timeout = httpx2.Timeout(read_timeout, connect=connect_timeout)
        self._client = httpx2.Client(follow_redirects=False, timeout=None, verify=verify)

    def close(self) -> None:
        self._client.close()

    def manifest(self, name: str) -> ArtifactManifest:
        """The manifest of ClusterModel `name` there; `Refused`, `Momentary` or `RemoteManifestInvalid`."""
        what = f"the manifest of ClusterModel {name}"
        with self._get(f"{_object_path(name)}/manifest", what=what) as response:
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > MAX_MANIFEST_BYTES:
                raise RemoteManifestInvalid(f"{what} announces {declared} bytes, more than a manifest has")
            body = bytearray()
            for piece in _pieces(response, what):
                body += piece
                if len(body) > MAX_MANIFEST_BYTES:
                    raise RemoteManifestInvalid(f"{what} is larger than a manifest is")
        try:
            manifest = manifest_from_json(bytes(body))
        except ManifestFormatError as error:
            raise RemoteManifestInvalid(f"{what} cannot be read: {error}") from error
        if not DIGEST_PATTERN.match(manifest.digest):
            raise RemoteManifestInvalid(f"{what} names no sha256 digest")
        return manifest

    @contextlib.contextmanager
    def file(self, name: str, path: str) -> Iterator[tuple[int, _Body]]:
        """File `path` of ClusterModel `name`: its length (Content-Length) and its body to read."""
        what = f"file {path!r} of ClusterModel {name}"
        with self._get(f"{_object_path(name)}/files/{urllib.parse.quote(path)}", what=what) as response:
            declared = response.headers.get("Content-Length", "")
            if not declared.isdigit():
                raise Momentary(f"{what} came without a usable Content-Length")
            yield int(declared), _Body(response, what)

    @contextlib.contextmanager
    def _get(self, path: str, *, what: str) -> Iterator[httpx2.Response]:
        request = self._client.build_request(
            "GET", self.endpoint + path, headers=self._headers, timeout=self._timeout
        )
        request.extensions["trace"] = peer_check(self._policy)
        try:
            response = self._client.send(request, stream=True)
        except AddressRefused as refused:
            raise Refused(
                f"{self.endpoint} was not contacted: {refused}; {ENDPOINT_HINT}",
                status=0,
                retryable=False,
            ) from None
        except httpx2.HTTPError as error:
            raise _unreachable(error, what, self.endpoint) from error
        try:
            if response.status_code != 200:
                raise _refusal(response.status_code, what)
            yield response
        finally:
            response.close()


class _Body:
    """An answer's body as `put` reads it (`read(n)`); a connection broken off mid-way is `Momentary`."""

    def __init__(self, response: httpx2.Response, what: str) -> None:
        self._pieces = _pieces(response, what)
        self._pending = b""

    def read(self, size: int = -1, /) -> bytes:
        if not self._pending:
            self._pending = next(self._pieces, b"")
        cut = len(self._pending) if size < 0 else size
        piece, self._pending = self._pending[:cut], self._pending[cut:]
        return piece


def _pieces(response: httpx2.Response, what: str) -> Iterator[bytes]:
    try:
        yield from response.iter_raw(READ_BYTES)
    except httpx2.HTTPError as error:
        raise Momentary(f"{what} was cut off ({type(error).__name__})") from error


def _object_path(name: str) -> str:
    return object_path(cluster_model(name))


def _refusal(status: int, what: str) -> Exception:
    if status == 429 or status >= 500:
        return Momentary(f"the serving API answered {status} for {what}")
    meaning = REMOTE_REFUSALS.get(status, "the request was refused")
    return Refused(f"the serving API refused {what} with {status}: {meaning}", status=status)


def _unreachable(error: httpx2.HTTPError, what: str, endpoint: str) -> Exception:
    # The error's type only: its text may quote what the remote sent.
    cause = type(error).__name__
    if isinstance(error.__context__, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY" in str(error):
        return Refused(
            f"the serving API at {endpoint} presents a certificate this cluster does not trust ({cause}): "
            "put the CA that signed it into spec.aiModels.caBundle",
            status=0,
            retryable=False,
        )
    return Momentary(f"cannot read {what} from {endpoint} ({cause})")


@dataclasses.dataclass(frozen=True)
class RemoteCluster:
    """Where a publication reads from: spec.aiModels of the source and its token."""

    endpoint: str
    token: str = dataclasses.field(repr=False)
    ca_bundle: str | None = None  # PEM

    def serving(self, **options: Any) -> RemoteServing:
        return RemoteServing(endpoint=self.endpoint, token=self.token, ca_bundle=self.ca_bundle, **options)


__all__ = [
    "REMOTE_REFUSALS",
    "Momentary",
    "Refused",
    "RemoteCluster",
    "RemoteManifestInvalid",
    "RemoteServing",
    "cluster_model",
]
