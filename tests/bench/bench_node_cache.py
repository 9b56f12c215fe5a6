"""Node cache benchmark: `ai-models node-cache` as a subprocess; exits non-zero when a target is
missed.

    PYTHONPATH=tests .venv/bin/python -m bench.bench_node_cache

A 2 GiB artifact (four 512 MiB shards of synthetic bytes and a config) of a Ready Model, served by a
real `ai-models api` process from a directory store, against the Kubernetes API emulator in this
process, with the module's RBAC as the chart renders it in NodeCache mode. As in the cluster (D159),
the plugin (started as the test stacks start it, `support.node_cache_plugin`) reads the api's
internal TLS listener, verified with a test CA's file (`support.tls_files`), with a token of its
ServiceAccount the TokenRequest API issued for the module audience, which the api checks with a
TokenReview naming that audience and a SubjectAccessReview.

- Cold fetch: a plugin with an empty cache root is asked to publish the model over its unix socket
  (as kubelet would, retrying while it answers UNAVAILABLE); its time is the download's own, from
  the plugin's "artifact ready" line (start of the download to the verified, published tree),
  compared in the same run with a plain download of the same files over the same https listener
  with the same token and CA: httpx streaming each file to disk, fsync'd (no verification, no
  resume).
- Cache hit: `HITS` NodePublishVolume calls of the now cached model to distinct targets (a real
  read-only bind mount each, the Model read through the plugin's short cache), timed at the caller
  over the socket; then each is unpublished.
- Memory: the plugin's peak resident set (VmHWM of its own address space, read before it stops).

Each side runs `ROUNDS` times, interleaved, with a new plugin and an empty cache each round; the best
round of each counts for throughput (the disk of a shared machine is noisy), every hit counts for
the p99, and the largest peak for memory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import grpc

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.csi import csi_pb2, csi_pb2_grpc
from ai_models.names import (
    KUBELET_EPHEMERAL,
    KUBELET_POD_NAME,
    KUBELET_POD_NAMESPACE,
    KUBELET_POD_UID,
    NODE_CACHE_COMPONENT,
    VOLUME_DIGEST_ATTRIBUTE,
    VOLUME_MODEL_ATTRIBUTE,
)
from bench.bench_api import ApiProcess, start_api
from bench.bench_materialize import plain_download, shard_contents
from bench.checks import Check
from fakes.model_files import GIB, MIB
from fakes.served_artifacts import publish_ready
from kubeemu.pytest_fixtures import REPO_CRDS, start_emulator
from support.module_install import install_module
from support.node_cache_plugin import plugin_process
from support.node_cache_stack import NODE_CACHE_SETTINGS, module_token
from support.render import render_chart
from support.values import module_values
from testbed.csi_kubelet import CsiNode

ROUNDS = 3
HITS = 200
PEAK_RSS_TARGET_MB = 200.0
THROUGHPUT_RATIO_TARGET = 0.8
HIT_P99_TARGET_MS = 50.0
CALL_TIMEOUT_SECONDS = 60.0
COLD_FETCH_TIMEOUT_SECONDS = 900.0
RETRY_SECONDS = 0.5
NAMESPACE = "bench"
MODEL = "big"
CSI_DIR = "kubernetes.io~csi"


@dataclasses.dataclass(frozen=True)
class Round:
    cold_seconds: float  # the download's own time (the plugin's log)
    hits_ms: list[float]
    peak_rss_mb: float


class Plugin:
    """One `ai-models node-cache` over a fresh cache root and kubelet directory."""

    def __init__(self, *, work: Path, kubeconfig: Path, token_file: Path, api: ApiProcess) -> None:
        self.work = work
        self.kubelet_dir = work / "kubelet"
        self.kubelet_dir.mkdir(parents=True)
        assert api.ca_file is not None, "the plugin reads the api's internal TLS listener"
        self.process = plugin_process(
            CsiNode(name="bench-node", kubelet_dir=self.kubelet_dir, socket=work / "csi.sock"),
            cache_root=work / "cache",
            kubeconfig=kubeconfig,
            token_file=token_file,
            api_url=api.internal_url,
            ca_file=api.ca_file,
            cache_size="10Gi",
            log_path=work / "plugin.log",
            env={"AI_MODELS_NODE_CACHE_PUBLISH_WAIT_SECONDS": "1"},
        ).start()
        self.channel = grpc.insecure_channel(f"unix://{work / 'csi.sock'}")
        try:
            grpc.channel_ready_future(self.channel).result(timeout=60)
        except grpc.FutureTimeoutError as error:
            self.stop()
            raise RuntimeError(f"the plugin never served its socket:\n{self.log()[-4000:]}") from error
        self.node = csi_pb2_grpc.NodeStub(self.channel)

    def log(self) -> str:
        return self.process.log()

    def publish(self, pod_uid: str, digest: str) -> Path:
        target = self.kubelet_dir / "pods" / pod_uid / "volumes" / CSI_DIR / "model" / "mount"
        target.parent.mkdir(parents=True, exist_ok=True)
        self.node.NodePublishVolume(
            csi_pb2.NodePublishVolumeRequest(
                volume_id=f"csi-{pod_uid}",
                target_path=str(target),
                volume_capability=csi_pb2.VolumeCapability(
                    mount=csi_pb2.VolumeCapability.MountVolume(),
                    access_mode=csi_pb2.VolumeCapability.AccessMode(
                        mode=csi_pb2.VolumeCapability.AccessMode.SINGLE_NODE_READER_ONLY
                    ),
                ),
                readonly=True,
                volume_context={
                    VOLUME_MODEL_ATTRIBUTE: MODEL,
                    VOLUME_DIGEST_ATTRIBUTE: digest,
                    KUBELET_POD_NAMESPACE: NAMESPACE,
                    KUBELET_POD_NAME: f"server-{pod_uid[:8]}",
                    KUBELET_POD_UID: pod_uid,
                    KUBELET_EPHEMERAL: "true",
                },
            ),
            timeout=CALL_TIMEOUT_SECONDS,
        )
        return target

    def unpublish(self, pod_uid: str, target: Path) -> None:
        self.node.NodeUnpublishVolume(
            csi_pb2.NodeUnpublishVolumeRequest(volume_id=f"csi-{pod_uid}", target_path=str(target)),
            timeout=CALL_TIMEOUT_SECONDS,
        )

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("the plugin's memory cannot be read")

    def download_seconds(self) -> float:
        for line in self.log().splitlines():
            if '"artifact ready"' in line:
                return float(json.loads(line)["seconds"])
        raise RuntimeError(f"the plugin logged no ready artifact:\n{self.log()[-4000:]}")

    def stop(self) -> None:
        self.channel.close()
        self.process.terminate(timeout=60)


def pod_uid(number: int) -> str:
    return f"00000000-0000-4000-8000-{number:012d}"


def cold_and_hits(plugin: Plugin, digest: str, round_number: int) -> Round:
    deadline = time.monotonic() + COLD_FETCH_TIMEOUT_SECONDS
    first = pod_uid(round_number * 10_000)
    while True:
        try:
            target = plugin.publish(first, digest)
            break
        except grpc.RpcError as error:
            if error.code() is not grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise RuntimeError(f"the cold publish failed: {error.code()} {error.details()}") from error
            time.sleep(RETRY_SECONDS)  # kubelet's retry, without its backoff
    published = [(first, target)]
    hits_ms = []
    for number in range(1, HITS + 1):
        uid = pod_uid(round_number * 10_000 + number)
        started = time.perf_counter()
        published.append((uid, plugin.publish(uid, digest)))
        hits_ms.append((time.perf_counter() - started) * 1000)
    peak = plugin.peak_rss_mb()
    for uid, path in published:
        plugin.unpublish(uid, path)
    return Round(cold_seconds=plugin.download_seconds(), hits_ms=hits_ms, peak_rss_mb=peak)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> int:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-node-cache-") as scratch:
        work = Path(scratch)
        emulator = start_emulator(work / "emulator", crd_dirs=[REPO_CRDS])
        api = None
        try:
            accounts = install_module(
                emulator, rendered=render_chart(module_values(NODE_CACHE_SETTINGS))
            ).service_accounts
            plugin_account = accounts[NODE_CACHE_COMPONENT]
            store_root = work / "store"
            contents = shard_contents()
            _owner, digest = publish_ready(
                emulator, DirectoryStore(store_root), MODEL, contents, namespace=NAMESPACE
            )
            total = sum(len(content) for content in contents.values())
            api = start_api(emulator, accounts["api"], store_root, work, internal_tls=True)
            # The projected module-audience token kubelet would give the plugin (D159); the plain
            # download sends the same one.
            token = module_token(emulator, plugin_account)
            token_file = work / "token"
            token_file.write_text(token)
            downloads: list[float] = []
            rounds: list[Round] = []
            for number in range(ROUNDS):
                copy = work / f"copy-{number}"
                try:
                    downloads.append(
                        plain_download(
                            api,
                            token,
                            list(contents),
                            f"/api/serving/v1/models/{NAMESPACE}/{MODEL}",
                            copy,
                        )
                    )
                finally:
                    shutil.rmtree(copy, ignore_errors=True)
                plugin = Plugin(
                    work=work / f"plugin-{number}",
                    kubeconfig=emulator.kubeconfig(plugin_account),
                    token_file=token_file,
                    api=api,
                )
                try:
                    rounds.append(cold_and_hits(plugin, digest, number))
                finally:
                    plugin.stop()
                    shutil.rmtree(plugin.work, ignore_errors=True)
        finally:
            if api is not None:
                api.stop()
            emulator.close()
    mib = total / MIB
    print(f"node cache: {mib:.0f} MiB artifact, best of {ROUNDS} rounds each, {HITS} cache hits per round")
    for number, (download, result) in enumerate(zip(downloads, rounds, strict=True), start=1):
        print(
            f"  round {number}: plain download {download:5.2f} s ({mib / download:5.0f} MiB/s) | "
            f"cold fetch {result.cold_seconds:5.2f} s ({mib / result.cold_seconds:5.0f} MiB/s) | hit p50 "
            f"{percentile(result.hits_ms, 0.5):5.1f} ms, p99 {percentile(result.hits_ms, 0.99):5.1f} ms | "
            f"peak RSS {result.peak_rss_mb:.0f} MB"
        )
    ratio = min(downloads) / min(result.cold_seconds for result in rounds)
    hits = [hit for result in rounds for hit in result.hits_ms]
    print(f"  throughput ratio cold fetch/plain download: {ratio:.2f}")
    print(f"  load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    checks = [
        Check("node cache: cold fetch vs plain download", ratio, THROUGHPUT_RATIO_TARGET, True),
        Check(
            "node cache: cache-hit NodePublishVolume p99 (ms)",
            percentile(hits, 0.99),
            HIT_P99_TARGET_MS,
            False,
        ),
        Check(
            "node cache: plugin peak RSS (MB)",
            max(result.peak_rss_mb for result in rounds),
            PEAK_RSS_TARGET_MB,
            False,
        ),
    ]
    print("targets")
    for check in checks:
        print(check.line())
    print(f"total {time.perf_counter() - started:.1f} s; {total / GIB:.0f} GiB per side and round")
    return 0 if all(check.met for check in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
