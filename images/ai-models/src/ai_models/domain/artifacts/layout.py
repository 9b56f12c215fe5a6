"""Object-store keys of artifacts and staged uploads.

    artifacts/<scope>/<namespace|_cluster>/<name>/<digest hex>/manifest.json
    artifacts/<scope>/<namespace|_cluster>/<name>/<digest hex>/files/<path in the model>
    uploads/<scope>/<namespace|_cluster>/<name>/<uid>/payload       the uploaded bytes as received
    uploads/<scope>/<namespace|_cluster>/<name>/<uid>/upload.json   written once the payload is complete
    uploads/<scope>/<namespace|_cluster>/<name>/<uid>/claim.json    the upload in progress (create-if-absent)
    uploads/<scope>/<namespace|_cluster>/<name>/<uid>/takeover-<claim id>   who replaces a stale claim

Model files live under `files/` so a repository file named `manifest.json` can never replace the
manifest. Uploads are keyed by the object's UID: a Model deleted and re-created under the same
name never sees the old one's upload.
"""

from __future__ import annotations

import dataclasses
import re

from ai_models.domain.storage.ledger import Owner, Scope
from ai_models.names import ModelKind

ARTIFACTS_ROOT = "artifacts/"
UPLOADS_ROOT = "uploads/"
MANIFEST_NAME = "manifest.json"
FILES_DIR = "files/"
UPLOAD_PAYLOAD = "payload"
UPLOAD_RECORD = "upload.json"
UPLOAD_CLAIM = "claim.json"
UPLOAD_TAKEOVER_PREFIX = "takeover-"
CLUSTER_NAMESPACE_SEGMENT = "_cluster"

_SCOPE_SEGMENTS = {Scope.NAMESPACED: "namespaced", Scope.CLUSTER: "cluster"}
_SEGMENT_SCOPES = {segment: scope for scope, segment in _SCOPE_SEGMENTS.items()}
_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")  # used with fullmatch: `$` would accept a trailing "\n"


def scope_of(kind: str) -> Scope:
    return Scope.CLUSTER if kind == ModelKind.CLUSTER_MODEL else Scope.NAMESPACED


def _owner_segments(kind: str, namespace: str, name: str) -> str:
    scope = scope_of(kind)
    where = CLUSTER_NAMESPACE_SEGMENT if scope is Scope.CLUSTER else namespace
    if not where or not name:
        raise ValueError(f"{kind} needs a name{' and a namespace' if scope is Scope.NAMESPACED else ''}")
    return f"{_SCOPE_SEGMENTS[scope]}/{where}/{name}/"


def owner_prefix(owner: Owner) -> str:
    """Every artifact of one object name: `artifacts/namespaced/<ns>/<name>/`."""
    return ARTIFACTS_ROOT + _owner_segments(owner.kind, owner.namespace, owner.name)


def is_artifact_digest(value: str) -> bool:
    """Whether `value` is an artifact digest, `sha256:<64 lowercase hex>`."""
    return _DIGEST.fullmatch(value) is not None


def digest_hex(digest: str) -> str:
    match = _DIGEST.fullmatch(digest)
    if not match:
        raise ValueError(f"{digest!r} is not a digest of the form sha256:<64 hex digits>")
    return match.group(1)


def artifact_prefix(owner: Owner, digest: str) -> str:
    return f"{owner_prefix(owner)}{digest_hex(digest)}/"


def manifest_key(owner: Owner, digest: str) -> str:
    return artifact_prefix(owner, digest) + MANIFEST_NAME


def file_key(owner: Owner, digest: str, path: str) -> str:
    return artifact_prefix(owner, digest) + FILES_DIR + path


def upload_prefix(owner: Owner) -> str:
    return f"{UPLOADS_ROOT}{_owner_segments(owner.kind, owner.namespace, owner.name)}{owner.uid}/"


def upload_payload_key(owner: Owner) -> str:
    return upload_prefix(owner) + UPLOAD_PAYLOAD


def upload_record_key(owner: Owner) -> str:
    return upload_prefix(owner) + UPLOAD_RECORD


@dataclasses.dataclass(frozen=True)
class ArtifactLocation:
    """Which artifact directory an object key belongs to (the inventory pass groups by this)."""

    scope: Scope
    namespace: str  # "" for ClusterModels
    name: str
    digest: str

    @property
    def kind(self) -> ModelKind:
        return ModelKind.CLUSTER_MODEL if self.scope is Scope.CLUSTER else ModelKind.MODEL

    @property
    def prefix(self) -> str:
        where = CLUSTER_NAMESPACE_SEGMENT if self.scope is Scope.CLUSTER else self.namespace
        return f"{ARTIFACTS_ROOT}{_SCOPE_SEGMENTS[self.scope]}/{where}/{self.name}/{digest_hex(self.digest)}/"


def locate(key: str) -> ArtifactLocation | None:
    """The artifact a key under `artifacts/` belongs to; None for keys outside the layout."""
    if not key.startswith(ARTIFACTS_ROOT):
        return None
    parts = key[len(ARTIFACTS_ROOT) :].split("/", 4)
    if len(parts) < 5 or parts[0] not in _SEGMENT_SCOPES:
        return None
    scope = _SEGMENT_SCOPES[parts[0]]
    namespace = "" if scope is Scope.CLUSTER else parts[1]
    if scope is Scope.CLUSTER and parts[1] != CLUSTER_NAMESPACE_SEGMENT:
        return None
    if not parts[1] or not parts[2]:  # the layout never writes an empty namespace or name
        return None
    digest = f"sha256:{parts[3]}"
    if not _DIGEST.fullmatch(digest):
        return None
    return ArtifactLocation(scope=scope, namespace=namespace, name=parts[2], digest=digest)


def upload_claim_key(owner: Owner) -> str:
    return upload_prefix(owner) + UPLOAD_CLAIM


def upload_takeover_key(owner: Owner, claim_id: str) -> str:
    return upload_prefix(owner) + UPLOAD_TAKEOVER_PREFIX + claim_id
