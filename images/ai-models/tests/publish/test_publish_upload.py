"""Publishing an upload: single weights files and tar, tar.gz and zip archives from the store."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import stat
import tarfile
import zipfile
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pytest

from ai_models.domain.artifacts.layout import upload_payload_key
from ai_models.domain.artifacts.sniff import ACCEPTED_DESCRIPTION, PayloadFormat
from ai_models.names import ModelReason, SourceType
from ai_models.publish.main import EXIT_FAILED, EXIT_PUBLISHED
from fakes.model_files import MIB, TINY_GGUF_PARAMETERS, safetensors_bytes, tiny_gguf

if TYPE_CHECKING:
    from publish.conftest import Kit

CONFIG = json.dumps(
    {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": 32768,
        "vocab_size": 50,
        "torch_dtype": "bfloat16",
    }
).encode()
WEIGHTS = safetensors_bytes({"embed": ("BF16", (50, 32)), "norm": ("F32", (32,))})
MODEL_DIRECTORY: Mapping[str, bytes] = {
    "config.json": CONFIG,
    "model.safetensors": WEIGHTS,
    "tokenizer.json": b'{"version": "1.0"}',
    "train.py": b"print('left out')\n",
}


def tar_of(
    files: Mapping[str, bytes],
    *,
    compressed: bool = False,
    symlinks: Mapping[str, str] | None = None,
    hardlinks: Mapping[str, str] | None = None,
    devices: tuple[str, ...] = (),
    directories: tuple[str, ...] = (),
) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if compressed else "w") as tar:
        for name in directories:
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
        for name, target in (hardlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.LNKTYPE, target
            tar.addfile(info)
        for name in devices:
            info = tarfile.TarInfo(name)
            info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
            tar.addfile(info)
    return buffer.getvalue()


def zip_of(
    files: Mapping[str, bytes],
    *,
    symlinks: Mapping[str, str] | None = None,
    encrypted: tuple[str, ...] = (),
    compression: int = zipfile.ZIP_DEFLATED,
) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in {**files, **dict.fromkeys(encrypted, b"ciphertext")}.items():
            archive.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    patched = bytearray(buffer.getvalue())
    # zipfile cannot encrypt; set the "encrypted" flag in both headers of these members by hand.
    for name in encrypted:
        encoded = name.encode()
        local = _header_of(patched, b"PK\x03\x04", 30, 26, encoded)
        patched[local + 6] |= 0x1
        central = _header_of(patched, b"PK\x01\x02", 46, 28, encoded)
        patched[central + 8] |= 0x1
    return bytes(patched)


def _header_of(data: bytearray, signature: bytes, fixed: int, name_length_at: int, name: bytes) -> int:
    """The offset of the zip header with `signature` that names `name`."""
    at = data.find(signature)
    while at >= 0:
        length = int.from_bytes(data[at + name_length_at : at + name_length_at + 2], "little")
        if data[at + fixed : at + fixed + length] == name:
            return at
        at = data.find(signature, at + 1)
    raise AssertionError(f"no header for {name!r}")


def files_of(kit: Kit, digest: str) -> dict[str, bytes]:
    return {item.path: kit.file_bytes(digest, item.path) for item in kit.manifest(digest).files}


def test_a_gguf_upload_becomes_one_file_under_its_safe_name(kit: Kit) -> None:
    data = tiny_gguf(context_length=4096, file_type=15)
    digest = kit.stage_upload(data, payload_format=PayloadFormat.GGUF, filename="Tiny-Q4_K_M.gguf")
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_PUBLISHED

    published = kit.manifest(digest)
    assert files_of(kit, digest) == {"Tiny-Q4_K_M.gguf": data}
    assert published.source.type is SourceType.UPLOAD
    assert published.source.upload_sha256 == published.files[0].sha256
    assert published.resolved["format"] == "GGUF"
    assert published.resolved["parameterCount"] == TINY_GGUF_PARAMETERS
    assert published.resolved["contextWindowTokens"] == 4096
    assert published.resolved["quantization"] == "Q4_K_M"
    assert published.resolved["supportedEndpointTypes"] == ["Chat", "TextGeneration"]
    assert kit.outcome(settings)["reason"] == "ArtifactPublished"


@pytest.mark.parametrize(
    ("filename", "stored"),
    [("../../etc/model.gguf", "model.gguf"), ("with space.gguf", "model.gguf"), ("weights", "weights.gguf")],
)
def test_an_unsafe_upload_name_is_replaced(kit: Kit, filename: str, stored: str) -> None:
    digest = kit.stage_upload(tiny_gguf(), payload_format=PayloadFormat.GGUF, filename=filename)

    assert kit.run(kit.upload_settings(digest)) == EXIT_PUBLISHED

    assert list(files_of(kit, digest)) == [stored]


def test_a_safetensors_upload_gets_exact_element_counts(kit: Kit) -> None:
    digest = kit.stage_upload(WEIGHTS, payload_format=PayloadFormat.SAFETENSORS, filename="model.safetensors")

    assert kit.run(kit.upload_settings(digest)) == EXIT_PUBLISHED

    resolved = kit.manifest(digest).resolved
    assert resolved["format"] == "Safetensors"
    assert resolved["parameterCount"] == 50 * 32 + 32
    assert resolved["resources"]["weightsBytes"] == 50 * 32 * 2 + 32 * 4
    assert "contextWindowTokens" not in resolved  # no config: the profile stays partial


@pytest.mark.parametrize("compressed", [False, True], ids=["tar", "tar.gz"])
def test_a_tarred_folder_is_unpacked_without_its_folder(kit: Kit, compressed: bool) -> None:
    payload = tar_of(
        {f"qwen-tiny/{name}": data for name, data in MODEL_DIRECTORY.items()},
        compressed=compressed,
        directories=("qwen-tiny/",),
    )
    digest = kit.stage_upload(
        payload, payload_format=PayloadFormat.TAR_GZIP if compressed else PayloadFormat.TAR
    )

    assert kit.run(kit.upload_settings(digest)) == EXIT_PUBLISHED

    assert files_of(kit, digest) == {
        name: data for name, data in MODEL_DIRECTORY.items() if name != "train.py"
    }
    # A plain tar's members are copied inside the store while hashed: the manifest holds their sha256.
    assert {item.path: item.sha256 for item in kit.manifest(digest).files} == {
        name: hashlib.sha256(data).hexdigest() for name, data in MODEL_DIRECTORY.items() if name != "train.py"
    }
    resolved = kit.manifest(digest).resolved
    assert resolved["family"] == "qwen2"
    assert resolved["contextWindowTokens"] == 32768
    assert resolved["parameterCount"] == 50 * 32 + 32


@pytest.mark.parametrize("compressed", [False, True], ids=["tar", "tar.gz"])
def test_unsafe_and_special_tar_members_are_skipped(kit: Kit, compressed: bool) -> None:
    payload = tar_of(
        {
            **MODEL_DIRECTORY,
            "../escape.json": b"{}",
            "/etc/passwd": b"root:x:0:0",
            "sub/../../up.json": b"{}",
            ".git/config": b"[core]",
        },
        compressed=compressed,
        symlinks={"link.json": "/etc/shadow", "weights-link.safetensors": "model.safetensors"},
        hardlinks={"hard.json": "config.json"},
        devices=("null.json",),
    )
    digest = kit.stage_upload(
        payload, payload_format=PayloadFormat.TAR_GZIP if compressed else PayloadFormat.TAR
    )

    assert kit.run(kit.upload_settings(digest)) == EXIT_PUBLISHED

    assert sorted(files_of(kit, digest)) == ["config.json", "model.safetensors", "tokenizer.json"]
    assert all(".." not in key and "passwd" not in key for key in kit.keys(digest))


def test_a_zip_is_unpacked_with_random_access_and_unsafe_members_skipped(kit: Kit) -> None:
    payload = zip_of(
        {
            **{f"model/{name}": data for name, data in MODEL_DIRECTORY.items()},
            "model/../../escape.json": b"{}",
            "/abs/path.json": b"{}",
        },
        symlinks={"model/link.json": "/etc/passwd"},
        encrypted=("model/secret.json",),
    )
    digest = kit.stage_upload(payload, payload_format=PayloadFormat.ZIP)

    assert kit.run(kit.upload_settings(digest)) == EXIT_PUBLISHED

    # The unsafe members lie outside `model/`, yet they are not files of the model: the folder goes.
    assert files_of(kit, digest) == {
        name: data for name, data in MODEL_DIRECTORY.items() if name != "train.py"
    }


def test_a_stored_zip_keeps_large_members_byte_exact(kit: Kit) -> None:
    big = safetensors_bytes({"w": ("F16", (3 * MIB,))})
    payload = zip_of({"model.safetensors": big, "config.json": CONFIG}, compression=zipfile.ZIP_STORED)
    digest = kit.stage_upload(payload, payload_format=PayloadFormat.ZIP)

    assert kit.run(kit.upload_settings(digest)) == EXIT_PUBLISHED

    assert files_of(kit, digest)["model.safetensors"] == big


@pytest.mark.parametrize(
    ("payload_format", "payload"),
    [
        (PayloadFormat.TAR, tar_of({"README.md": b"# no weights", "model.bin": b"pickle"})),
        (PayloadFormat.TAR_GZIP, tar_of({"README.md": b"# no weights", "x.onnx": b"onnx"}, compressed=True)),
        (PayloadFormat.ZIP, zip_of({"README.md": b"# no weights", "pytorch_model.bin": b"pickle"})),
    ],
    ids=["tar", "tar.gz", "zip"],
)
def test_an_archive_without_weights_is_unsupported_and_leaves_nothing(
    kit: Kit, payload_format: PayloadFormat, payload: bytes
) -> None:
    digest = kit.stage_upload(payload, payload_format=payload_format)
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.UNSUPPORTED_SOURCE.value
    assert result["retryable"] is False
    assert "no safetensors or GGUF weights" in result["message"]
    assert ACCEPTED_DESCRIPTION in result["message"]
    assert kit.keys(digest) == []


@pytest.mark.parametrize("compressed", [False, True], ids=["tar", "tar.gz"])
def test_one_weights_format_is_kept(kit: Kit, compressed: bool) -> None:
    payload = tar_of(
        {**MODEL_DIRECTORY, "model-Q4_K_M.gguf": tiny_gguf(), "model-Q8_0.gguf": tiny_gguf(file_type=7)},
        compressed=compressed,
    )
    digest = kit.stage_upload(
        payload, payload_format=PayloadFormat.TAR_GZIP if compressed else PayloadFormat.TAR
    )

    assert kit.run(kit.upload_settings(digest)) == EXIT_PUBLISHED

    assert sorted(files_of(kit, digest)) == ["config.json", "model.safetensors", "tokenizer.json"]
    assert kit.keys(digest) == [
        "files/config.json",
        "files/model.safetensors",
        "files/tokenizer.json",
        "manifest.json",
    ]


def test_a_tar_gz_whose_folder_is_not_alone_keeps_it(kit: Kit) -> None:
    # The first member suggests a wrapping folder; a later one at the top level proves otherwise.
    payload = tar_of(
        {"model/config.json": CONFIG, "model/model.safetensors": WEIGHTS, "tokenizer.json": b"{}"},
        compressed=True,
    )
    digest = kit.stage_upload(payload, payload_format=PayloadFormat.TAR_GZIP)

    assert kit.run(kit.upload_settings(digest)) == EXIT_PUBLISHED

    assert files_of(kit, digest) == {
        "model/config.json": CONFIG,
        "model/model.safetensors": WEIGHTS,
        "tokenizer.json": b"{}",
    }


def test_an_archive_bomb_is_refused(kit: Kit) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("model.safetensors")
        info.size = 300 * MIB
        tar.addfile(info, _Zeros(info.size))
    digest = kit.stage_upload(buffer.getvalue(), payload_format=PayloadFormat.TAR_GZIP)
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.UNSUPPORTED_SOURCE.value
    assert "expands to more than" in result["message"]
    assert kit.keys(digest) == []


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        super().__init__()
        self._left = size

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        count = self._left if size is None or size < 0 else min(size, self._left)
        self._left -= count
        return bytes(count)


def cut_between_members(tar: bytes) -> bytes:
    """The tar up to the header of its last member: every member left is whole."""
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        return tar[: archive.getmembers()[-1].offset]


@pytest.mark.parametrize(
    ("payload_format", "payload"),
    [
        (PayloadFormat.TAR_GZIP, gzip.compress(tar_of(MODEL_DIRECTORY))[:-400]),
        (PayloadFormat.TAR_GZIP, gzip.compress(cut_between_members(tar_of(MODEL_DIRECTORY)))),
        (PayloadFormat.TAR, cut_between_members(tar_of(MODEL_DIRECTORY))),
        (PayloadFormat.TAR, tar_of(MODEL_DIRECTORY)[: len(tar_of(MODEL_DIRECTORY)) // 2]),
        (PayloadFormat.ZIP, zip_of(MODEL_DIRECTORY)[:-30]),
    ],
    ids=[
        "truncated tar.gz",
        "tar.gz cut between members",
        "tar cut between members",
        "truncated tar",
        "truncated zip",
    ],
)
def test_a_damaged_archive_is_unsupported(kit: Kit, payload_format: PayloadFormat, payload: bytes) -> None:
    digest = kit.stage_upload(payload, payload_format=payload_format)
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.UNSUPPORTED_SOURCE.value
    assert ACCEPTED_DESCRIPTION in result["message"]
    assert kit.keys(digest) == []


def test_a_zip_member_that_fails_its_crc_is_unsupported(kit: Kit) -> None:
    payload = bytearray(
        zip_of({"model.safetensors": WEIGHTS, "config.json": CONFIG}, compression=zipfile.ZIP_STORED)
    )
    at = bytes(payload).index(WEIGHTS[-64:])
    payload[at] ^= 0xFF  # the central directory still says the old CRC
    digest = kit.stage_upload(bytes(payload), payload_format=PayloadFormat.ZIP)
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    assert kit.outcome(settings)["reason"] == ModelReason.UNSUPPORTED_SOURCE.value
    assert "CRC" in kit.outcome(settings)["message"]


def test_content_that_is_not_what_the_record_says_is_unsupported(kit: Kit) -> None:
    digest = kit.stage_upload(
        zip_of(MODEL_DIRECTORY), payload_format=PayloadFormat.GGUF, filename="model.gguf"
    )
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.UNSUPPORTED_SOURCE.value
    assert "Zip" in result["message"]
    assert "GGUF" in result["message"]


def test_invalid_safetensors_content_is_unsupported(kit: Kit) -> None:
    header = b'{"w": {"dtype": "BF16", "shape": "big", "data_offsets": [0, 2]}}'
    payload = len(header).to_bytes(8, "little") + header + b"\x00\x00"
    digest = kit.stage_upload(payload, payload_format=PayloadFormat.SAFETENSORS, filename="model.safetensors")
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.UNSUPPORTED_SOURCE.value
    assert "model.safetensors" in result["message"]
    assert "dtype and shape" in result["message"]
    assert kit.keys(digest) == []


def test_a_payload_changed_in_the_store_is_damaged(kit: Kit) -> None:
    digest = kit.stage_upload(tiny_gguf(), payload_format=PayloadFormat.GGUF, filename="model.gguf")
    kit.store.put_bytes(upload_payload_key(kit.owner), tiny_gguf(file_type=7))  # same size, other bytes
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.ARTIFACT_DAMAGED.value
    assert "upload the model again" in result["message"]
    assert kit.keys(digest) == []


def test_an_upload_without_its_record_is_source_not_found(kit: Kit) -> None:
    settings = kit.upload_settings("sha256:" + "ab" * 32)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.SOURCE_NOT_FOUND.value
    assert "status.upload" in result["message"]
    assert "team-a/tiny" in result["message"]


def test_a_payload_shorter_than_received_is_damaged(kit: Kit) -> None:
    data = tiny_gguf()
    digest = kit.stage_upload(data, payload_format=PayloadFormat.GGUF, filename="model.gguf")
    kit.store.put_bytes(upload_payload_key(kit.owner), data[:-100])
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    assert kit.outcome(settings)["reason"] == ModelReason.ARTIFACT_DAMAGED.value
    assert kit.outcome(settings)["retryable"] is False


def test_a_record_without_its_payload_is_source_not_found(kit: Kit) -> None:
    digest = kit.stage_upload(tiny_gguf(), payload_format=PayloadFormat.GGUF, filename="model.gguf")
    kit.store.delete(upload_payload_key(kit.owner))
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    assert kit.outcome(settings)["reason"] == ModelReason.SOURCE_NOT_FOUND.value
    assert "upload the model again" in kit.outcome(settings)["message"]
