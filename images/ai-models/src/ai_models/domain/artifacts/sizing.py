"""How many bytes a publication of a repository reserves, from its file list (pure).

The controller reserves the sizes of the files `selection.select_files` keeps, before the publish
Job writes a byte; the catalog shows the same number for an entry it could not size from the Hub
listing. Both go through `chosen_files` and `reserved_bytes` here, so a catalog entry's
`downloadVerdict.requiredBytes` and the reservation of a Model created from that entry cannot
drift apart (D131).
"""

from __future__ import annotations

from collections.abc import Sequence

from ai_models.domain.artifacts.digest import SourceFile
from ai_models.domain.artifacts.selection import Selection, select_files


def chosen_files(files: Sequence[SourceFile]) -> tuple[Selection, tuple[SourceFile, ...]]:
    """The selection over `files` and the listed files it keeps (none when it refuses them)."""
    selection = select_files(item.path for item in files)
    kept = set(selection.files)
    return selection, tuple(item for item in files if item.path in kept)


def reserved_bytes(chosen: Sequence[SourceFile]) -> int:
    """What the controller reserves for `chosen`; a file listed without a size counts as 0."""
    return sum(item.size or 0 for item in chosen)


def publication_bytes(files: Sequence[SourceFile]) -> int | None:
    """The reservation a publication of `files` makes, or None when it is not known exactly: the
    selection refuses the repository, or a chosen file was listed without its size."""
    selection, chosen = chosen_files(files)
    if not selection.accepted or any(item.size is None for item in chosen):
        return None
    return reserved_bytes(chosen)
