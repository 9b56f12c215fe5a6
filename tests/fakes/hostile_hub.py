"""A hostile Hub endpoint: a real aiohttp server on 127.0.0.1 that answers every request the way
it is told to, to attack whoever lists or downloads from it.

    with HostileHub() as hostile:
        hostile.redirect_to("http://127.0.0.1:8080/metrics")      # 302 anywhere
        hostile.reject_with(400, body=b'{"error": "hf_secret"}')   # reflect a secret in an error
        hostile.stall_after(1024)                                  # send 1 KiB, then nothing
        hostile.trickle(every=0.05)                                # one byte at a time, forever
        hostile.huge_listing(300 * MIB)                            # a JSON list that never stops
        hostile.count()                                            # requests answered so far

Every behaviour applies to every path until another is set; `serve(body)` answers normally. The
server runs its own event loop in a background thread; a stalled answer ends when the server stops.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Iterator, Mapping
from typing import Final

import pytest
from aiohttp import web

from fakes.aiohttp_server import ThreadedAiohttpServer

MIB: Final = 1024 * 1024
# One listed model, repeated: a huge listing is valid JSON as far as it goes.
_ITEM: Final = b'{"id":"hostile/model","sha":"' + b"0" * 40 + b'","tags":["' + b"x" * 900 + b'"]},'


@dataclasses.dataclass(frozen=True)
class _Behaviour:
    kind: str  # serve | redirect | reject | stall | trickle | huge
    status: int = 200
    body: bytes = b"[]"
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    location: str = ""
    after: int = 0
    every: float = 0.0
    size: int = 0


class HostileHub(ThreadedAiohttpServer):
    server_name = "hostile Hub"
    # A stalled or trickling answer must not hold the server's shutdown for long.
    shutdown_timeout = 0.5

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._behaviour = _Behaviour("serve")
        self._paths: list[str] = []

    # ----- controls (any thread) -------------------------------------------------------------

    def serve(self, body: bytes = b"[]", *, headers: Mapping[str, str] | None = None) -> None:
        self._set(_Behaviour("serve", body=body, headers=dict(headers or {})))

    def redirect_to(self, location: str, *, status: int = 302) -> None:
        self._set(_Behaviour("redirect", status=status, location=location))

    def reject_with(self, status: int, *, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        self._set(_Behaviour("reject", status=status, body=body, headers=dict(headers or {})))

    def stall_after(self, after: int, *, announced: int = 64 * MIB) -> None:
        """Announce `announced` bytes, send `after` of them, then nothing until the server stops."""
        self._set(_Behaviour("stall", after=after, size=announced))

    def trickle(self, *, every: float) -> None:
        """A body of one byte every `every` seconds, without end."""
        self._set(_Behaviour("trickle", every=every))

    def huge_listing(self, size: int, *, announce: bool = False) -> None:
        """A JSON listing of `size` bytes (with Content-Length when `announce`), streamed in 1 MiB pieces."""
        self._set(_Behaviour("huge", size=size, headers={"announce": "1"} if announce else {}))

    def paths(self) -> list[str]:
        with self._lock:
            return list(self._paths)

    def count(self) -> int:
        return len(self.paths())

    def _set(self, behaviour: _Behaviour) -> None:
        with self._lock:
            self._behaviour = behaviour

    # ----- lifecycle -------------------------------------------------------------------------

    def make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("GET", "/{path:.*}", self._answer)
        return app

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            behaviour = self._behaviour
            self._paths.append(request.path_qs)
        if behaviour.kind == "redirect":
            return web.Response(status=behaviour.status, headers={"Location": behaviour.location})
        if behaviour.kind in ("serve", "reject"):
            return web.Response(status=behaviour.status, body=behaviour.body, headers=behaviour.headers)
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        if behaviour.kind == "stall":
            response.content_length = behaviour.size
        if behaviour.kind == "huge" and behaviour.headers.get("announce"):
            response.content_length = behaviour.size
        await response.prepare(request)
        assert self._stopping is not None
        try:
            if behaviour.kind == "stall":
                await response.write(b"[" + b" " * max(0, behaviour.after - 1))
                await self._stopping.wait()
            elif behaviour.kind == "trickle":
                await response.write(b"[")
                while not self._stopping.is_set():
                    await asyncio.sleep(behaviour.every)
                    await response.write(b" ")
            else:
                await self._huge(response, behaviour.size)
        except (ConnectionError, asyncio.CancelledError):
            pass  # the client gave up, which is the point
        return response

    async def _huge(self, response: web.StreamResponse, size: int) -> None:
        piece = b"[" + _ITEM * (MIB // len(_ITEM))
        sent = 0
        while sent + len(piece) < size - 1:
            await response.write(piece)
            sent += len(piece)
            piece = _ITEM * (MIB // len(_ITEM))
        await response.write(b" " * max(0, size - sent - 1) + b"]")


@pytest.fixture
def hostile_hub() -> Iterator[HostileHub]:
    """A running hostile Hub that serves an empty listing until told otherwise; stopped after the test."""
    with HostileHub() as hub:
        yield hub
