"""`ai-models catalog index|search`: the catalog on a workstation, without a cluster.

`index` runs the same pass the controller runs, over one ModelCatalogSource manifest, into a
directory store; `search` queries that store with the api's own index and search code, reached
through `ai_models.api.catalog.offline` (the CLI imports nothing else of the api).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from ai_models.adapters.hub import HubClient
from ai_models.adapters.hub.errors import ProviderError
from ai_models.adapters.objectstore import DirectoryStore
from ai_models.adapters.serving.listing import ServingListingClient
from ai_models.api.catalog.offline import DEFAULT_SORT, SORTS, InvalidQuery, parse_query, search_store
from ai_models.catalog.indexing import Checkpoint, PassResult, run_pass
from ai_models.catalog.remote import RemoteSourceSpec, run_remote_pass
from ai_models.catalog.source import SourceSpec
from ai_models.domain.storage.verdict import Verdict
from ai_models.names import SERVING_TOKEN_VARIABLE, CatalogProvider
from ai_models.settings import Settings

TOKEN_VARIABLE = "HF_TOKEN"
# The Hub's own client libraries read the endpoint from HF_ENDPOINT; the README's local story
# (`HF_ENDPOINT=... make dev`) uses it too, so the command honours it like they do.
ENDPOINT_VARIABLE = "HF_ENDPOINT"


def add_verbose_option(parser: argparse.ArgumentParser) -> None:
    """A workstation command prints its answer; its log lines (each pass step, each served
    generation) are for debugging and show on stderr only when asked for."""
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help=f"log the pass on stderr (-v: Info, -vv: Debug; {Settings.variable('log_level')} also sets it)",
    )


def store_directory(value: str) -> Path:
    """`--store` as given, relative to the working directory like any path on a command line."""
    return Path(value).expanduser().resolve()


def add_index_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "index",
        help="index one ModelCatalogSource into a local store",
        description=(
            "Runs one indexing pass of the ModelCatalogSource in FILE into the directory store DIR. "
            f"A Hub token, if the source needs one, is read from ${TOKEN_VARIABLE}; for an AIModels "
            "source (another ai-models cluster) the token that cluster accepts from "
            f"${SERVING_TOKEN_VARIABLE}."
        ),
    )
    parser.add_argument("--source", required=True, type=Path, metavar="FILE", help="ModelCatalogSource YAML")
    parser.add_argument(
        "--store", required=True, type=store_directory, metavar="DIR", help="directory of the store"
    )
    parser.add_argument(
        "--endpoint",
        help=(
            "Hub endpoint when the source sets none "
            f"(default: {Settings.variable('hf_endpoint')}, else ${ENDPOINT_VARIABLE}, else huggingface.co)"
        ),
    )
    add_verbose_option(parser)
    parser.set_defaults(handler=run_index)


def _load_source(path: Path) -> dict[str, Any]:
    try:
        documents = [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    except (OSError, yaml.YAMLError) as error:
        raise SystemExit(f"ai-models catalog index: cannot read {path}: {error}") from error
    sources = [doc for doc in documents if isinstance(doc, dict) and doc.get("kind") == "ModelCatalogSource"]
    if len(sources) != 1:
        raise SystemExit(
            f"ai-models catalog index: {path} must hold exactly one ModelCatalogSource, found {len(sources)}"
        )
    source: dict[str, Any] = sources[0]
    return source


def _default_endpoint(args: argparse.Namespace, settings: Settings) -> str:
    """--endpoint, else the module's own variable when set, else HF_ENDPOINT, else the Hub."""
    if args.endpoint:
        return str(args.endpoint)
    if "hf_endpoint" in settings.model_fields_set:
        return settings.hf_endpoint
    return os.environ.get(ENDPOINT_VARIABLE, "").strip() or settings.hf_endpoint


def run_index(args: argparse.Namespace, settings: Settings) -> int:
    resource = _load_source(args.source)
    if (resource.get("spec") or {}).get("provider") == CatalogProvider.AI_MODELS:
        return _run_remote_index(args, resource)
    try:
        spec = SourceSpec.from_resource(
            resource,
            default_endpoint=_default_endpoint(args, settings),
            token=os.environ.get(TOKEN_VARIABLE),
        )
    except (KeyError, ValueError) as error:
        raise SystemExit(
            f"ai-models catalog index: {args.source} is not a valid ModelCatalogSource: {error}"
        ) from error
    args.store.mkdir(parents=True, exist_ok=True)
    store = DirectoryStore(args.store)
    console = Console(stderr=True)
    limit = spec.max_models or None
    with (
        Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        ) as progress,
        HubClient(endpoint=spec.endpoint, token=spec.token) as hub,
    ):
        task = progress.add_task(f"indexing {spec.name} from {spec.endpoint}", total=limit)

        def advance(checkpoint: Checkpoint) -> None:
            progress.update(task, completed=checkpoint.processed_models)

        try:
            result = run_pass(
                spec=spec,
                hub=hub,
                store=store,
                resume=None,
                on_checkpoint=advance,
                clock=lambda: datetime.datetime.now(datetime.UTC),
            )
        except ProviderError as error:
            console.print(f"[red]indexing {spec.name} failed ({error.reason}): {error}", soft_wrap=True)
            return 1
        assert result is not None  # nothing asks this pass to stop
        progress.update(task, completed=result.models, total=result.models)
    print(f"{result.models} models of {spec.name} indexed into {args.store} (generation {result.generation})")
    return 0


def _run_remote_index(args: argparse.Namespace, resource: dict[str, Any]) -> int:
    """An AIModels source: the other cluster's Ready ClusterModels, as the controller indexes them."""
    token = os.environ.get(SERVING_TOKEN_VARIABLE, "").strip()
    if not token:
        raise SystemExit(
            f"ai-models catalog index: {args.source} is an AIModels source; set {SERVING_TOKEN_VARIABLE} "
            "to a token the other ai-models cluster accepts"
        )
    try:
        spec = RemoteSourceSpec.from_resource(resource, token=token)
    except (KeyError, ValueError) as error:
        raise SystemExit(
            f"ai-models catalog index: {args.source} is not a valid ModelCatalogSource: {error}"
        ) from error
    args.store.mkdir(parents=True, exist_ok=True)
    console = Console(stderr=True)
    result: PassResult | None
    try:
        with ServingListingClient(
            endpoint=spec.endpoint, token=spec.token, ca_bundle=spec.ca_bundle
        ) as listing:
            result = run_remote_pass(
                spec=spec,
                listing=listing,
                store=DirectoryStore(args.store),
                resume=None,
                on_checkpoint=lambda checkpoint: console.print(f"{checkpoint.processed_models} indexed"),
                clock=lambda: datetime.datetime.now(datetime.UTC),
            )
    except ProviderError as error:
        console.print(f"[red]indexing {spec.name} failed ({error.reason}): {error}", soft_wrap=True)
        return 1
    assert result is not None  # nothing asks this pass to stop
    print(f"{result.models} models of {spec.name} indexed into {args.store} (generation {result.generation})")
    return 0


def add_search_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "search",
        help="search a local store with the catalog API's own index",
        description=(
            "Builds the catalog index of the directory store DIR and prints one page of results. "
            f"Verdicts use {Settings.variable('capacity_limit_bytes')}; without a cluster the usage is "
            "unknown."
        ),
    )
    parser.add_argument(
        "--store", required=True, type=store_directory, metavar="DIR", help="directory of the store"
    )
    parser.add_argument("--q", help="full-text query over id, author, tags, task, library, architecture")
    parser.add_argument("--source", help="only this catalog source")
    parser.add_argument("--pipeline-tag", help="only models with this pipeline tag")
    parser.add_argument("--library", help="only models for this library")
    parser.add_argument("--author", help="only models of this author")
    parser.add_argument("--min-parameters", type=int, help="at least this many parameters")
    parser.add_argument("--max-parameters", type=int, help="at most this many parameters")
    parser.add_argument("--max-weights-bytes", type=int, help="weights of at most this many bytes")
    parser.add_argument("--verdict", choices=[verdict.value for verdict in Verdict], help="download verdict")
    parser.add_argument("--sort", choices=SORTS, default=DEFAULT_SORT)
    parser.add_argument("--page-size", type=int, default=20, help="entries to print (1-500)")
    parser.add_argument(
        "--json", action="store_true", help="print a JSON array of entries (the API's entry shape)"
    )
    add_verbose_option(parser)
    parser.set_defaults(handler=run_search)


def _parameters(args: argparse.Namespace) -> dict[str, Any]:
    """The search options under the api's query parameter names."""
    return {
        "q": args.q,
        "source": args.source,
        "pipelineTag": args.pipeline_tag,
        "library": args.library,
        "author": args.author,
        "minParameters": args.min_parameters,
        "maxParameters": args.max_parameters,
        "maxWeightsBytes": args.max_weights_bytes,
        "verdict": args.verdict,
        "sort": args.sort,
        "pageSize": args.page_size,
    }


def run_search(args: argparse.Namespace, settings: Settings) -> int:
    try:
        query = parse_query(_parameters(args))
    except InvalidQuery as error:
        raise SystemExit(f"ai-models catalog search: {error}") from error
    if not (args.store / "catalog").is_dir():
        raise SystemExit(
            f"ai-models catalog search: {args.store} holds no catalog; run `ai-models catalog index` first"
        )
    entries = search_store(args.store, query, capacity_bytes=settings.capacity_limit_bytes)
    if args.json:
        print(json.dumps(entries, indent=2))
    else:
        _print_table(entries)
    return 0


def _print_table(entries: list[dict[str, Any]]) -> None:
    if not entries:
        # A bare header reads like a broken command; say that the query matched nothing.
        print("no entries match the query")
        return
    table = Table(
        "source", "id", "task", "parameters", "weights", "context", "KV/token", "verdict", "reason", box=None
    )
    for entry in entries:
        facts = entry.get("resources", {})
        table.add_row(
            entry["source"],
            entry["id"],
            entry.get("metadata", {}).get("pipelineTag", ""),
            _human(facts.get("parameterCount"), ""),
            _human(facts.get("weightsBytes"), "B"),
            str(facts.get("contextLength", "")),
            _human(facts.get("kvCacheBytesPerToken"), "B"),
            entry["downloadVerdict"]["verdict"],
            # Why a model does not fit (StorageUsageUnknown, CapacityExceeded, ...) is the answer a
            # person looks for; without it only --json told.
            entry["downloadVerdict"].get("reason", ""),
        )
    # Piped output is not truncated to a terminal's width.
    console = Console() if sys.stdout.isatty() else Console(width=240)
    console.print(table)


def _human(value: int | None, unit: str) -> str:
    """1234567 -> 1.2M: decimal prefixes, as model sizes are quoted."""
    if value is None:
        return ""
    if value < 1000:
        return f"{value}{unit}"
    scaled, prefix = float(value), ""
    for prefix in ("K", "M", "G", "T", "P"):  # noqa: B007  (the last prefix reached is the one)
        scaled /= 1000
        if scaled < 1000:
            break
    return f"{scaled:.1f}{prefix}{unit}"
