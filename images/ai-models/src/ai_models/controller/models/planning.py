"""From `spec.source` to a publication plan: what to fetch, its digest and size, or why not.

Everything the publish Job needs is decided here, before any byte is written, so the reservation
covers the real size and the artifact's directory (its digest) is fixed: a Hugging Face revision
is resolved to a commit, the files are selected, and an upload is identified by the sha256 the
upload API recorded.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pydantic import ValidationError

from ai_models.adapters.hub.errors import (
    ProviderError,
    ProviderForbidden,
    ProviderNotFound,
    ProviderUnauthorized,
)
from ai_models.adapters.kube.catalog_sources import CatalogSourceObjects
from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.models import ModelObjects
from ai_models.adapters.kube.secrets import Secrets
from ai_models.adapters.kube.source_tokens import TokenSecretMissing, source_token
from ai_models.adapters.objectstore import ObjectNotFound, ObjectStore, ObjectStoreError
from ai_models.adapters.serving import remote as other_cluster
from ai_models.adapters.serving.remote import RemoteCluster
from ai_models.catalog.reading import ManifestInvalid, iter_records, read_manifest
from ai_models.domain.artifacts.digest import SourceFile, repository_digest, upload_digest
from ai_models.domain.artifacts.layout import upload_record_key
from ai_models.domain.artifacts.manifest import ArtifactManifest
from ai_models.domain.artifacts.sizing import chosen_files, reserved_bytes
from ai_models.domain.artifacts.upload_record import UploadRecord, UploadRecordError, record_from_json
from ai_models.domain.catalog.outcomes import wrong_opt_in
from ai_models.domain.models.plan import AwaitingUpload, Deferred, Outcome, Plan, Refused
from ai_models.domain.models.source import (
    CatalogSource,
    HuggingFaceSource,
    InvalidSource,
    ParsedSource,
    UploadSource,
    token_from_secret_data,
)
from ai_models.domain.publication.request import (
    AIModelsPublication,
    FileSpec,
    HuggingFacePublication,
    UploadPublication,
)
from ai_models.domain.secret_reads import read_refused
from ai_models.domain.storage.ledger import Owner
from ai_models.names import (
    CATALOG_SYNC_ANNOTATION,
    CATALOG_SYNC_ENABLED,
    CatalogProvider,
    ModelReason,
    SourceType,
)

__all__ = [
    "AwaitingUpload",
    "Deferred",
    "Outcome",
    "Plan",
    "Planner",
    "Refused",
    "Snapshot",
    "SnapshotReader",
]

log = logging.getLogger(__name__)
PROVIDER_RETRY_SECONDS = 60.0
AUTH_SECRET_FIELD = "spec.source.authSecretRef"


class Snapshot(Protocol):
    """What the controller needs from a repository listing at one revision."""

    @property
    def sha(self) -> str: ...

    @property
    def files(self) -> Sequence[SourceFile]: ...


SnapshotReader = Callable[[str, str | None, str, str], Snapshot]  # endpoint, token, repository, revision
RemoteManifestReader = Callable[[RemoteCluster, str], ArtifactManifest]  # cluster, ClusterModel name
# How soon a publication from another cluster looks again when the ClusterModel there is not Ready.
REMOTE_NOT_READY_RETRY_SECONDS = 30.0


def remote_manifest(cluster: RemoteCluster, name: str) -> ArtifactManifest:
    """The manifest of ClusterModel `name` in `cluster`, read over one short-lived connection
    (shorter timeouts than a publish Job's: the controller plans in a worker thread)."""
    serving = cluster.serving(connect_timeout=5.0, read_timeout=30.0)
    try:
        return serving.manifest(name)
    finally:
        serving.close()


@dataclasses.dataclass
class Planner:
    objects: ModelObjects
    api_client: Any
    store: ObjectStore
    snapshot: SnapshotReader
    hf_endpoint: str
    module_namespace: str
    remote: RemoteManifestReader = remote_manifest

    def plan(self, owner: Owner, source: ParsedSource) -> Outcome:
        if isinstance(source, InvalidSource):
            return Refused(ModelReason.UNSUPPORTED_SOURCE, source.message)
        if isinstance(source, UploadSource):
            return self._upload(owner)
        if isinstance(source, CatalogSource):
            return self._catalog(source)
        return self._hugging_face(source)

    # ----- upload ---------------------------------------------------------------------------

    def upload_record(self, owner: Owner) -> UploadRecord | None:
        try:
            return record_from_json(self.store.get_bytes(upload_record_key(owner)))
        except ObjectNotFound:
            return None
        except UploadRecordError as error:
            log.warning(
                "upload record unreadable; waiting for a new upload",
                extra={"owner": owner.name, "error": str(error)},
            )
            return None

    def _upload(self, owner: Owner) -> Outcome:
        try:
            record = self.upload_record(owner)
        except ObjectStoreError as error:
            return Deferred(f"cannot read the upload from the object store: {error}", 10.0)
        if record is None:
            return AwaitingUpload()
        return Plan(
            resolved_type=SourceType.UPLOAD,
            revision=None,
            digest=upload_digest(record.sha256),
            size_bytes=record.size_bytes,
            source=UploadPublication(),
        )

    # ----- Hugging Face -----------------------------------------------------------------------

    def _hugging_face(self, source: HuggingFaceSource) -> Outcome:
        token: str | None = None
        if source.secret_name is not None and source.secret_namespace is not None:
            try:
                secret = Secrets(self.api_client).read(source.secret_namespace, source.secret_name)
            except KubeError as error:
                if not error.forbidden:
                    raise
                # No cluster-wide read (D160): the namespace's admin grants this one Secret. A Failed
                # Model re-reads its Secret's version often, so the grant is acted on within seconds.
                return Refused(
                    ModelReason.PUBLICATION_FAILED,
                    read_refused(source.secret_namespace, source.secret_name, field=AUTH_SECRET_FIELD),
                )
            data = {key: secret.text(key) or "" for key in secret.values} if secret is not None else None
            where = f"Secret {source.secret_namespace}/{source.secret_name} ({AUTH_SECRET_FIELD})"
            if data is None:
                return Refused(
                    ModelReason.PUBLICATION_FAILED, f"{where} does not exist; create it with the Hub token"
                )
            token = token_from_secret_data(data)
            if token is None:
                return Refused(
                    ModelReason.PUBLICATION_FAILED,
                    f"{where} has none of the keys token, HF_TOKEN or HUGGING_FACE_HUB_TOKEN; "
                    "put the Hub token there",
                )
        return self._repository(
            endpoint=self.hf_endpoint,
            token=token,
            repository=source.repository,
            revision=source.revision,
            resolved_type=SourceType.HUGGING_FACE,
            token_hint="set spec.source.authSecretRef to a Secret with a token that can read it",
        )

    def _repository(
        self,
        *,
        endpoint: str,
        token: str | None,
        repository: str,
        revision: str,
        resolved_type: SourceType,
        token_hint: str,
    ) -> Outcome:
        where = f"{repository} at revision {revision} on {endpoint}"
        try:
            snapshot = self.snapshot(endpoint, token, repository, revision)
        except ProviderNotFound as error:
            return Refused(ModelReason.SOURCE_NOT_FOUND, f"{where} was not found: {error}")
        except (ProviderUnauthorized, ProviderForbidden) as error:
            if token is None:
                return Refused(
                    ModelReason.SOURCE_NOT_FOUND,
                    f"{where} does not exist or is private or gated ({error}); "
                    f"if it is private, {token_hint}",
                )
            return Refused(ModelReason.PUBLICATION_FAILED, f"the token cannot read {where}: {error}")
        except ProviderError as error:
            return Deferred(f"cannot list {where}: {error}; retrying", PROVIDER_RETRY_SECONDS)
        # The catalog sizes its entries with the same two functions (D131).
        selection, chosen = chosen_files(snapshot.files)
        if not selection.accepted:
            return Refused(ModelReason.UNSUPPORTED_SOURCE, f"{where}: {selection.refusal}")
        try:
            files = tuple(
                FileSpec(path=item.path, size=item.size, lfsSha256=item.lfs_sha256) for item in chosen
            )
        except ValidationError:
            # The listing's own words stay out of the status: a hostile endpoint chose them.
            return Refused(
                ModelReason.UNSUPPORTED_SOURCE,
                f"{where} lists a selected file whose path or checksum cannot be published",
            )
        publication = HuggingFacePublication(
            repository=repository, revision=snapshot.sha, files=files, endpoint=endpoint
        )
        return Plan(
            resolved_type=resolved_type,
            revision=snapshot.sha,
            digest=repository_digest(repository, snapshot.sha, chosen),
            size_bytes=reserved_bytes(chosen),
            source=publication,
            token=token,
        )

    # ----- catalog ----------------------------------------------------------------------------

    def _catalog(self, source: CatalogSource) -> Outcome:
        name = source.source_name
        catalog_source = CatalogSourceObjects(self.api_client).get(name)
        if catalog_source is None:
            return Refused(
                ModelReason.CATALOG_ENTRY_NOT_FOUND,
                f"ModelCatalogSource {name!r} does not exist; check spec.source.catalog.sourceName",
            )
        if (catalog_source.get("spec") or {}).get("provider") == CatalogProvider.AI_MODELS:
            return self._other_cluster(source, catalog_source)
        try:
            manifest = read_manifest(self.store, name)
            record = None
            if manifest is not None:
                record = next(
                    (item for item in iter_records(self.store, manifest) if item.id == source.entry_name),
                    None,
                )
        except (ObjectStoreError, ManifestInvalid) as error:
            return Deferred(f"cannot read the catalog of ModelCatalogSource {name!r}: {error}", 30.0)
        if manifest is None:
            return Refused(
                ModelReason.CATALOG_ENTRY_NOT_FOUND,
                f"ModelCatalogSource {name!r} has not served a catalog yet; it needs the annotation "
                f"{CATALOG_SYNC_ANNOTATION}={CATALOG_SYNC_ENABLED} and a completed indexing pass",
            )
        if record is None:
            return Refused(
                ModelReason.CATALOG_ENTRY_NOT_FOUND,
                f"ModelCatalogSource {name!r} has no entry {source.entry_name!r} in generation "
                f"{manifest.generation}; search the catalog for the exact id",
            )
        huggingface = (catalog_source.get("spec") or {}).get("huggingFace") or {}
        try:
            token = source_token(self.api_client, self.module_namespace, catalog_source)
        except TokenSecretMissing as error:
            return Refused(ModelReason.PUBLICATION_FAILED, f"ModelCatalogSource {name!r}: {error}")
        return self._repository(
            endpoint=huggingface.get("endpoint") or self.hf_endpoint,
            token=token,
            repository=record.id,
            revision=record.metadata.sha or "main",
            resolved_type=SourceType.CATALOG,
            token_hint=f"set spec.huggingFace.tokenSecretRef on ModelCatalogSource {name!r}",
        )

    # ----- another ai-models cluster ----------------------------------------------------------

    def _other_cluster(self, source: CatalogSource, catalog_source: dict[str, Any]) -> Outcome:
        """Plan the copy of the ClusterModel the entry names from the cluster the source reads.

        The other cluster's manifest is the authority (not the catalog's record of it, which may be
        a day old): digest, size and files come from it, so the copy has the same digest. The
        source must have opted in, as for any call to its provider.
        """
        name, entry = source.source_name, source.entry_name
        annotations = (catalog_source.get("metadata") or {}).get("annotations") or {}
        opt_in = annotations.get(CATALOG_SYNC_ANNOTATION)
        if opt_in != CATALOG_SYNC_ENABLED:
            problem = (
                f"it needs the annotation {CATALOG_SYNC_ANNOTATION}={CATALOG_SYNC_ENABLED}"
                if opt_in is None
                else wrong_opt_in(str(opt_in))
            )
            return Refused(
                ModelReason.CATALOG_ENTRY_NOT_FOUND,
                f"ModelCatalogSource {name!r} does not call its provider: {problem}",
            )
        settings = (catalog_source.get("spec") or {}).get("aiModels") or {}
        endpoint = str(settings.get("endpoint") or "")
        where = f"ClusterModel {entry} of the cluster at {endpoint} (ModelCatalogSource {name!r})"
        try:
            token = source_token(self.api_client, self.module_namespace, catalog_source)
        except TokenSecretMissing as error:
            return Refused(ModelReason.PUBLICATION_FAILED, f"ModelCatalogSource {name!r}: {error}")
        if token is None:
            return Refused(
                ModelReason.PUBLICATION_FAILED,
                f"ModelCatalogSource {name!r} has no spec.aiModels.tokenSecretRef: the serving API of the "
                "other cluster reads nothing without a token it accepts",
            )
        cluster = RemoteCluster(endpoint=endpoint, token=token, ca_bundle=settings.get("caBundle") or None)
        try:
            manifest = self.remote(cluster, entry)
        except other_cluster.Refused as error:
            if error.status == 404:
                return Refused(ModelReason.SOURCE_NOT_FOUND, f"{where} is gone: {error}")
            if error.status == 409:
                return Deferred(f"{where}: {error}", REMOTE_NOT_READY_RETRY_SECONDS)
            return Refused(ModelReason.PUBLICATION_FAILED, f"{where} cannot be read: {error}")
        except other_cluster.Momentary as error:
            return Refused(
                ModelReason.PUBLICATION_FAILED,
                f"{where} cannot be read, the cluster is unreachable: {error}; the controller tries again",
            )
        except other_cluster.RemoteManifestInvalid as error:
            return Refused(ModelReason.PUBLICATION_FAILED, f"{where}: {error}")
        try:
            files = tuple(
                FileSpec(path=item.path, size=item.size, lfsSha256=item.sha256) for item in manifest.files
            )
        except ValidationError:
            # Its own words stay out of the status: the other cluster chose them.
            return Refused(
                ModelReason.UNSUPPORTED_SOURCE,
                f"{where} lists a file whose path or checksum cannot be published here",
            )
        if not files:
            return Refused(ModelReason.UNSUPPORTED_SOURCE, f"{where} has an artifact without files")
        return Plan(
            resolved_type=SourceType.CATALOG,
            revision=manifest.source.revision,
            digest=manifest.digest,
            size_bytes=manifest.size_bytes,
            source=AIModelsPublication(
                endpoint=endpoint, cluster_model=entry, files=files, ca_bundle=cluster.ca_bundle
            ),
            token=token,
        )
