"""The emulator's objects on disk, as etcd keeps a cluster's: saved while it runs, loaded at start.

One JSON file holds the store's snapshot (`Store.snapshot`): the resourceVersion counter, every
object by storage key, and the uids of deleted objects (the garbage collector's memory). It is
written whole to a temporary file in the same directory, flushed to disk and renamed over the old
one, so a crash or a kill leaves either the previous state or the new one, never half of one.
`StateWriter` saves after writes (at most once per `interval`) and once more when closed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubeemu.cluster import Cluster
from kubeemu.store import Store

log = logging.getLogger("kubeemu.persistence")

FORMAT = "kubeemu-state/v1"


class StateFileError(RuntimeError):
    """The state file exists but cannot be read as a saved state."""


@dataclass(frozen=True)
class SavedState:
    resource_version: int
    objects: dict[str, list[dict[str, Any]]]
    deleted_uids: list[str]

    @property
    def count(self) -> int:
        return sum(len(objects) for objects in self.objects.values())


def save_state(store: Store, path: Path) -> int:
    """Write the store's state to `path` atomically; returns the resourceVersion saved."""
    rv, objects, deleted = store.snapshot()  # stored objects are immutable: dump outside the lock
    document = {"format": FORMAT, "resourceVersion": rv, "objects": objects, "deletedUids": deleted}
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            json.dump(document, stream, separators=(",", ":"), default=str)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(partial, 0o600)  # it holds Secrets
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise
    return rv


def load_state(path: Path) -> SavedState | None:
    """The state saved at `path`, or None when there is none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        document = json.loads(text)
        if document.get("format") != FORMAT:
            raise ValueError(f"format {document.get('format')!r}, expected {FORMAT!r}")
        return SavedState(
            resource_version=int(document["resourceVersion"]),
            objects={str(key): list(items) for key, items in document["objects"].items()},
            deleted_uids=[str(uid) for uid in document.get("deletedUids", [])],
        )
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise StateFileError(f"{path} is not a saved emulator state: {error}") from None


def restore_state(cluster: Cluster, path: Path) -> SavedState | None:
    """Load the state saved at `path` into `cluster` (see `Cluster.restore`); None when there is none."""
    state = load_state(path)
    if state is not None:
        cluster.restore(state.resource_version, state.objects, state.deleted_uids)
    return state


class StateWriter:
    """Saves the store to `path` in a background thread whenever its resourceVersion moved (checked
    every `interval` seconds), and a last time on `close`."""

    def __init__(self, store: Store, path: Path, *, interval: float = 0.5) -> None:
        self._store = store
        self._path = path
        self._interval = interval
        self._saved = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubeemu-state-writer", daemon=True)

    def start(self) -> StateWriter:
        self._thread.start()
        return self

    def save_if_changed(self) -> None:
        if self._store.resource_version != self._saved:
            self._saved = save_state(self._store, self._path)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.save_if_changed()
            except OSError as error:  # a full disk: keep serving, try again next time
                log.error("cannot save the cluster state to %s: %s", self._path, error)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self.save_if_changed()
