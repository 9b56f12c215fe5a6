"""Fixtures of the materialize tests: the api (real app under uvicorn, authenticating as its own
ServiceAccount against the API emulator, the delivery signing key in place) serving a directory
store whose file reads a test can pause at a byte offset, and `ai-models materialize` run as the
real console entry point with the request a controller would give it.

As in the cluster (D159), the materializer reads the api's internal TLS listener, verified with
the CA certificate its token Secret gives it (here a test CA's)."""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ai_models.adapters.kube import ClientOptions, new_api_client
from ai_models.adapters.objectstore import DirectoryStore, ObjectStore
from ai_models.api.server import BackgroundServer, build_runtime
from ai_models.api.settings import ApiSettings
from ai_models.domain.delivery.materialization import MaterializationRequest, RequestedArtifact
from ai_models.domain.storage.ledger import Owner
from ai_models.names import MODULE_NAMESPACE, MaterializeVariable
from fakes.s3 import moto_s3, s3_bucket  # noqa: F401  (fixtures used by this package's tests)
from fakes.served_artifacts import delivery_token, model_key, put_delivery_key
from kubeemu.pytest_fixtures import (  # noqa: F401  (fixtures used by this package's tests)
    RunningEmulator,
    kube_emulator,
    kube_emulator_factory,
)
from support.module_install import install_module
from support.processes import ModuleProcess
from support.render import RenderedChart, render_chart
from support.tls_files import write_tls_files
from support.values import module_values

KEY = b"materialize-tests-signing-key-32"


@functools.cache
def rendered_chart() -> RenderedChart:
    return render_chart(module_values())


class Gate:
    """Pauses reads of one stored file once they reach `at` bytes, until `release()`."""

    def __init__(self) -> None:
        self.key_suffix: str | None = None
        self.at = 0
        self.paused = threading.Event()
        self._released = threading.Event()

    def pause(self, path: str, *, at: int) -> None:
        self.key_suffix, self.at = f"/files/{path}", at
        self.paused.clear()
        self._released.clear()

    def release(self) -> None:
        self.key_suffix = None
        self._released.set()

    def applies(self, key: str) -> bool:
        return self.key_suffix is not None and key.endswith(self.key_suffix)

    def wait(self) -> None:
        self.paused.set()
        assert self._released.wait(timeout=60), "the test never released the gate"


class _GatedStream(io.RawIOBase):
    def __init__(self, inner: Any, *, start: int, gate: Gate) -> None:
        super().__init__()
        self._inner = inner
        self._position = start
        self._gate = gate

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        wanted = size if size is not None and size >= 0 else 1 << 30
        if self._gate.key_suffix is not None:
            if self._position >= self._gate.at:
                self._gate.wait()
            elif self._gate.key_suffix is not None:
                wanted = min(wanted, self._gate.at - self._position)
        data: bytes = self._inner.read(wanted)
        self._position += len(data)
        return data

    def close(self) -> None:
        self._inner.close()
        super().close()


class GatedStore:
    """A directory store whose reads of the gated file pause (what a slow or stuck store looks like
    to the serving API, and a way to stop a materializer mid-copy at a known offset)."""

    def __init__(self, inner: DirectoryStore, gate: Gate) -> None:
        self.inner = inner
        self.gate = gate
        self.description = inner.description

    def open_range(self, key: str, *, start: int = 0, end: int | None = None) -> Any:
        stream = self.inner.open_range(key, start=start, end=end)
        return _GatedStream(stream, start=start, gate=self.gate) if self.gate.applies(key) else stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@dataclasses.dataclass
class Served:
    emulator: RunningEmulator
    store: DirectoryStore
    gate: Gate
    url: str
    ca_pem: str
    work: Path
    app: Any = None
    api_client: Any = None
    config: ApiSettings | None = None
    shutting_down: threading.Event = dataclasses.field(default_factory=threading.Event)
    runtimes: list[Any] = dataclasses.field(default_factory=list)
    started: list[ModuleProcess] = dataclasses.field(default_factory=list)
    servers: list[BackgroundServer] = dataclasses.field(default_factory=list)

    def serve(self, store: ObjectStore) -> str:
        """Another api (same account, same settings) serving `store`; its URL."""
        assert self.config is not None
        runtime = build_runtime(self.config, store=store, api_client=self.api_client)
        self.runtimes.append(runtime)
        cert, key, _ = write_tls_files(self.work / "tls")
        server = BackgroundServer(
            runtime.internal_app, shutting_down=runtime.state.shutting_down, tls=(cert, key)
        )
        self.servers.append(server.start())
        return server.url

    def token(self, artifacts: Sequence[tuple[Owner, str]]) -> str:
        return delivery_token(artifacts, key=KEY)

    def materializer(
        self,
        artifacts: Mapping[str, tuple[Owner, str]],
        *,
        claim: Path,
        url: str | None = None,
        token: str | None = None,
        ca_pem: str | None = None,
        run: str = "run",
    ) -> Materializer:
        """`ai-models materialize` for `artifacts` (mount name -> object and digest) into `claim`,
        trusting `ca_pem` (the CA of the api's certificate unless given)."""
        request = MaterializationRequest(
            api_url=url or self.url,
            target_dir=str(claim),
            artifacts=tuple(
                RequestedArtifact.of(name, model_key(owner), digest)
                for name, (owner, digest) in artifacts.items()
            ),
            termination_message_path=str(self.work / f"termination-{run}"),
        )
        env = {
            item["name"]: item["value"] for item in request.to_env(token_secret="unused") if "value" in item
        }
        env[MaterializeVariable.TOKEN.value] = token or self.token(list(artifacts.values()))
        env[MaterializeVariable.CA_BUNDLE.value] = ca_pem or self.ca_pem
        process = ModuleProcess("materialize", env=env, log_path=self.work / f"materialize-{run}.log")
        self.started.append(process)
        return Materializer(process=process, termination=Path(request.termination_message_path))


@dataclasses.dataclass
class Materializer:
    process: ModuleProcess
    termination: Path

    def start(self) -> Materializer:
        self.process.start()
        return self

    def wait(self, *, timeout: float = 60) -> int:
        """Its exit code, once it exited by itself."""
        self.process.wait_until(
            lambda: not self.process.running(), timeout=timeout, what="the materializer to exit"
        )
        return self.process.terminate()

    def run(self, *, timeout: float = 60) -> int:
        return self.start().wait(timeout=timeout)

    def outcome(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.termination.read_text())
        return document

    def summary(self) -> dict[str, Any]:
        for line in self.process.run_log().splitlines():
            if '"materialization finished"' in line:
                entry: dict[str, Any] = json.loads(line)
                return entry
        raise AssertionError(f"no summary line in the log:\n{self.process.log()[-4000:]}")


@pytest.fixture
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    emulator: RunningEmulator = request.getfixturevalue("kube_emulator")
    account = install_module(emulator, rendered=rendered_chart()).service_accounts["api"]
    put_delivery_key(emulator, KEY)
    store = DirectoryStore(tmp_path / "store")
    gate = Gate()
    api_client = new_api_client(
        ClientOptions(retries=1, backoff_seconds=0.05), kubeconfig=str(emulator.kubeconfig(account))
    )
    index = tmp_path / "index"
    index.mkdir()
    config = ApiSettings(namespace=MODULE_NAMESPACE, api_index_dir=index, api_object_cache_seconds=0)
    runtime = build_runtime(config, store=GatedStore(store, gate), api_client=api_client)
    work = tmp_path / "work"
    work.mkdir()
    cert, key, ca_file = write_tls_files(work / "tls")
    server = BackgroundServer(
        runtime.internal_app, shutting_down=runtime.state.shutting_down, tls=(cert, key)
    ).start()
    served = Served(
        emulator=emulator,
        store=store,
        gate=gate,
        url=server.url,
        ca_pem=ca_file.read_text(),
        work=work,
        app=runtime.internal_app,
        api_client=api_client,
        config=config,
        shutting_down=runtime.state.shutting_down,
    )
    try:
        yield served
    finally:
        for process in served.started:
            process.kill() if process.running() else None
        gate.release()
        for extra in served.servers:
            extra.stop()
        for other in served.runtimes:
            other.close()
        server.stop()
        runtime.close()
        api_client.close()
