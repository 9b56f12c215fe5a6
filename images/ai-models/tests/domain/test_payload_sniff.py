"""Uploads are judged by content: real archives and weight files are recognised from their first
bytes, everything else is refused, and user-supplied names become safe relative paths."""

from __future__ import annotations

import gzip
import io
import json
import posixpath
import struct
import tarfile
import zipfile

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ai_models.domain.artifacts.sniff import (
    MAX_PATH_CHARS,
    MAX_SAFETENSORS_HEADER,
    SNIFF_BYTES,
    PayloadFormat,
    default_filename,
    safe_filename,
    safe_member_path,
    sniff,
)

BOUNDED = settings(max_examples=500, deadline=None)


def tar_bytes(tar_format: int = tarfile.PAX_FORMAT) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tar_format) as archive:
        content = b'{"architectures": ["LlamaForCausalLM"]}'
        member = tarfile.TarInfo("model/config.json")
        member.size = len(content)
        archive.addfile(member, io.BytesIO(content))
    return buffer.getvalue()


def zip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("model/config.json", '{"architectures": ["LlamaForCausalLM"]}')
    return buffer.getvalue()


def safetensors_bytes() -> bytes:
    header = json.dumps(
        {"__metadata__": {"format": "pt"}, "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    ).encode()
    return struct.pack("<Q", len(header)) + header + struct.pack("<2f", 1.0, 2.0)


def gguf_bytes() -> bytes:
    # magic, version 3, tensor count, metadata key/value count: the start of every GGUF v3 file.
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 0)


def head(data: bytes) -> bytes:
    return data[:SNIFF_BYTES]


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        pytest.param(gguf_bytes(), PayloadFormat.GGUF, id="gguf"),
        pytest.param(safetensors_bytes(), PayloadFormat.SAFETENSORS, id="safetensors"),
        pytest.param(tar_bytes(), PayloadFormat.TAR, id="tar-pax"),
        pytest.param(tar_bytes(tarfile.GNU_FORMAT), PayloadFormat.TAR, id="tar-gnu"),
        pytest.param(tar_bytes(tarfile.USTAR_FORMAT), PayloadFormat.TAR, id="tar-ustar"),
        pytest.param(gzip.compress(tar_bytes()), PayloadFormat.TAR_GZIP, id="tar-gzip"),
        pytest.param(zip_bytes(), PayloadFormat.ZIP, id="zip"),
    ],
)
def test_real_payloads_are_recognised(payload: bytes, expected: PayloadFormat) -> None:
    assert sniff(head(payload)) is expected
    assert sniff(payload) is expected  # more than SNIFF_BYTES changes nothing


def test_the_real_files_are_what_the_test_claims() -> None:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(gzip.compress(tar_bytes())))) as archive:
        assert archive.getnames() == ["model/config.json"]
    with zipfile.ZipFile(io.BytesIO(zip_bytes())) as archive:
        assert archive.namelist() == ["model/config.json"]
    data = safetensors_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    assert json.loads(data[8 : 8 + length])["w"]["data_offsets"] == [0, 8]


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"GGU", id="truncated-gguf-magic"),
        pytest.param(b"gguf" + bytes(20), id="lowercase-gguf"),
        pytest.param(b"<!DOCTYPE html><html><head><title>404</title></head></html>", id="html"),
        pytest.param(b"<html><body>Access denied</body></html>", id="html-plain"),
        pytest.param(b'{"error": "Repository not found", "status": 404}', id="json-object"),
        pytest.param(b'[{"architectures": ["LlamaForCausalLM"]}]', id="json-array"),
        pytest.param(
            b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 1\n", id="lfs-pointer"
        ),
        pytest.param(b"\x7fELF\x02\x01\x01" + bytes(100), id="elf"),
        pytest.param(b"PK\x05\x06" + bytes(18), id="empty-zip"),
        pytest.param(b"\x80\x02}q\x00" + bytes(40), id="pickle"),
        pytest.param(b"\x00" * 1024, id="zeros"),
        pytest.param(struct.pack("<Q", 1) + b"{}", id="safetensors-header-too-short"),
        pytest.param(struct.pack("<Q", MAX_SAFETENSORS_HEADER + 1) + b"{}", id="safetensors-header-too-long"),
        pytest.param(struct.pack("<Q", 2) + b"[]", id="safetensors-header-not-an-object"),
        pytest.param(struct.pack("<Q", 2), id="safetensors-length-only"),
        pytest.param(tar_bytes()[:261], id="tar-cut-before-magic"),
        pytest.param(bytes(257) + b"USTAR" + bytes(100), id="uppercase-ustar"),
    ],
)
def test_anything_else_is_refused(payload: bytes) -> None:
    assert sniff(head(payload)) is None


def test_a_gguf_name_on_an_html_page_does_not_make_it_a_model() -> None:
    page = b"<!doctype html>\n<title>Sign in</title>" + b" " * 600
    assert sniff(head(page)) is None
    assert safe_filename("llama.Q4_K_M.gguf", PayloadFormat.GGUF) == "llama.Q4_K_M.gguf"  # the name alone


def test_the_safetensors_header_limits_are_inclusive() -> None:
    assert sniff(struct.pack("<Q", 2) + b"{}") is PayloadFormat.SAFETENSORS
    assert sniff(struct.pack("<Q", MAX_SAFETENSORS_HEADER) + b"{") is PayloadFormat.SAFETENSORS


def test_the_tar_magic_is_read_at_its_offset() -> None:
    assert SNIFF_BYTES >= 262
    assert sniff(bytes(257) + b"ustar" + bytes(250)) is PayloadFormat.TAR
    assert sniff(bytes(256) + b"ustar" + bytes(250)) is None


EXPECTED_DEFAULTS = {
    PayloadFormat.GGUF: "model.gguf",
    PayloadFormat.SAFETENSORS: "model.safetensors",
    # An archive is unpacked; its recorded name only has to say what it was.
    PayloadFormat.TAR: "upload.tar",
    PayloadFormat.TAR_GZIP: "upload.tar.gz",
    PayloadFormat.ZIP: "upload.zip",
}


@pytest.mark.parametrize("payload_format", list(PayloadFormat))
def test_default_file_names_match_the_content(payload_format: PayloadFormat) -> None:
    name = default_filename(payload_format)
    assert name == EXPECTED_DEFAULTS[payload_format]
    assert safe_filename(None, payload_format) == name
    assert safe_filename("", payload_format) == name


@pytest.mark.parametrize(
    ("name", "payload_format", "expected"),
    [
        ("llama-3.2-1b.Q4_K_M.gguf", PayloadFormat.GGUF, "llama-3.2-1b.Q4_K_M.gguf"),
        ("Model.GGUF", PayloadFormat.GGUF, "Model.GGUF"),
        ("model", PayloadFormat.GGUF, "model.gguf"),
        ("model.safetensors", PayloadFormat.GGUF, "model.safetensors.gguf"),
        ("model.gguf", PayloadFormat.SAFETENSORS, "model.gguf.safetensors"),
        (
            "diffusion_pytorch_model.safetensors",
            PayloadFormat.SAFETENSORS,
            "diffusion_pytorch_model.safetensors",
        ),
        ("/home/user/models/llama.gguf", PayloadFormat.GGUF, "llama.gguf"),
        ("../../etc/passwd", PayloadFormat.GGUF, "passwd.gguf"),
        ("C:\\Users\\me\\llama.gguf", PayloadFormat.GGUF, "llama.gguf"),
        ("C:llama.gguf", PayloadFormat.GGUF, "model.gguf"),
        ("dir/", PayloadFormat.GGUF, "model.gguf"),
        ("..", PayloadFormat.GGUF, "model.gguf"),
        (".", PayloadFormat.GGUF, "model.gguf"),
        (".gguf", PayloadFormat.GGUF, "model.gguf"),
        (".bashrc", PayloadFormat.GGUF, "model.gguf"),
        ("-rf.gguf", PayloadFormat.GGUF, "model.gguf"),
        ("my model.gguf", PayloadFormat.GGUF, "model.gguf"),
        ("модель.gguf", PayloadFormat.GGUF, "model.gguf"),
        ("llama\x00.gguf", PayloadFormat.GGUF, "model.gguf"),
        ("llama.gguf\n", PayloadFormat.GGUF, "model.gguf"),
        ("llama\n", PayloadFormat.GGUF, "model.gguf"),
        ("llama\r.gguf", PayloadFormat.GGUF, "model.gguf"),
        ("a" * 201, PayloadFormat.GGUF, "model.gguf"),
        ("a" * 200, PayloadFormat.GGUF, "model.gguf"),  # with the extension it outgrows a segment
        ("a" * 195, PayloadFormat.GGUF, "a" * 195 + ".gguf"),
        ("a" * 195 + ".gguf", PayloadFormat.GGUF, "a" * 195 + ".gguf"),
        ("a" * 196 + ".gguf", PayloadFormat.GGUF, "model.gguf"),
    ],
)
def test_safe_filename(name: str, payload_format: PayloadFormat, expected: str) -> None:
    assert safe_filename(name, payload_format) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("config.json", "config.json"),
        ("model/config.json", "model/config.json"),
        ("./model/config.json", "model/config.json"),
        ("model//config.json", "model/config.json"),
        ("model/./config.json", "model/config.json"),
        ("model/", "model"),
        ("unet/diffusion_pytorch_model.fp16.safetensors", "unet/diffusion_pytorch_model.fp16.safetensors"),
        ("a..b/c", "a..b/c"),
        ("v1+2/x", "v1+2/x"),
    ],
)
def test_safe_member_path_keeps_plain_relative_paths(path: str, expected: str) -> None:
    assert safe_member_path(path) == expected


@pytest.mark.parametrize(
    "path",
    [
        "",
        ".",
        "./",
        "/",
        "..",
        "../x",
        "a/../../b",
        "a/..",
        "a/../b",
        "/etc/passwd",
        "//server/share/x",
        "C:\\x",
        "C:/x",
        "c:x",
        "a\\b",
        "..\\..\\windows\\system32",
        "a\x00b",
        "config.json\x00.txt",
        "a\nb",
        "config.json\n",
        "model/\n",
        "a\rb",
        "a\tb",
        "\x1b[31m",
        ".git/config",
        "model/.git/config",
        ".hidden",
        "model/.cache/x",
        "...",
        "модель/config.json",
        "model/配置.json",
        "cafe\u0301.json",
        "a b.json",
        "a:b",
        "a*b",
        "~/x",
        "$HOME/x",
        "-rf",
        "x" * 201,
        "a/" * 600,
        "a/" * (MAX_PATH_CHARS // 2) + "b",
    ],
)
def test_safe_member_path_refuses_unsafe_paths(path: str) -> None:
    assert safe_member_path(path) is None


def test_the_length_limit_is_inclusive() -> None:
    body = "/".join(["a" * 100] * 10)
    longest = body + "/" + "b" * (MAX_PATH_CHARS - len(body) - 1)
    assert len(longest) == MAX_PATH_CHARS
    assert safe_member_path(longest) == longest
    assert safe_member_path(longest + "a") is None


def check_accepted_member_path(path: str) -> None:
    accepted = safe_member_path(path)
    if accepted is None:
        return
    assert accepted
    assert not accepted.startswith("/")
    assert ".." not in accepted.split("/")
    assert posixpath.normpath(accepted) == accepted
    assert accepted.isascii()
    assert all(char.isprintable() for char in accepted)
    assert safe_member_path(accepted) == accepted


@given(path=st.text(max_size=40))
@example(path="a/../b")
@example(path="./a")
@example(path="a\n")
@example(path="a/\n")
@BOUNDED
def test_any_accepted_member_path_is_relative_and_normal(path: str) -> None:
    check_accepted_member_path(path)


SEGMENT_CHARS = st.sampled_from([*"aZ09._+-/\\:\n\x00 é", "..", "./"])


@given(parts=st.lists(SEGMENT_CHARS, max_size=20))
@BOUNDED
def test_any_accepted_member_path_from_dangerous_pieces_is_relative_and_normal(parts: list[str]) -> None:
    check_accepted_member_path("".join(parts))


@given(name=st.none() | st.text(max_size=40), payload_format=st.sampled_from(list(PayloadFormat)))
@example(name="x\n", payload_format=PayloadFormat.GGUF)
@example(name="a" * 199, payload_format=PayloadFormat.SAFETENSORS)
@BOUNDED
def test_any_safe_filename_is_one_plain_segment_with_the_right_extension(
    name: str | None, payload_format: PayloadFormat
) -> None:
    stored = safe_filename(name, payload_format)
    assert safe_member_path(stored) == stored
    assert "/" not in stored
    assert stored.lower().endswith(EXPECTED_DEFAULTS[payload_format].split(".", 1)[1])
