"""The committed CSI modules are exactly what csi.proto generates, and they speak the spec's wire names."""

from __future__ import annotations

import pathlib

from google.protobuf.message import Message

from ai_models.csi import csi_pb2
from csi.codegen import GENERATED, PROTO, SOURCE_ROOT, generate


def test_committed_modules_are_the_generated_ones(tmp_path: pathlib.Path) -> None:
    generate(tmp_path)
    committed = SOURCE_ROOT / PROTO.parent
    stale = [name for name in GENERATED if (tmp_path / name).read_bytes() != (committed / name).read_bytes()]
    assert not stale, (
        f"{stale} in {committed} differ from what {PROTO} generates: "
        "run `.venv/bin/python tests/csi/codegen.py` and commit the result"
    )


def test_services_carry_the_specifications_full_names() -> None:
    # kubelet and csi-sanity call `/csi.v1.Node/NodePublishVolume`: the package and names are the wire.
    services = csi_pb2.DESCRIPTOR.services_by_name
    assert services["Identity"].full_name == "csi.v1.Identity"
    assert [m.name for m in services["Node"].methods] == [
        "NodeStageVolume",
        "NodeUnstageVolume",
        "NodePublishVolume",
        "NodeUnpublishVolume",
        "NodeGetVolumeStats",
        "NodeExpandVolume",
        "NodeGetCapabilities",
        "NodeGetInfo",
    ]


def test_field_numbers_are_the_specifications() -> None:
    # A few numbers a typo would break silently (v1.12.0): the spec moved capabilities 2 -> 1 in v1.
    def numbers(message: type[Message]) -> dict[str, int]:
        return {field.name: field.number for field in message.DESCRIPTOR.fields}

    assert numbers(csi_pb2.GetPluginCapabilitiesResponse) == {"capabilities": 1}
    assert numbers(csi_pb2.NodePublishVolumeRequest) == {
        "volume_id": 1,
        "publish_context": 2,
        "staging_target_path": 3,
        "target_path": 4,
        "volume_capability": 5,
        "readonly": 6,
        "secrets": 7,
        "volume_context": 8,
    }
    assert numbers(csi_pb2.NodeUnpublishVolumeRequest) == {"volume_id": 1, "target_path": 2}
    assert numbers(csi_pb2.NodeGetInfoResponse) == {
        "node_id": 1,
        "max_volumes_per_node": 2,
        "accessible_topology": 3,
    }
    assert numbers(csi_pb2.VolumeCapability) == {"block": 1, "mount": 2, "access_mode": 3}
