"""The gRPC server of the CSI services on a unix socket.

kubelet and the node-driver-registrar are the only clients, on the node itself; requests are tiny,
so messages are capped at 4 MiB, the handler pool is small and calls past `MAX_CONCURRENT_RPCS`
are refused with RESOURCE_EXHAUSTED instead of queueing without bound (kubelet retries them). A
socket file left by a previous process is removed first: binding would fail on it otherwise.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import stat
from pathlib import Path
from typing import Final

import grpc

from ai_models.csi import csi_pb2_grpc
from ai_models.nodecache.identity import IdentityService
from ai_models.nodecache.node import NodeService

log = logging.getLogger(__name__)

UNIX_SCHEME: Final = "unix://"
MAX_MESSAGE_BYTES: Final = 4 * 1024 * 1024
# A NodePublish may wait (the publish wait) for a download: enough handlers that a few waiting
# calls do not hold up a cache hit or an unpublish.
HANDLERS: Final = 16
MAX_CONCURRENT_RPCS: Final = 64
STOP_GRACE_SECONDS: Final = 5.0
# The longest unix socket path gRPC binds (measured with grpcio 1.85: sun_path holds 108 bytes, gRPC
# refuses 106 and more); a longer one would only fail later, inside the server, with gRPC's words.
MAX_SOCKET_PATH_BYTES: Final = 105


def socket_path(endpoint: str) -> Path:
    """`unix:///csi/csi.sock` -> /csi/csi.sock (the only form kubelet's registrar passes)."""
    if not endpoint.startswith(UNIX_SCHEME) or not endpoint[len(UNIX_SCHEME) :].startswith("/"):
        raise ValueError(f"--csi-endpoint {endpoint!r} must be unix:///<absolute path of the socket>")
    path = endpoint[len(UNIX_SCHEME) :]
    if len(path.encode()) > MAX_SOCKET_PATH_BYTES:
        raise ValueError(
            f"--csi-endpoint {endpoint!r}: a unix socket path may have at most {MAX_SOCKET_PATH_BYTES} "
            f"bytes, this one has {len(path.encode())}; choose a shorter path"
        )
    return Path(path)


class CsiServer:
    def __init__(self, *, endpoint: str, identity: IdentityService, node: NodeService) -> None:
        self._path = socket_path(endpoint)
        self._server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(max_workers=HANDLERS, thread_name_prefix="csi"),
            maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ],
        )
        csi_pb2_grpc.add_IdentityServicer_to_server(identity, self._server)
        csi_pb2_grpc.add_NodeServicer_to_server(node, self._server)
        self.listening = False

    @property
    def path(self) -> Path:
        return self._path

    def start(self) -> CsiServer:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_socket(self._path)
        self._server.add_insecure_port(f"{UNIX_SCHEME}{self._path}")
        self._server.start()
        # kubelet and the registrar run as root; nobody else on the node needs the socket.
        os.chmod(self._path, 0o660)
        self.listening = True
        log.info("serving CSI", extra={"socket": str(self._path)})
        return self

    def stop(self, *, grace: float = STOP_GRACE_SECONDS) -> None:
        """Refuse new calls, let running ones finish for `grace` seconds, then cancel them."""
        self.listening = False
        self._server.stop(grace).wait()
        _remove_stale_socket(self._path)


def _remove_stale_socket(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ValueError(f"{path} exists and is not a socket: remove it or choose another --csi-endpoint")
    path.unlink()
