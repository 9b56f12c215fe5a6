"""The `ai-models` console entry point; each process of the module is a sub-command."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import ValidationError

from ai_models import __version__
from ai_models.catalog_commands import add_index_parser, add_search_parser
from ai_models.logs import configure_logging
from ai_models.names import ENV_PREFIX
from ai_models.settings import LogLevel, Settings

log = logging.getLogger("ai_models.cli")

Command = Callable[[argparse.Namespace, Settings], int]


def _version(_args: argparse.Namespace, _settings: Settings) -> int:
    print(f"ai-models {__version__}")
    return 0


def _controller(_args: argparse.Namespace, _settings: Settings) -> int:
    # Imported here: the kubernetes client takes a second to import, `version` should not.
    from ai_models.controller.main import run  # noqa: PLC0415
    from ai_models.controller.settings import ControllerSettings  # noqa: PLC0415

    return run(ControllerSettings())


def _publish(_args: argparse.Namespace, _settings: Settings) -> int:
    # Imported here: the publisher loads the Hub client and the archive readers, `version` should not.
    from ai_models.publish.main import main  # noqa: PLC0415

    return main()


def _materialize(_args: argparse.Namespace, _settings: Settings) -> int:
    from ai_models.materialize.main import main  # noqa: PLC0415

    return main()


def _node_cache(args: argparse.Namespace, _settings: Settings) -> int:
    from ai_models.nodecache.main import PluginArguments, main  # noqa: PLC0415  (grpc loads only here)

    return main(
        PluginArguments(
            csi_endpoint=args.csi_endpoint, node_name=args.node_name, cache_root=Path(args.cache_root)
        )
    )


def _api(args: argparse.Namespace, settings: Settings) -> int:
    from ai_models.api.server import serve  # noqa: PLC0415  (FastAPI and uvicorn load only here)

    return serve(settings, host=args.host, port=args.port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ai-models",
        description=f"Runtime of the ai-models Deckhouse module. Settings come from {ENV_PREFIX}* variables.",
    )
    parser.add_argument("--version", action="version", version=f"ai-models {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    version = commands.add_parser("version", help="print the version and exit")
    version.set_defaults(handler=_version)
    controller = commands.add_parser(
        "controller", help="run the controller (reconciles on the Lease holder; probes on every replica)"
    )
    controller.set_defaults(handler=_controller)
    api = commands.add_parser("api", help="serve the catalog-import API")
    api.add_argument("--host", default="0.0.0.0", help="address to listen on (default: all)")
    api.add_argument(
        "--port",
        type=int,
        default=None,
        help="port to listen on (default: the api_port setting, 8000)",
    )
    api.set_defaults(handler=_api)
    publish = commands.add_parser(
        "publish",
        help="publish one Model or ClusterModel artifact (run by the controller's Jobs, "
        f"configured by {ENV_PREFIX}PUBLISH_* variables)",
    )
    publish.set_defaults(handler=_publish)
    materialize = commands.add_parser(
        "materialize",
        help="copy a workload's artifacts from the serving API onto its shared claim (run by the "
        f"controller's Jobs, configured by {ENV_PREFIX}MATERIALIZE_* variables)",
    )
    materialize.set_defaults(handler=_materialize)
    node_cache = commands.add_parser(
        "node-cache",
        help="serve the CSI node plugin of NodeCache delivery and its per-node cache (run by the "
        f"module's DaemonSet, configured by {ENV_PREFIX}NODE_CACHE_* variables)",
    )
    node_cache.add_argument(
        "--csi-endpoint", required=True, metavar="unix:///PATH", help="the socket kubelet calls"
    )
    node_cache.add_argument("--node-name", required=True, help="the Node this plugin serves")
    node_cache.add_argument(
        "--cache-root", required=True, metavar="DIR", help="where the cache keeps its trees"
    )
    node_cache.set_defaults(handler=_node_cache)
    catalog = commands.add_parser("catalog", help="index and search the catalog locally, without a cluster")
    catalog_commands = catalog.add_subparsers(dest="catalog_command", metavar="COMMAND", required=True)
    add_index_parser(catalog_commands)
    add_search_parser(catalog_commands)
    return parser


def _log_level(args: argparse.Namespace, settings: Settings) -> LogLevel:
    """A process of the cluster logs at its setting; a command a person runs (one with `-v`) logs
    warnings only unless `-v` asks for more or the variable is set explicitly."""
    verbose = getattr(args, "verbose", None)
    if verbose is None or "log_level" in settings.model_fields_set:
        return settings.log_level
    return {0: LogLevel.WARN, 1: LogLevel.INFO}.get(verbose, LogLevel.DEBUG)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings()
    except ValidationError as error:
        # A bad variable must name itself; pydantic's `loc` is the field, the variable adds a prefix.
        for problem in error.errors():
            field = str(problem["loc"][0]) if problem["loc"] else ""
            where = Settings.variable(field) if field in Settings.model_fields else f"{ENV_PREFIX}*"
            print(f"ai-models: invalid setting {where}: {problem['msg']}", file=sys.stderr)
        return 2
    configure_logging(level=_log_level(args, settings), log_format=settings.effective_log_format())
    handler: Command = args.handler
    return handler(args, settings)


if __name__ == "__main__":
    sys.exit(main())
