"""Catalog search benchmark: 100,000 entries in a directory store, indexed, then searched.

    PYTHONPATH=tests .venv/bin/python -m bench.bench_search

Builds the api's index from the store exactly as a replica does (IndexBuilder over the real
directory backend), then runs a fixed, seeded mix of searches (filters, every sort, text, the
verdict filter, pages followed through their tokens) through `Catalog.search` with a ledger
snapshot and a budget, timing each from query to response bytes. HTTP and authentication are
left out: they cost the same for any search and are not what the index decides.

Targets: p95 latency < 50 ms; the process RSS after the build (and its peak) < 400 MB.
Exits 1 when a target is missed.
"""

from __future__ import annotations

import datetime
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.api.catalog.catalog import Catalog
from ai_models.api.catalog.index import CatalogIndex
from ai_models.api.catalog.index_builder import IndexBuilder
from ai_models.api.catalog.ledger_view import LedgerReading, LedgerState, LedgerView
from ai_models.api.metrics import ApiMetrics
from ai_models.api.models import SearchQuery
from ai_models.api.settings import DEFAULT_INDEX_CACHE_BYTES
from ai_models.catalog.layout import CatalogManifest, chunk_key, chunk_name, manifest_key
from ai_models.domain.catalog.record import CatalogRecord, ProviderMetadata, ResourceFacts, WeightsFormat
from ai_models.domain.storage.ledger import EntryState, Ledger, LedgerEntry, Owner, Scope

ENTRIES = {"huggingface": 80_000, "mirror": 20_000}
CHUNK = 1_000
SEARCHES = 3_000
P95_TARGET_MS = 50.0
RSS_TARGET_MB = 400.0
READERS = 4
SEED = 20260101

PIPELINES = ["text-generation", "text-classification", "fill-mask", "feature-extraction",
             "image-classification", "text-to-image", "automatic-speech-recognition", "translation",
             "sentence-similarity", "token-classification"]  # fmt: skip
LIBRARIES = ["transformers", "gguf", "diffusers", "sentence-transformers", "peft", "onnx", "mlx", "timm"]
FAMILIES = ["llama", "qwen2", "mistral", "gemma", "phi3", "bert", "t5", "gpt2", "falcon", "mixtral"]
WORDS = ["instruct", "chat", "base", "coder", "vision", "math", "tiny", "large", "small", "mini", "awq",
         "uncensored", "gptq", "fp8", "int4", "lora", "merged", "distill", "reasoning", "embed"]  # fmt: skip
SIZES_B = [0.1, 0.35, 0.5, 1, 1.5, 2, 3, 7, 8, 13, 14, 32, 34, 70, 72, 405]


def _records(source: str, count: int, rng: random.Random) -> Iterator[CatalogRecord]:
    start = datetime.datetime(2022, 1, 1, tzinfo=datetime.UTC)
    for n in range(count):
        family = rng.choice(FAMILIES)
        author = f"org{int(rng.paretovariate(1.2)) % 3000}"
        size = rng.choice(SIZES_B)
        words = rng.sample(WORDS, 2)
        model_id = f"{author}/{family}-{size}b-{words[0]}-{words[1]}-{n}"
        known = rng.random() < 0.85  # some entries lack facts, as real ones do
        params = int(size * 1e9) if known else None
        created = start + datetime.timedelta(minutes=rng.randrange(2_000_000))
        yield CatalogRecord(
            source=source,
            id=model_id,
            provider="HuggingFace",
            metadata=ProviderMetadata(
                author=author,
                sha=f"{rng.getrandbits(160):040x}",
                pipelineTag=rng.choice(PIPELINES),
                libraryName=rng.choice(LIBRARIES),
                tags=(family, *words, rng.choice(LIBRARIES), "region:us"),
                license=rng.choice(["apache-2.0", "mit", "llama3.1", "other"]),
                downloads=int(rng.paretovariate(0.8) * 10) if rng.random() < 0.95 else None,
                likes=int(rng.paretovariate(1.0)) if rng.random() < 0.9 else None,
                createdAt=created,
                lastModified=created + datetime.timedelta(days=rng.randrange(300)),
            ),
            resources=ResourceFacts(
                format=WeightsFormat.SAFETENSORS,
                architecture=f"{family.capitalize()}ForCausalLM",
                family=family,
                parameterCount=params,
                dtype="BF16",
                contextLength=rng.choice([2048, 4096, 8192, 32768, 131072]) if known else None,
                weightsBytes=params * 2 if params is not None else None,
                layers=rng.choice([12, 24, 32, 40, 80]) if known else None,
            ),
            indexedAt=start,
        )


def fill_store(store: DirectoryStore, rng: random.Random) -> None:
    for source, count in ENTRIES.items():
        names = []
        batch: list[str] = []
        offset = 0
        for record in _records(source, count, rng):
            batch.append(record.to_json())
            if len(batch) == CHUNK:
                store.put_bytes(chunk_key(source, "g1", offset), ("\n".join(batch) + "\n").encode())
                names.append(chunk_name(offset))
                offset += len(batch)
                batch = []
        manifest = CatalogManifest(
            source=source,
            generation="g1",
            models=count,
            chunks=tuple(names),
            completedAt=datetime.datetime.now(datetime.UTC),
        )
        store.put_bytes(manifest_key(source), manifest.model_dump_json(by_alias=True).encode())


def _query(rng: random.Random) -> dict[str, Any]:
    """A search as people make them: mostly one or two filters, a sort, sometimes text."""
    query: dict[str, Any] = {"pageSize": rng.choice([20, 50, 50, 50, 100])}
    if rng.random() < 0.5:
        query["sort"] = rng.choice(
            ["Downloads", "Likes", "LastModified", "CreatedAt", "ParameterCount", "WeightsBytes"]
        )
    if rng.random() < 0.4:
        query["q"] = " ".join(
            rng.sample([*WORDS, *FAMILIES, "lla", "qw", "org1", "7b"], rng.choice([1, 1, 2]))
        )
    if rng.random() < 0.3:
        query["pipelineTag"] = rng.choice(PIPELINES)
    if rng.random() < 0.2:
        query["library"] = rng.choice(LIBRARIES)
    if rng.random() < 0.15:
        query["author"] = f"org{rng.randrange(20)}"
    if rng.random() < 0.2:
        query["source"] = rng.choice(list(ENTRIES))
    if rng.random() < 0.2:
        query["minParameters"] = rng.choice([1, 3, 7]) * 10**9
    if rng.random() < 0.2:
        query["maxParameters"] = rng.choice([2, 8, 14, 70]) * 10**9
    if rng.random() < 0.2:
        query["maxWeightsBytes"] = rng.choice([4, 16, 64]) * 10**9
    if rng.random() < 0.2:
        query["verdict"] = rng.choice(["Feasible", "NotFeasible", "EstimateUnavailable"])
    return query


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    current = int(fields["VmRSS"].split()[0]) / 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return current, peak


def main() -> int:
    rng = random.Random(SEED)
    with tempfile.TemporaryDirectory(prefix="bench-search-") as scratch:
        store = DirectoryStore(Path(scratch) / "store")
        started = time.perf_counter()
        fill_store(store, rng)
        print(f"store: {sum(ENTRIES.values()):,} entries written in {time.perf_counter() - started:.1f} s")
        base_rss, _ = rss_mb()

        index = CatalogIndex(
            directory=Path(scratch),
            readers=READERS,
            cache_kib_per_connection=DEFAULT_INDEX_CACHE_BYTES // 1024 // 5,
        )
        started = time.perf_counter()
        assert IndexBuilder(store=store, index=index, metrics=ApiMetrics()).poll_once(), "indexing failed"
        build_seconds = time.perf_counter() - started
        after_build, _ = rss_mb()
        size_mb = index.path.stat().st_size / 1e6
        print(f"index: built in {build_seconds:.1f} s, {size_mb:.0f} MB on disk")

        owner = Owner(kind="Model", namespace="team", name="m", uid="u")
        ledger = Ledger(
            entries=(LedgerEntry(owner, Scope.NAMESPACED, 200 * 10**9, EntryState.PUBLISHED),), confirmed=True
        )
        view = LedgerView(read=lambda: LedgerReading(ledger, LedgerState.PRESENT), capacity_bytes=300 * 10**9)
        catalog = Catalog(index=index, ledger=view)

        timings: list[tuple[float, dict[str, Any]]] = []
        results = 0
        for _ in range(SEARCHES):
            query = _query(rng)
            pages = rng.choice([1, 1, 1, 2, 3])  # sometimes follow the next pages
            for _page in range(pages):
                began = time.perf_counter()
                body = catalog.search(SearchQuery.model_validate(query))
                timings.append(((time.perf_counter() - began) * 1000, query))
                results += body.count(b'"downloadVerdict"')
                token_at = body.rfind(b'"nextPageToken":"')
                if token_at < 0:
                    break
                query = {**query, "pageToken": body[token_at + 17 : -2].decode()}
        index.close()
    return report(timings, results=results, build_seconds=build_seconds, rss=(base_rss, after_build))


def report(
    timings: list[tuple[float, dict[str, Any]]],
    *,
    results: int,
    build_seconds: float,
    rss: tuple[float, float],
) -> int:
    _, peak = rss_mb()
    latencies = sorted(ms for ms, _ in timings)
    p50 = statistics.median(latencies)
    p95 = latencies[int(len(latencies) * 0.95) - 1]
    print(f"searches: {len(latencies):,} ({results:,} entries served)")
    print(f"latency: p50 {p50:.1f} ms, p95 {p95:.1f} ms, max {latencies[-1]:.1f} ms "
          f"(target p95 < {P95_TARGET_MS:.0f})")  # fmt: skip
    for ms, query in sorted(timings, key=lambda item: -item[0])[:3]:
        print(f"  slow: {ms:.0f} ms {query}")
    print(f"memory: RSS {rss[0]:.0f} MB before the build, {rss[1]:.0f} MB after it ({build_seconds:.1f} s), "
          f"peak {peak:.0f} MB (target < {RSS_TARGET_MB:.0f})")  # fmt: skip
    missed = []
    if p95 >= P95_TARGET_MS:
        missed.append(f"p95 {p95:.1f} ms >= {P95_TARGET_MS:.0f} ms")
    if max(rss[1], peak) >= RSS_TARGET_MB:
        missed.append(f"RSS {max(rss[1], peak):.0f} MB >= {RSS_TARGET_MB:.0f} MB")
    if missed:
        print("MISSED: " + "; ".join(missed))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
