"""Watch streams: newline-delimited `{"type", "object"}` JSON over a chunked response.

A watch subscribes to the store and takes its starting point (snapshot or replay from the event
log) in the same locked step, so nothing is lost or duplicated between them. Events pass label,
field and namespace filters with the watch cache's transitions (an object that stops matching is
reported DELETED, one that starts matching ADDED). Bookmarks are queued under the store lock, so a
bookmark's resourceVersion never runs ahead of events still waiting in the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kubeemu import errors
from kubeemu.jsonutil import dumps
from kubeemu.store import Store, WatchEvent

# A slow client that falls this far behind is disconnected (it will re-watch), like the apiserver does.
MAX_PENDING_EVENTS = 20000
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True)
class Outgoing:
    type: str
    obj: Mapping[str, Any] | None = None
    rv: int = 0
    end_of_initial: bool = False


_CLOSE = Outgoing("CLOSE")


class WatchSubscription:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        namespace: str | None,
        matches: Callable[[Mapping[str, Any]], bool],
    ) -> None:
        self._loop = loop
        self._namespace = namespace
        self._matches = matches
        self.queue: asyncio.Queue[Outgoing] = asyncio.Queue()
        self._pending = 0
        self.overflowed = False

    def visible(self, obj: Mapping[str, Any] | None) -> bool:
        if obj is None:
            return False
        if self._namespace is not None and (obj.get("metadata") or {}).get("namespace") != self._namespace:
            return False
        return self._matches(obj)

    def translate(self, event: WatchEvent) -> Outgoing | None:
        now, before = self.visible(event.obj), self.visible(event.old) if event.old is not None else False
        if event.type == "ADDED":
            return Outgoing("ADDED", event.obj, event.rv) if now else None
        if event.type == "DELETED":
            return Outgoing("DELETED", event.obj, event.rv) if self.visible(event.obj) else None
        if now and before:
            return Outgoing("MODIFIED", event.obj, event.rv)
        if now:
            return Outgoing("ADDED", event.obj, event.rv)
        if before and event.old is not None:
            gone = dict(event.old)
            gone["metadata"] = {**(event.old.get("metadata") or {}), "resourceVersion": str(event.rv)}
            return Outgoing("DELETED", gone, event.rv)
        return None

    def offer(self, event: WatchEvent) -> None:
        item = self.translate(event)
        if item is not None:
            self.push(item)

    def push(self, item: Outgoing) -> None:
        self._pending += 1
        if self._pending > MAX_PENDING_EVENTS:
            self.overflowed = True
            item = _CLOSE
        with contextlib.suppress(RuntimeError):  # the loop is already closed: the server is gone
            self._loop.call_soon_threadsafe(self._deliver, item)

    def _deliver(self, item: Outgoing) -> None:
        self._pending -= 1
        self.queue.put_nowait(item)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self.queue.put_nowait, _CLOSE)


@dataclass(frozen=True)
class WatchRequest:
    storage_key: str
    namespace: str | None
    since: int | None  # None: start from the current state (synthetic ADDED events)
    send_initial_events: bool
    allow_bookmarks: bool
    timeout: float
    bookmark_interval: float


async def stream(
    request: web.Request,
    *,
    store: Store,
    watch: WatchRequest,
    matches: Callable[[Mapping[str, Any]], bool],
    render: Callable[[str, Mapping[str, Any]], Any],
    bookmark: Callable[[int, bool], Mapping[str, Any]],
    stopping: asyncio.Event,
    active: set[WatchSubscription],
) -> web.StreamResponse:
    """Serve one watch until timeout, client disconnect, overflow or server shutdown."""
    loop = asyncio.get_running_loop()
    subscription = WatchSubscription(loop, namespace=watch.namespace, matches=matches)
    response = web.StreamResponse(
        status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"}
    )
    response.enable_chunked_encoding()
    try:
        initial_events, start_rv = store.subscribe(watch.storage_key, subscription, since=watch.since)
    except errors.APIError as exc:
        await response.prepare(request)
        await response.write(dumps({"type": "ERROR", "object": exc.status()}) + b"\n")
        await response.write_eof()
        return response
    active.add(subscription)
    try:
        await response.prepare(request)
        for event in initial_events:
            item = (
                Outgoing("ADDED", event.obj, event.rv)
                if watch.since is None
                else subscription.translate(event)
            )
            if item is not None and (watch.since is not None or subscription.visible(event.obj)):
                await _write(response, item, render, bookmark)
        if watch.send_initial_events and watch.allow_bookmarks:
            await _write(response, Outgoing("BOOKMARK", rv=start_rv, end_of_initial=True), render, bookmark)
        deadline = loop.time() + watch.timeout
        next_bookmark = loop.time() + watch.bookmark_interval
        while not stopping.is_set():
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            wait = (
                min(remaining, max(next_bookmark - loop.time(), 0.0)) if watch.allow_bookmarks else remaining
            )
            try:
                item = await asyncio.wait_for(subscription.queue.get(), timeout=max(wait, 0.001))
            except TimeoutError:
                if watch.allow_bookmarks and loop.time() >= next_bookmark:
                    with store.lock:
                        subscription.push(Outgoing("BOOKMARK", rv=store.resource_version))
                    next_bookmark = loop.time() + watch.bookmark_interval
                continue
            if item.type == "CLOSE":
                break
            await _write(response, item, render, bookmark)
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
    except ConnectionResetError:
        pass
    finally:
        store.unsubscribe(watch.storage_key, subscription)
        active.discard(subscription)
    return response


async def _write(
    response: web.StreamResponse,
    item: Outgoing,
    render: Callable[[str, Mapping[str, Any]], Any],
    bookmark: Callable[[int, bool], Mapping[str, Any]],
) -> None:
    if item.type == "BOOKMARK":
        payload: Any = bookmark(item.rv, item.end_of_initial)
    else:
        assert item.obj is not None
        payload = render(item.type, item.obj)
    await response.write(dumps({"type": item.type, "object": payload}) + b"\n")
