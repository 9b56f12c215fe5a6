"""Another ai-models cluster's serving API, as an AIModels catalog source reads it for a publication:
the manifest of one of its ClusterModels, and what each refusal means for the reader.

The controller reads the manifest to plan (digest, size, files and their sha256) and the publish Job
reads it again before copying, so a ClusterModel published again in between is noticed before the
first byte. Both build their client here, with the source's token and CA bundle.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Mapping
from typing import Final

from ai_models.adapters.serving.client import Momentary, Refused, ServingClient
from ai_models.domain.artifacts.manifest import ArtifactManifest, ManifestFormatError, manifest_from_json
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.publication.request import DIGEST_PATTERN
from ai_models.names import ModelKind

# Shorter than a materializer's: the controller plans in a worker thread.
PLANNING_CONNECT_TIMEOUT_SECONDS: Final = 5.0
PLANNING_READ_TIMEOUT_SECONDS: Final = 30.0
# What each refusal of the other cluster means for this one (cause and fix, never its own words).
REMOTE_REFUSALS: Final[Mapping[int, str]] = {
    401: "that cluster did not accept the token of the ModelCatalogSource (spec.aiModels.tokenSecretRef); "
    "put a token it accepts (a ServiceAccount token of that cluster) into the Secret under the key `token`",
    403: "the token's subject may not read the ClusterModel in that cluster; grant it read access to "
    "ClusterModels there (access level User)",
    404: "that cluster has no such ClusterModel (it was deleted there since it was indexed, or never "
    "existed); choose another entry of the catalog",
    409: "the ClusterModel is not Ready in that cluster; the publication waits until it is",
}
CA_HINT: Final = "spec.aiModels.caBundle of the ModelCatalogSource must hold the CA that signed it"


class RemoteManifestInvalid(Exception):
    """The other cluster answered with a manifest this cluster cannot use."""


@dataclasses.dataclass(frozen=True)
class RemoteCluster:
    endpoint: str  # spec.aiModels.endpoint
    token: str = dataclasses.field(repr=False)
    ca_bundle: str | None = None  # PEM

    def client(
        self,
        *,
        reader: str,
        connect_timeout: float = PLANNING_CONNECT_TIMEOUT_SECONDS,
        read_timeout: float = PLANNING_READ_TIMEOUT_SECONDS,
    ) -> ServingClient:
        """A client of the cluster's serving API; `Refused` (status 0) when the endpoint is not an
        http(s) URL or the CA bundle is not PEM: a fix of the source, not a retry."""
        try:
            return ServingClient(
                base_url=self.endpoint,
                token=self.token,
                ca_data=self.ca_bundle,
                ca_hint=CA_HINT,
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                reader=reader,
                refusals=REMOTE_REFUSALS,
            )
        except ValueError as error:
            raise Refused(f"spec.aiModels.endpoint: {error}", status=0, retryable=False) from error
        except ssl.SSLError as error:
            raise Refused(
                f"spec.aiModels.caBundle is not a PEM bundle of certificates ({error.reason or error})",
                status=0,
                retryable=False,
            ) from error


def cluster_model(name: str) -> ModelKey:
    return ModelKey(ModelKind.CLUSTER_MODEL, "", name)


def read_manifest(client: ServingClient, name: str) -> ArtifactManifest:
    """The manifest of ClusterModel `name` there; `Refused`, `Momentary` or `RemoteManifestInvalid`."""
    body = client.manifest(cluster_model(name))
    try:
        manifest = manifest_from_json(body)
    except ManifestFormatError as error:
        raise RemoteManifestInvalid(f"the manifest of ClusterModel {name} cannot be read: {error}") from error
    if not DIGEST_PATTERN.match(manifest.digest):
        raise RemoteManifestInvalid(f"the manifest of ClusterModel {name} names no sha256 digest")
    return manifest


__all__ = [
    "REMOTE_REFUSALS",
    "Momentary",
    "Refused",
    "RemoteCluster",
    "RemoteManifestInvalid",
    "cluster_model",
    "read_manifest",
]
