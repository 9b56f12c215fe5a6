"""One artifact from the serving API into the node cache, in a background thread.

The copy is the materializer's (`adapters.serving.tree.ArtifactCopy`): files into staging, resumed
with Range requests where a killed plugin left them, every sha256 checked, published by rename and a
completion record. What the node cache adds around it: the plugin's ServiceAccount token read from
its file for every download (projected tokens rotate), the space reservation and a download slot
between the manifest and the first byte (`admit`), progress for the messages NodePublish returns,
and a stop that interrupts the copy at the next chunk (its staging stays, to be resumed).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from ai_models.adapters.serving.client import ServingClient
from ai_models.adapters.serving.tree import (
    BUFFER_BYTES,
    ArtifactCopy,
    Delivered,
    MaterializationFailure,
    Retry,
    Tally,
    Wording,
)
from ai_models.domain.artifacts.manifest import ArtifactFile
from ai_models.domain.delivery.materialization import RequestedArtifact
from ai_models.domain.delivery.node_cache import progress
from ai_models.domain.models.reference import ModelKey
from ai_models.names import MODULE_TOKEN_AUDIENCE
from ai_models.nodecache.settings import NodeCacheSettings

logger = logging.getLogger(__name__)

MAX_TOKEN_BYTES: Final = 64 * 1024
# The mount name RequestedArtifact requires; the node cache's trees have none of their own.
_ARTIFACT_NAME: Final = "node-cache"
NODE_CACHE_WORDING: Final = Wording(
    target="the node cache",
    write_fix="check the free space of the node cache's root on this node and that it is writable",
    resume="the node cache retries after a backoff and continues where it stopped",
    republished="the pod's volume names the old artifact; new pods of the workload name the new one",
)
# What each refusal means for the node cache: its cause and its fix, without the API's words.
NODE_CACHE_REFUSALS: Final = {
    401: "the node cache's ServiceAccount token was not accepted (expired, not yet rotated, or not "
    f"issued for the audience {MODULE_TOKEN_AUDIENCE}); the token file is read again for the next attempt",
    403: "the node cache's ServiceAccount may not get the object; its ClusterRole must grant get on "
    "models and clustermodels",
    404: "it does not exist (the object was deleted, or the artifact has no such file)",
    409: "the object is not Ready; the download is retried",
}


class Stopped(Exception):
    """The node cache closes: the download stops where it is (its staging is resumed next time)."""


class NoRoom(Exception):
    """The artifact does not fit the node cache, even after evicting every unused tree."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Phase(enum.Enum):
    QUEUED = "queued"
    MANIFEST = "reading the manifest"
    SPACE = "waiting for space"
    SLOT = "waiting for a download slot"
    COPYING = "downloading"
    VERIFYING = "verifying"


@dataclasses.dataclass(frozen=True)
class ClientSettings:
    api_url: str
    token_file: Path
    ca_file: str | None = None


class _StoppableTally(Tally):
    def __init__(self, stop: threading.Event) -> None:
        super().__init__(event="downloading")
        self._stop = stop

    def count(self, fetched: int) -> None:
        if self._stop.is_set():
            raise Stopped
        super().count(fetched)


@dataclasses.dataclass(frozen=True)
class Finished:
    """How a download ended: `delivered` or a failure (`no_room` for space, else retryable)."""

    delivered: Delivered | None = None
    message: str = ""
    no_room: bool = False


class Download:
    """One digest's download; `run()` in its own thread; `describe()` for Waiting messages."""

    def __init__(
        self,
        *,
        ref: ModelKey,
        digest: str,
        root: Path,
        client: ClientSettings,
        admit: Callable[[Download, tuple[ArtifactFile, ...]], None],
        finished: Callable[[Download, Finished], None],
        stop: threading.Event,
        retry: Retry,
    ) -> None:
        self.ref = ref
        self.digest = digest
        self.phase = Phase.QUEUED
        self.detail = ""
        self.tally: Tally = _StoppableTally(stop)
        self._root = root
        self._client_settings = client
        self._admit = admit
        self._finished = finished
        self._stop = stop
        self._retry = retry
        self._client: ServingClient | None = None
        self.started = 0.0
        self.thread = threading.Thread(target=self.run, name=f"download-{digest[7:19]}", daemon=True)

    @property
    def what(self) -> str:
        return f"{self.ref.describe()} (artifact {self.digest})"

    def describe(self) -> str:
        if self.phase is Phase.COPYING:
            done = self.tally.fetched + self.tally.reused
            return f"downloading {self.what}: {progress(done, self.tally.total)}"
        if self.phase is Phase.SPACE and self.detail:
            return self.detail  # make_room's message names the artifact and the sizes
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.phase.value} for {self.what}{detail}"

    def start(self) -> None:
        self.started = time.monotonic()
        self.thread.start()

    def seconds(self) -> float:
        """Since the download started (its log line says how long an artifact took)."""
        return time.monotonic() - self.started

    def run(self) -> None:
        outcome = Finished(message=f"the download of {self.what} stopped")
        try:
            outcome = Finished(delivered=self._copy())
        except NoRoom as refusal:
            outcome = Finished(message=refusal.message, no_room=True)
        except MaterializationFailure as failure:
            outcome = Finished(message=failure.message)
        except Stopped:
            logger.info("download stopped", extra={"digest": self.digest})
        except Exception as error:
            logger.exception("download failed unexpectedly", extra={"digest": self.digest})
            outcome = Finished(
                message=f"the download of {self.what} failed unexpectedly ({type(error).__name__}); the "
                "node cache's log has the details; it is retried after a backoff"
            )
        finally:
            if self._client is not None:
                self._client.close()
        self._finished(self, outcome)

    def _copy(self) -> Delivered:
        self.phase = Phase.MANIFEST
        self._client = self._new_client()
        copy = ArtifactCopy(
            client=self._client,
            root=self._root,
            artifact=RequestedArtifact.of(_ARTIFACT_NAME, self.ref, self.digest),
            buffer=bytearray(BUFFER_BYTES),
            tally=self.tally,
            retry=self._retry,
            wording=NODE_CACHE_WORDING,
            admit=self._admitted,
        )
        return copy.run()

    def _admitted(self, files: tuple[ArtifactFile, ...]) -> None:
        self._admit(self, files)
        if self._stop.is_set():
            raise Stopped
        self.phase = Phase.COPYING

    def _new_client(self) -> ServingClient:
        settings = self._client_settings
        try:
            with settings.token_file.open("rb") as source:
                token = source.read(MAX_TOKEN_BYTES).decode().strip()
        except (OSError, UnicodeDecodeError) as error:
            raise MaterializationFailure(
                f"cannot read the node cache's ServiceAccount token {settings.token_file} "
                f"({type(error).__name__}); the plugin's pod must mount its projected token",
                retryable=True,
            ) from error
        try:
            return ServingClient(
                base_url=settings.api_url,
                token=token,
                ca_bundle=settings.ca_file,
                reader="the node cache",
                refusals=NODE_CACHE_REFUSALS,
            )
        except (ValueError, OSError) as error:
            raise MaterializationFailure(
                f"cannot use the serving API {settings.api_url} with the CA file "
                f"{settings.ca_file or '(none)'}: {error}; fix "
                f"{NodeCacheSettings.variable('node_cache_api_url')} or "
                f"{NodeCacheSettings.variable('node_cache_api_ca_file')}",
                retryable=True,
            ) from error
