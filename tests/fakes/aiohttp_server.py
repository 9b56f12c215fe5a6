"""An aiohttp application served on 127.0.0.1 (a port the kernel picks) by its own event loop in a
background thread, so tests drive it from their thread and other processes reach it over TCP.

A subclass builds its application in `make_app`; `start`/`stop` (or `with`) run and end it.
"""

from __future__ import annotations

import abc
import asyncio
import socket
import threading
from types import TracebackType
from typing import ClassVar, Self

from aiohttp import web


class ThreadedAiohttpServer(abc.ABC):
    server_name: ClassVar[str] = "aiohttp server"
    backlog: ClassVar[int] = 64
    # How long stopping waits for answers still being sent (aiohttp's own default).
    shutdown_timeout: ClassVar[float] = 60.0

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._socket: socket.socket | None = None

    @abc.abstractmethod
    def make_app(self) -> web.Application:
        """The application to serve, built on the server's own event loop."""

    @property
    def port(self) -> int:
        if self._socket is None:
            raise RuntimeError(f"the {self.server_name} is not running")
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(self.backlog)
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve(ready))
            except BaseException as error:  # reported to start() below
                failure.append(error)
                ready.set()
            finally:
                loop.close()

        self._thread = threading.Thread(target=serve, name=self.server_name, daemon=True)
        self._thread.start()
        if not ready.wait(timeout=10) or failure:
            raise RuntimeError(f"the {self.server_name} did not start") from (failure[0] if failure else None)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._thread, self._loop, self._stopping = None, None, None
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    async def _serve(self, ready: threading.Event) -> None:
        self._stopping = asyncio.Event()
        runner = web.AppRunner(self.make_app(), access_log=None, shutdown_timeout=self.shutdown_timeout)
        await runner.setup()
        assert self._socket is not None
        await web.SockSite(runner, self._socket).start()
        ready.set()
        try:
            await self._stopping.wait()
        finally:
            await runner.cleanup()
