"""Which members of an uploaded archive become artifact files, and under which paths.

Member names come from the user: each goes through `safe_member_path` (no absolute paths, no
`..`, no odd characters), then through the same per-file rules as `select_files` (weights
anywhere; companions unless ignored: scripts, images, other formats). People archive a folder,
so a single top-level directory that wraps every member is dropped from the paths.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

from ai_models.domain.artifacts.selection import GGUF_PATTERN, IGNORED_PATTERNS, SAFETENSORS_PATTERN


def kept(path: str) -> bool:
    """Whether `select_files` could keep `path`: weights always, other files unless ignored."""
    lower = path.lower()
    if fnmatch.fnmatchcase(lower, SAFETENSORS_PATTERN) or fnmatch.fnmatchcase(lower, GGUF_PATTERN):
        return True
    return not any(fnmatch.fnmatchcase(lower, pattern) for pattern in IGNORED_PATTERNS)


def wrapper_of(paths: Iterable[str]) -> str | None:
    """The one top-level directory every path lies in, or None."""
    tops = set()
    for path in paths:
        top, separator, _rest = path.partition("/")
        if not separator:
            return None
        tops.add(top)
    return tops.pop() if len(tops) == 1 else None


def path_conflict(paths: Iterable[str]) -> tuple[str, str] | None:
    """Two paths of which the first is a directory of the second (`x` and `x/model.safetensors`),
    or None. No directory tree holds both, so neither a store directory nor a model directory on
    a node can: the archive is refused, naming them."""
    seen = PathTree()
    for path in paths:
        conflict = seen.add(path)
        if conflict is not None:
            return conflict
    return None


class PathTree:
    """Paths added one by one (archives read front to back), refusing a file where a directory is."""

    def __init__(self) -> None:
        self._files: set[str] = set()
        self._directories: dict[str, str] = {}  # directory -> one path under it

    def add(self, path: str) -> tuple[str, str] | None:
        """Adds `path`; returns (file, path under it) when it conflicts with one added before.
        The same path twice is no conflict: the later member replaces the earlier, as with tar -x."""
        if path in self._directories:
            return path, self._directories[path]
        parts = path.split("/")
        for count in range(1, len(parts)):
            directory = "/".join(parts[:count])
            if directory in self._files:
                return directory, path
        for count in range(1, len(parts)):
            self._directories.setdefault("/".join(parts[:count]), path)
        self._files.add(path)
        return None


def unwrap(path: str, wrapper: str | None) -> str:
    return path[len(wrapper) + 1 :] if wrapper is not None else path


class StreamingLayout:
    """The wrapper decision for archives read front to back (tar), where later members are unknown.

    The first member decides: inside a directory, that directory is taken as the wrapper and
    stripped. A later member outside it proves otherwise; `place` then says so, and the files
    already stored under stripped paths must move back under the directory.
    """

    def __init__(self) -> None:
        self._wrapper: str | None = None
        self._decided = False

    @property
    def wrapper(self) -> str | None:
        return self._wrapper

    def place(self, path: str) -> tuple[str, str | None]:
        """The stored path of member `path`, and the wrapper given up by this member (if any)."""
        if not self._decided:
            self._decided = True
            top, separator, _rest = path.partition("/")
            self._wrapper = top if separator else None
        if self._wrapper is None:
            return path, None
        if path.startswith(self._wrapper + "/"):
            return unwrap(path, self._wrapper), None
        broken, self._wrapper = self._wrapper, None
        return path, broken
