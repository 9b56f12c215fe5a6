"""The CSI Identity service: the driver's name and version, no controller, ready with its cache."""

from __future__ import annotations

from collections.abc import Callable

import grpc
from google.protobuf import wrappers_pb2

from ai_models import __version__
from ai_models.csi import csi_pb2, csi_pb2_grpc
from ai_models.names import NODE_CACHE_DRIVER


class IdentityService(csi_pb2_grpc.IdentityServicer):
    """`ready` says whether the cache root is usable: kubelet and the registrar's probe wait on it."""

    def __init__(self, *, ready: Callable[[], bool]) -> None:
        self._ready = ready

    def GetPluginInfo(  # noqa: N802  (the CSI method name)
        self, request: csi_pb2.GetPluginInfoRequest, context: grpc.ServicerContext
    ) -> csi_pb2.GetPluginInfoResponse:
        return csi_pb2.GetPluginInfoResponse(name=NODE_CACHE_DRIVER, vendor_version=__version__)

    def GetPluginCapabilities(  # noqa: N802  (the CSI method name)
        self, request: csi_pb2.GetPluginCapabilitiesRequest, context: grpc.ServicerContext
    ) -> csi_pb2.GetPluginCapabilitiesResponse:
        # A node-only plugin of inline ephemeral volumes: no controller service, no topology (the
        # controller places pods with a node label instead), no expansion.
        return csi_pb2.GetPluginCapabilitiesResponse()

    def Probe(  # noqa: N802  (the CSI method name)
        self, request: csi_pb2.ProbeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.ProbeResponse:
        return csi_pb2.ProbeResponse(ready=wrappers_pb2.BoolValue(value=self._ready()))
