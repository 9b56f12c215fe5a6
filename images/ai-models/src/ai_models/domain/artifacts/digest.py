"""The artifact digest, fixed before the first byte is written.

The digest names the artifact's directory, so it must be known when the publisher starts; it is
computed from content identities the source already has. Hugging Face gives every file a content
id (the LFS sha256 for large files, the git blob id for the rest), so repository, commit and the
selected files' ids identify the bytes exactly. An upload's digest comes from the sha256 of the
payload the upload API computed while receiving it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True)
class SourceFile:
    """One file of a source repository, as listed before downloading."""

    path: str
    size: int | None
    content_id: str | None  # LFS sha256 or git blob id
    lfs_sha256: str | None = None  # when known, the publisher verifies the download against it


def repository_digest(repository: str, revision: str, files: Iterable[SourceFile]) -> str:
    lines = [f"huggingface\n{repository}\n{revision}\n"]
    # Sorted by every hashed field, not only the path: a listing that names one path twice (with
    # different ids) still hashes the same in any order.
    ordered = sorted(files, key=lambda f: (f.path, str(f.size), str(f.content_id)))
    lines.extend(f"{item.path}\t{item.size}\t{item.content_id}\n" for item in ordered)
    return "sha256:" + hashlib.sha256("".join(lines).encode()).hexdigest()


def upload_digest(payload_sha256: str) -> str:
    return "sha256:" + hashlib.sha256(f"upload\n{payload_sha256}\n".encode()).hexdigest()
