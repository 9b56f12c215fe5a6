"""Where delivered artifacts live on a shared claim (SharedPVC mode): one contract for the
materializer that writes them and the pod template that mounts them.

    objects/sha256-<hex>/            a published artifact tree, exactly the manifest's files
    objects/sha256-<hex>.complete    its completion record, written after every sha256 matched
    staging/sha256-<hex>/            a materialization in progress (never mounted)

A tree counts as delivered only when its completion record names the same digest; a directory that
merely exists is never complete. A pod mounts `objects/sha256-<hex>` (a subPath of the claim)
read-only at `/data/modelcache/models/<name>`.
"""

from __future__ import annotations

import re
from typing import Final

OBJECTS_DIR: Final = "objects"
STAGING_DIR: Final = "staging"
COMPLETE_SUFFIX: Final = ".complete"
_DIGEST = re.compile(r"^sha256:([0-9a-f]{64})$")


def _entry(digest: str) -> str:
    match = _DIGEST.match(digest)
    if match is None:
        raise ValueError(f"{digest!r} is not an artifact digest (sha256:<64 hex digits>)")
    return f"sha256-{match.group(1)}"


def object_dir(digest: str) -> str:
    """The claim-relative directory of a published artifact: the subPath a pod mounts."""
    return f"{OBJECTS_DIR}/{_entry(digest)}"


def completion_record(digest: str) -> str:
    """The claim-relative path of the record that marks `object_dir(digest)` complete."""
    return f"{OBJECTS_DIR}/{_entry(digest)}{COMPLETE_SUFFIX}"


def staging_dir(digest: str) -> str:
    """The claim-relative directory a materialization of `digest` writes into before publishing."""
    return f"{STAGING_DIR}/{_entry(digest)}"
