"""`ai-models catalog index|search`: the catalog on a workstation, without a cluster.

`index` runs the same pass the controller runs, over one ModelCatalogSource manifest, into a
directory store; `search` queries that store with the api's own index and search code.
"""

from __future__ import annotations

import argparse
import datetime
import os
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

from ai_models.adapters.hub import HubClient
from ai_models.adapters.hub.errors import ProviderError
from ai_models.adapters.objectstore import DirectoryStore
from ai_models.catalog.indexing import Checkpoint, run_pass
from ai_models.catalog.source import SourceSpec
from ai_models.settings import Settings

TOKEN_VARIABLE = "HF_TOKEN"


def add_index_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "index",
        help="index one ModelCatalogSource into a local store",
        description=(
            "Runs one indexing pass of the ModelCatalogSource in FILE into the directory store DIR. "
            f"A Hub token, if the source needs one, is read from ${TOKEN_VARIABLE}."
        ),
    )
    parser.add_argument("--source", required=True, type=Path, metavar="FILE", help="ModelCatalogSource YAML")
    parser.add_argument("--store", required=True, type=Path, metavar="DIR", help="directory of the store")
    parser.add_argument(
        "--endpoint",
        help="Hub endpoint when the source sets none (default: AI_MODELS_HF_ENDPOINT or huggingface.co)",
    )
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


def run_index(args: argparse.Namespace, settings: Settings) -> int:
    resource = _load_source(args.source)
    try:
        spec = SourceSpec.from_resource(
            resource,
            default_endpoint=args.endpoint or settings.hf_endpoint,
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
