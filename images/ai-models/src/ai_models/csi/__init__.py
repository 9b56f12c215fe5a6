"""The Container Storage Interface's Identity and Node services (`csi.v1`), generated from csi.proto.

Import `ai_models.csi.csi_pb2` (messages) and `ai_models.csi.csi_pb2_grpc` (stubs, servicers). The
modules are generated (tests/csi/codegen.py) and committed; csi.proto says which part of the
specification they hold.
"""
