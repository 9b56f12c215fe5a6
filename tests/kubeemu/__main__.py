"""`python -m kubeemu --port 0 --crds DIR --kubeconfig PATH`: the emulator as a standalone process.

`--route-service NAMESPACE/NAME=PORT` (repeatable) sends admission webhook calls for that Service
to 127.0.0.1:PORT.

Prints the server URL on stdout (first line), then serves until SIGINT/SIGTERM. The superuser token
is written into the kubeconfig (if asked for) and can also be fixed with `--token`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import tempfile
from pathlib import Path

from kubeemu.admission import MutatingAdmission
from kubeemu.authn import Identity
from kubeemu.kubeconfig import kubeconfig_document, write_kubeconfig
from kubeemu.server import DEFAULT_BOOKMARK_INTERVAL, cluster_with_crds, serve_forever, tls_context


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kubeemu", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--crds", type=Path, action="append", default=[], help="directory of CRD manifests")
    parser.add_argument("--token", default=None, help="bearer token of the superuser (system:masters)")
    parser.add_argument("--kubeconfig", type=Path, default=None, help="write a superuser kubeconfig here")
    parser.add_argument("--no-tls", action="store_true", help="plain HTTP (kubectl then sends no tokens)")
    parser.add_argument("--cert-dir", type=Path, default=None, help="where to write tls.crt/tls.key")
    parser.add_argument("--bookmark-interval", type=float, default=DEFAULT_BOOKMARK_INTERVAL)
    parser.add_argument("--debug", action="store_true", help="log one line per request")
    parser.add_argument(
        "--route-service",
        action="append",
        default=[],
        type=_route,
        metavar="NAMESPACE/NAME=PORT",
        help="admission webhook calls to this Service go to 127.0.0.1:PORT",
    )
    return parser.parse_args(argv)


def _route(text: str) -> tuple[str, str, int]:
    service, _, port = text.partition("=")
    namespace, _, name = service.partition("/")
    if not namespace or not name or not port.isdigit():
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected NAMESPACE/NAME=PORT, e.g. kube-system/hook=9443"
        )
    return namespace, name, int(port)


async def _main(args: argparse.Namespace) -> None:
    superuser = Identity.superuser(args.token)
    cluster = cluster_with_crds(args.crds, superuser=superuser)
    admission = MutatingAdmission(cluster)
    for namespace, name, port in args.route_service:
        admission.route_service(namespace, name, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    ready: asyncio.Future[str] = loop.create_future()
    context, ca_pem = None, None
    with tempfile.TemporaryDirectory(prefix="kubeemu-tls-") as scratch:
        if not args.no_tls:
            context, ca_file = tls_context(args.cert_dir or Path(scratch))
            ca_pem = ca_file.read_text()
        server = asyncio.create_task(
            serve_forever(
                cluster,
                host=args.host,
                port=args.port,
                stop=stop,
                ssl_context=context,
                bookmark_interval=args.bookmark_interval,
                ready=ready,
                admission=admission,
            )
        )
        url = await ready
        if args.kubeconfig is not None:
            write_kubeconfig(args.kubeconfig, kubeconfig_document(url, [("admin", superuser)], ca_pem=ca_pem))
        print(url, flush=True)
        await server


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    asyncio.run(_main(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
