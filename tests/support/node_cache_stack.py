"""The node cache's peers for its tests: the real api (under uvicorn, authenticating callers against
the API emulator) serving a directory store that counts the bytes it serves and can pause a file at
a byte offset, the module installed in NodeCache mode (the plugin's ServiceAccount with exactly the
RBAC the chart renders for it), its token in a file, and NodeCaches over one root, closed at the end.

As in the cluster (D159), the plugin reads the api's internal TLS listener, verified with a test
CA (`ca_file`), with a token the TokenRequest API issued for the module audience.

    stack.publish("llama", {"w.bin": b"..."}, namespace="team-a") -> (request, digest)
    cache = stack.cache(limit_bytes=...)
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import pytest

from ai_models.adapters.kube import ClientOptions, new_api_client
from ai_models.adapters.objectstore import DirectoryStore
from ai_models.adapters.serving.tree import Retry
from ai_models.api.server import BackgroundServer, build_runtime
from ai_models.api.settings import ApiSettings
from ai_models.names import MODULE_NAMESPACE, MODULE_TOKEN_AUDIENCE, NODE_CACHE_COMPONENT
from ai_models.nodecache.cache import CacheConfig, CacheRequest, NodeCache
from fakes.model_files import FileContent
from fakes.served_artifacts import model_key, publish_ready
from kubeemu.authn import Identity
from kubeemu.pytest_fixtures import RunningEmulator
from support.module_install import install_module, pod_bound
from support.render import RenderedChart, render_chart
from support.tls_files import write_tls_files
from support.values import MINIMAL_SETTINGS, deep_merge, module_values

NODE_CACHE_SETTINGS: Final = deep_merge(
    MINIMAL_SETTINGS,
    {"delivery": {"mode": "NodeCache", "nodeCache": {"size": "1Gi", "nodeSelector": {"node-cache": "yes"}}}},
)


@functools.cache
def _rendered_chart() -> RenderedChart:
    """The chart in NodeCache mode: the plugin's ServiceAccount and RBAC are what it renders."""
    return render_chart(module_values(NODE_CACHE_SETTINGS))


class CountingStore:
    """A directory store that counts the bytes read of each key, and pauses reads of one file
    once they reach an offset (a stuck store to the api; a way to stop a download mid-file)."""

    def __init__(self, inner: DirectoryStore) -> None:
        self.inner = inner
        self.description = inner.description
        self.read_bytes: collections.Counter[str] = collections.Counter()
        self.opened: list[_CountedStream] = []  # every stream, in order: key, start, bytes read
        self.pause_suffix: str | None = None
        self.pause_at = 0
        self.paused = threading.Event()
        self.resume = threading.Event()
        self._lock = threading.Lock()

    def pause(self, path: str, *, at: int) -> None:
        self.pause_suffix, self.pause_at = f"/files/{path}", at
        self.paused.clear()
        self.resume.clear()

    def release(self) -> None:
        self.pause_suffix = None
        self.resume.set()

    def files_read(self) -> int:
        with self._lock:
            return sum(count for key, count in self.read_bytes.items() if "/files/" in key)

    def open_range(self, key: str, *, start: int = 0, end: int | None = None) -> Any:
        stream = _CountedStream(self, key, self.inner.open_range(key, start=start, end=end), start=start)
        with self._lock:
            self.opened.append(stream)
        return stream

    def count(self, key: str, size: int) -> None:
        with self._lock:
            self.read_bytes[key] += size

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _CountedStream:
    def __init__(self, store: CountingStore, key: str, inner: Any, *, start: int) -> None:
        self._store = store
        self.key = key
        self.start = start
        self.read_bytes = 0
        self._inner = inner
        self._position = start

    def read(self, size: int | None = -1) -> bytes:
        wanted = size if size is not None and size >= 0 else 1 << 30
        suffix = self._store.pause_suffix
        if suffix is not None and self.key.endswith(suffix):
            if self._position >= self._store.pause_at:
                self._store.paused.set()
                assert self._store.resume.wait(timeout=60), "the test never released the store"
            else:
                wanted = min(wanted, self._store.pause_at - self._position)
        data: bytes = self._inner.read(wanted)
        self._position += len(data)
        self.read_bytes += len(data)
        self._store.count(self.key, len(data))
        return data

    def close(self) -> None:
        self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclasses.dataclass
class CacheStack:
    emulator: RunningEmulator
    store: CountingStore
    url: str
    token_file: Path
    ca_file: Path
    root: Path
    plugin: Identity
    caches: list[NodeCache] = dataclasses.field(default_factory=list)

    def publish(
        self, name: str, files: Mapping[str, FileContent], *, namespace: str | None = "team-a"
    ) -> CacheRequest:
        """A Ready object holding `files`; the request the plugin makes for it."""
        owner, digest = publish_ready(self.emulator, self.store.inner, name, files, namespace=namespace)
        return CacheRequest(ref=model_key(owner), digest=digest)

    def kubeconfig(self, *, node: str) -> Path:
        """A kubeconfig with the token the plugin's pod on `node` has: bound to that node, as the
        chart's admission policy on Node updates requires (D161)."""
        return self.emulator.kubeconfig(pod_bound(self.emulator.cluster, self.plugin, node=node))

    def cache(self, **overrides: Any) -> NodeCache:
        """A NodeCache over the stack's root (a second one over the same root is a restarted plugin)."""
        settings: dict[str, Any] = {
            "root": self.root,
            "limit_bytes": 1 << 30,
            "api_url": self.url,
            "token_file": self.token_file,
            "ca_file": str(self.ca_file),
            "eviction_grace_seconds": 0.0,
            "retry": Retry(attempts=3, base_seconds=0.05, max_seconds=0.2),
            "housekeeping_seconds": 3600.0,
        }
        settings.update(overrides)
        cache = NodeCache(CacheConfig(**settings))
        self.caches.append(cache)
        return cache


def module_token(emulator: RunningEmulator, account: Identity) -> str:
    """A token of the ServiceAccount `account` for the module audience, as kubelet projects the
    node plugin's (the TokenRequest API)."""
    ref = account.service_account_ref
    assert ref is not None, account
    namespace, name = ref
    status, _, body = emulator.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": [MODULE_TOKEN_AUDIENCE], "expirationSeconds": 600},
        },
    )
    assert status == 201, body
    token: str = body["status"]["token"]
    return token


@pytest.fixture(name="cache_stack")
def cache_stack_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CacheStack]:
    emulator: RunningEmulator = request.getfixturevalue("kube_emulator")
    accounts = install_module(emulator, rendered=_rendered_chart()).service_accounts
    api_account, plugin = accounts["api"], accounts[NODE_CACHE_COMPONENT]
    token_file = tmp_path / "token"
    token_file.write_text(module_token(emulator, plugin))
    cert, key, ca_file = write_tls_files(tmp_path / "tls")
    store = CountingStore(DirectoryStore(tmp_path / "store"))
    api_client = new_api_client(
        ClientOptions(retries=1, backoff_seconds=0.05), kubeconfig=str(emulator.kubeconfig(api_account))
    )
    index = tmp_path / "index"
    index.mkdir()
    config = ApiSettings(namespace=MODULE_NAMESPACE, api_index_dir=index, api_object_cache_seconds=0)
    runtime = build_runtime(config, store=store, api_client=api_client)
    server = BackgroundServer(
        runtime.internal_app, shutting_down=runtime.state.shutting_down, tls=(cert, key)
    ).start()
    stack = CacheStack(
        emulator=emulator,
        store=store,
        url=server.url,
        token_file=token_file,
        ca_file=ca_file,
        root=tmp_path / "cache",
        plugin=plugin,
    )
    try:
        yield stack
    finally:
        store.release()
        for cache in stack.caches:
            cache.close()
        server.stop()
        runtime.close()
        api_client.close()
