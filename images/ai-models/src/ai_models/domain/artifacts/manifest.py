"""The artifact manifest: what an artifact contains, written last by the publisher.

An artifact exists only once its manifest does; files without one are a publication that did not
finish. Each file records its size, sha256 and the store's version token at write time
(`storeVersion`: the object store's own ETag), so the inventory pass notices a file that went
missing or was replaced without re-reading it. It is not called `etag` in the document: the HTTP
ETag the serving API sends for a file is its sha256 in quotes, another value (D146); manifests
written before say `etag`, and are read the same.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from ai_models.domain.storage.ledger import Owner
from ai_models.names import SourceType

MANIFEST_SCHEMA = 1
STORE_VERSION = "storeVersion"
_OLD_STORE_VERSION = "etag"  # what manifests written before D146 call it


class ManifestFormatError(ValueError):
    """The stored manifest cannot be read; the artifact counts as damaged."""


@dataclasses.dataclass(frozen=True)
class ArtifactFile:
    path: str  # relative to the artifact's `files/`, `/`-separated
    size: int
    sha256: str  # hex
    etag: str | None = None  # the object store's ETag at write time; `storeVersion` in the document


@dataclasses.dataclass(frozen=True)
class ArtifactSource:
    type: SourceType
    repository: str | None = None  # Hugging Face `org/name`
    revision: str | None = None  # the commit the files were read from
    endpoint: str | None = None
    upload_sha256: str | None = None  # hex digest of the uploaded payload


@dataclasses.dataclass(frozen=True)
class ArtifactManifest:
    owner: Owner
    digest: str  # sha256:<hex>, also the artifact's directory
    source: ArtifactSource
    files: tuple[ArtifactFile, ...]
    resolved: Mapping[str, Any]  # the object's `status.resolved`, camelCase
    published_at: str  # RFC 3339

    @property
    def size_bytes(self) -> int:
        return sum(item.size for item in self.files)


def manifest_to_json(manifest: ArtifactManifest) -> bytes:
    source = {
        key: value
        for key, value in {
            "type": manifest.source.type.value,
            "repository": manifest.source.repository,
            "revision": manifest.source.revision,
            "endpoint": manifest.source.endpoint,
            "uploadSha256": manifest.source.upload_sha256,
        }.items()
        if value is not None
    }
    document = {
        "schema": MANIFEST_SCHEMA,
        "owner": dataclasses.asdict(manifest.owner),
        "digest": manifest.digest,
        "source": source,
        "files": [
            {"path": item.path, "size": item.size, "sha256": item.sha256}
            | ({STORE_VERSION: item.etag} if item.etag is not None else {})
            for item in manifest.files
        ],
        "sizeBytes": manifest.size_bytes,
        "resolved": dict(manifest.resolved),
        "publishedAt": manifest.published_at,
    }
    return json.dumps(document, indent=1, sort_keys=True).encode()


def manifest_from_json(data: bytes) -> ArtifactManifest:
    try:
        document: dict[str, Any] = json.loads(data)
        if not isinstance(document, dict):
            raise TypeError(f"a manifest is a JSON object, not {type(document).__name__}")
        if document.get("schema") != MANIFEST_SCHEMA:
            raise ValueError(f"unknown manifest schema {document.get('schema')!r}")
        source = document["source"]
        return ArtifactManifest(
            owner=Owner(**document["owner"]),
            digest=str(document["digest"]),
            source=ArtifactSource(
                type=SourceType(source["type"]),
                repository=source.get("repository"),
                revision=source.get("revision"),
                endpoint=source.get("endpoint"),
                upload_sha256=source.get("uploadSha256"),
            ),
            files=tuple(
                ArtifactFile(
                    path=str(item["path"]),
                    size=int(item["size"]),
                    sha256=str(item["sha256"]),
                    etag=item.get(STORE_VERSION, item.get(_OLD_STORE_VERSION)),
                )
                for item in document["files"]
            ),
            resolved=dict(document.get("resolved") or {}),
            published_at=str(document["publishedAt"]),
        )
    except (ValueError, KeyError, TypeError) as error:
        raise ManifestFormatError(f"unreadable artifact manifest: {error}") from error
