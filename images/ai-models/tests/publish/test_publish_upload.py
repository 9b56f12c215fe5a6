"""Publishing an upload: single weights files and tar, tar.gz and zip archives from the store."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import stat
import struct
import tarfile
import zipfile
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ai_models.adapters.objectstore import ObjectStoreError
from ai_models.domain.artifacts.layout import upload_payload_key
from ai_models.domain.artifacts.sniff import ACCEPTED_DESCRIPTION, PayloadFormat
from ai_models.names import ModelReason, SourceType
from ai_models.publish.failures import store_failure, unexpected_failure
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


def test_a_zip_name_flagged_utf8_that_is_not_is_unsupported(kit: Kit) -> None:
    payload = bytearray(zip_of({"model.safetensors": WEIGHTS, "config.json": CONFIG}))
    directory_at = bytes(payload).index(b"PK\x01\x02")
    flags_at = directory_at + 8
    flags = int.from_bytes(payload[flags_at : flags_at + 2], "little") | 0x800
    payload[flags_at : flags_at + 2] = flags.to_bytes(2, "little")
    name_at = directory_at + 46
    payload[name_at] = 0xFF  # "model..." becomes "\xffodel...": not UTF-8
    digest = kit.stage_upload(bytes(payload), payload_format=PayloadFormat.ZIP)
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    assert kit.outcome(settings)["reason"] == ModelReason.UNSUPPORTED_SOURCE.value


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
    assert "tensor 'w': it has no valid dtype, shape and data_offsets" in result["message"]
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


# ----- hostile archives, in this process (test_archive_bombs.py runs bombs in a subprocess) -----

FORMATS = {
    "tar": PayloadFormat.TAR,
    "tar.gz": PayloadFormat.TAR_GZIP,
    "zip": PayloadFormat.ZIP,
}


def archive(kind: str, files: Mapping[str, bytes]) -> bytes:
    if kind == "zip":
        return zip_of(files)
    return tar_of(files, compressed=kind == "tar.gz")


def assert_no_store_location(kit: Kit, message: str) -> None:
    assert str(kit.store.root) not in message
    assert str(kit.tmp_path) not in message
    assert "artifacts/" not in message
    assert "uploads/" not in message


@pytest.mark.parametrize("kind", list(FORMATS))
@pytest.mark.parametrize("file_first", [True, False], ids=["file first", "directory first"])
def test_a_file_and_a_directory_of_one_name_are_unsupported_never_retried(
    kit: Kit, kind: str, file_first: bool
) -> None:
    members = [("weights", b"not a directory"), ("weights/model.safetensors", WEIGHTS)]
    files = dict(members if file_first else members[::-1])
    digest = kit.stage_upload(archive(kind, {**files, "config.json": CONFIG}), payload_format=FORMATS[kind])
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    outcome = kit.outcome(settings)
    assert outcome["reason"] == ModelReason.UNSUPPORTED_SOURCE.value
    assert outcome["retryable"] is False
    assert "'weights' as a file and 'weights/model.safetensors' under it" in outcome["message"]
    assert_no_store_location(kit, outcome["message"])
    assert kit.keys(digest) == []


def test_a_store_failure_says_what_failed_without_the_store_location(kit: Kit) -> None:
    digest = kit.stage_upload(archive("tar", MODEL_DIRECTORY), payload_format=PayloadFormat.TAR)
    (kit.store.root / "artifacts").write_bytes(b"a file where the artifacts directory belongs")
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    outcome = kit.outcome(settings)
    assert outcome["reason"] == ModelReason.PUBLICATION_FAILED.value
    assert outcome["retryable"] is True
    assert "(ENOTDIR)" in outcome["message"]
    assert_no_store_location(kit, outcome["message"])


def test_a_store_error_message_keeps_its_code_and_drops_the_endpoint() -> None:
    class ClientError(Exception):
        def __init__(self) -> None:
            super().__init__("secret bucket policy text")
            self.response = {"Error": {"Code": "AccessDenied", "Message": "secret bucket policy text"}}

    try:
        raise ObjectStoreError(
            "cannot write 'artifacts/x' (s3://bucket at https://user:pass@minio.local): AccessDenied"
        ) from ClientError()
    except ObjectStoreError as error:
        failure = store_failure(error)

    assert "(AccessDenied)" in failure.message
    assert "minio" not in failure.message
    assert "user:pass" not in failure.message
    assert "artifacts/x" not in failure.message


def test_an_unexpected_error_shows_its_type_not_its_text() -> None:
    failure = unexpected_failure(FileNotFoundError(2, "No such file", "/var/lib/store/artifacts/x"))

    assert "FileNotFoundError" in failure.message
    assert "/var/lib" not in failure.message
    assert failure.retryable is True


def test_a_zip_member_shorter_than_its_declared_size_is_unsupported(kit: Kit) -> None:
    payload = bytearray(zip_of({"model.safetensors": WEIGHTS, "config.json": CONFIG}))
    # Both headers of the weights declare 100 bytes more than the deflate stream holds; the CRC
    # still matches what it does hold, so only the length tells.
    for signature, size_at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = payload.find(signature)
        declared = int.from_bytes(payload[at + size_at : at + size_at + 4], "little") + 100
        payload[at + size_at : at + size_at + 4] = declared.to_bytes(4, "little")
    digest = kit.stage_upload(bytes(payload), payload_format=PayloadFormat.ZIP)
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    outcome = kit.outcome(settings)
    assert outcome["reason"] == ModelReason.UNSUPPORTED_SOURCE.value
    assert "member 'model.safetensors' holds" in outcome["message"]
    assert "its directory entry says" in outcome["message"]


def test_a_zip_shorter_than_its_end_record_is_unsupported(kit: Kit) -> None:
    digest = kit.stage_upload(b"PK\x03\x04\x14\x00", payload_format=PayloadFormat.ZIP)
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    assert kit.outcome(settings)["reason"] == ModelReason.UNSUPPORTED_SOURCE.value


# Damaged bytes anywhere: a tar (plain or compressed after the damage) or a zip with some bytes
# overwritten, cut short or grown, must end Published or UnsupportedSource, never in a crash.
_TAR = tar_of(MODEL_DIRECTORY)
_ZIP = zip_of(MODEL_DIRECTORY, compression=zipfile.ZIP_DEFLATED)


@st.composite
def damaged(draw: st.DrawFn, original: bytes) -> bytes:
    data = bytearray(original)
    for _damage in range(draw(st.integers(min_value=1, max_value=4))):
        at = draw(st.integers(min_value=0, max_value=max(0, len(data) - 1)))
        how = draw(st.sampled_from(["overwrite", "cut", "insert"]))
        if how == "overwrite":
            data[at : at + 8] = draw(st.binary(min_size=1, max_size=8))
        elif how == "cut":
            del data[at:]
        else:
            data[at:at] = draw(st.binary(min_size=1, max_size=600))
    return bytes(data)


def _publish_damaged(kit: Kit, payload: bytes, payload_format: PayloadFormat) -> None:
    if not payload:
        return
    digest = kit.stage_upload(payload, payload_format=payload_format)
    settings = kit.upload_settings(digest)

    kit.run(settings)

    outcome = kit.outcome(settings)
    assert outcome["reason"] in (
        ModelReason.ARTIFACT_PUBLISHED.value,
        ModelReason.UNSUPPORTED_SOURCE.value,
    ), outcome["message"]
    assert outcome["retryable"] is False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=damaged(_TAR), compressed=st.booleans())
def test_any_damaged_tar_is_published_or_unsupported(kit: Kit, payload: bytes, compressed: bool) -> None:
    if compressed:
        _publish_damaged(kit, gzip.compress(payload), PayloadFormat.TAR_GZIP)
    elif payload[257:262] == b"ustar":  # what the upload API would receive as a tar
        _publish_damaged(kit, payload, PayloadFormat.TAR)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=damaged(_ZIP))
def test_any_damaged_zip_is_published_or_unsupported(kit: Kit, payload: bytes) -> None:
    if payload.startswith(b"PK\x03\x04"):
        _publish_damaged(kit, payload, PayloadFormat.ZIP)


def test_a_gzip_stream_of_two_members_is_read_as_one(kit: Kit) -> None:
    tar = tar_of(MODEL_DIRECTORY)
    payload = gzip.compress(tar[:1024]) + gzip.compress(tar[1024:])
    digest = kit.stage_upload(payload, payload_format=PayloadFormat.TAR_GZIP)
    settings = kit.upload_settings(digest)

    kit.run(settings)

    assert kit.outcome(settings)["reason"] == ModelReason.ARTIFACT_PUBLISHED.value
    assert sorted(item.path for item in kit.manifest(digest).files) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    ]


# ----- weights that are not what they claim -----------------------------------------------------

NINETY_FIVE_BYTES = (
    struct.pack("<Q", 77)
    + b'{"weight":{"dtype":"F32","shape":[1000000000],"data_offsets":[0,4000000000]}}'
    + bytes(10)
)
EIGHTY_EIGHT_BYTES = (
    b"GGUF" + struct.pack("<IQQ", 3, 2, 3) + bytes((index * 73 + 41) % 256 for index in range(64))
)


@pytest.mark.parametrize(
    ("payload", "payload_format", "filename", "message"),
    [
        (
            NINETY_FIVE_BYTES,
            PayloadFormat.SAFETENSORS,
            "model.safetensors",
            "the tensors take 4000000000 bytes",
        ),
        (EIGHTY_EIGHT_BYTES, PayloadFormat.GGUF, "model.gguf", "not a valid GGUF file"),
    ],
    ids=["95-byte safetensors", "88-byte GGUF"],
)
def test_weights_whose_header_lies_about_the_file_are_unsupported_not_ready(
    kit: Kit, payload: bytes, payload_format: PayloadFormat, filename: str, message: str
) -> None:
    assert len(payload) in (95, 88)
    digest = kit.stage_upload(payload, payload_format=payload_format, filename=filename)
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    outcome = kit.outcome(settings)
    assert outcome["reason"] == ModelReason.UNSUPPORTED_SOURCE.value
    assert outcome["retryable"] is False
    assert message in outcome["message"]
    assert not kit.has_manifest(digest)


def test_lying_weights_inside_an_archive_are_unsupported(kit: Kit) -> None:
    digest = kit.stage_upload(
        tar_of({"config.json": CONFIG, "model.safetensors": NINETY_FIVE_BYTES}),
        payload_format=PayloadFormat.TAR,
    )
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_FAILED

    assert kit.outcome(settings)["reason"] == ModelReason.UNSUPPORTED_SOURCE.value
    assert kit.keys(digest) == []


def test_a_tar_gz_whose_first_folder_repeats_its_name_keeps_it_when_another_entry_follows(kit: Kit) -> None:
    # `a/a` is stored as `a` while `a/` looks like the wrapper; the weights outside it put `a` back
    # at `a/a`, where the file `a` itself stands.
    payload = tar_of({"a/a": b"first", "a/a.json": b"{}", "model.safetensors": WEIGHTS}, compressed=True)
    digest = kit.stage_upload(payload, payload_format=PayloadFormat.TAR_GZIP)
    settings = kit.upload_settings(digest)

    assert kit.run(settings) == EXIT_PUBLISHED, kit.outcome(settings)["message"]

    assert files_of(kit, digest) == {"a/a": b"first", "a/a.json": b"{}", "model.safetensors": WEIGHTS}
    assert not any(key.startswith("files/_unwrapping") for key in kit.keys(digest))
