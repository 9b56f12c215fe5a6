"""The artifact digest: a function of what the files are, not of the order they were listed in, and
changed by every field that identifies the bytes."""

from __future__ import annotations

import dataclasses
import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_models.domain.artifacts.digest import SourceFile, repository_digest, upload_digest
from ai_models.domain.artifacts.layout import digest_hex

BOUNDED = settings(max_examples=200, deadline=None)
DIGEST_FORM = re.compile(r"sha256:[0-9a-f]{64}")
REPOSITORY = "meta-llama/Llama-3.2-1B-Instruct"
REVISION = "9213176726f574b556790deb65791e0c5aa438b6"
FILES = (
    SourceFile(path="config.json", size=877, content_id="a41fd4ea0eb3fcfe5a6a2d4c3dd6d0aaf3e1b2c4"),
    SourceFile(
        path="model.safetensors",
        size=2_471_645_608,
        content_id="68a2e4be76fa709455a60272fba8e512c02d81c46e6c671cc9449e374fd6809a",
        lfs_sha256="68a2e4be76fa709455a60272fba8e512c02d81c46e6c671cc9449e374fd6809a",
    ),
    SourceFile(path="tokenizer.json", size=9_085_657, content_id="5cc5f00a5b203e90a27a3bd60d1ec393b07971e8"),
)


def digest(
    files: tuple[SourceFile, ...] = FILES, repository: str = REPOSITORY, revision: str = REVISION
) -> str:
    return repository_digest(repository, revision, files)


def test_digests_have_the_form_the_layout_accepts() -> None:
    for value in (digest(), digest(files=()), upload_digest(hashlib.sha256(b"x").hexdigest())):
        assert DIGEST_FORM.fullmatch(value)
        assert len(digest_hex(value)) == 64


def test_the_digest_is_deterministic() -> None:
    assert digest() == digest()
    assert digest(files=tuple(dataclasses.replace(item) for item in FILES)) == digest()


def test_the_order_of_the_listing_does_not_matter() -> None:
    assert digest(files=tuple(reversed(FILES))) == digest()
    assert digest(files=(FILES[1], FILES[2], FILES[0])) == digest()
    assert repository_digest(REPOSITORY, REVISION, iter(FILES)) == digest()  # any iterable


def test_the_lfs_sha256_is_not_part_of_the_identity() -> None:
    # The content id already is the LFS sha256; the extra field only drives verification.
    without_lfs = tuple(dataclasses.replace(item, lfs_sha256=None) for item in FILES)
    assert digest(files=without_lfs) == digest()


def changed(index: int, **fields: object) -> tuple[SourceFile, ...]:
    files = list(FILES)
    files[index] = dataclasses.replace(files[index], **fields)  # type: ignore[arg-type]
    return tuple(files)


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param({"repository": "meta-llama/Llama-3.2-3B-Instruct"}, id="repository"),
        pytest.param({"repository": REPOSITORY.lower()}, id="repository-case"),
        pytest.param({"revision": "0" * 40}, id="revision"),
        pytest.param({"files": changed(0, path="config2.json")}, id="path"),
        pytest.param({"files": changed(0, path="sub/config.json")}, id="directory"),
        pytest.param({"files": changed(1, size=2_471_645_609)}, id="size"),
        pytest.param({"files": changed(1, size=None)}, id="size-unknown"),
        pytest.param({"files": changed(1, content_id="0" * 64)}, id="content-id"),
        pytest.param({"files": changed(2, content_id=None)}, id="content-id-unknown"),
        pytest.param({"files": FILES[:2]}, id="file-left-out"),
        pytest.param(
            {"files": (*FILES, SourceFile(path="README.md", size=1, content_id="ab"))}, id="file-added"
        ),
        pytest.param({"files": ()}, id="no-files"),
    ],
)
def test_every_field_changes_the_digest(variant: dict[str, object]) -> None:
    assert digest(**variant) != digest()  # type: ignore[arg-type]


def test_fields_do_not_run_into_each_other() -> None:
    # Moving characters between adjacent fields must not produce the same text to hash.
    assert repository_digest("org/ab", "c", FILES) != repository_digest("org/a", "bc", FILES)
    one = (SourceFile(path="a", size=12, content_id="3"),)
    other = (SourceFile(path="a", size=1, content_id="23"),)
    assert digest(files=one) != digest(files=other)


def test_upload_and_repository_digests_never_coincide() -> None:
    payload = hashlib.sha256(b"weights").hexdigest()
    assert upload_digest(payload) != repository_digest("upload", payload, ())
    assert upload_digest(payload) != repository_digest(payload, "", ())
    assert upload_digest(payload) != "sha256:" + payload  # not the payload's own digest either
    assert upload_digest(payload) == upload_digest(payload)
    assert upload_digest(payload) != upload_digest(hashlib.sha256(b"other").hexdigest())


FILE_LISTS = st.lists(
    st.builds(
        SourceFile,
        path=st.text(alphabet="abc./_-", min_size=1, max_size=6),
        size=st.none() | st.integers(min_value=0, max_value=10**12),
        content_id=st.none() | st.text(alphabet="0123456789abcdef", min_size=1, max_size=8),
    ),
    max_size=8,
)


@given(files=FILE_LISTS, data=st.data())
@BOUNDED
def test_any_permutation_of_any_listing_has_the_same_digest(
    files: list[SourceFile], data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(files))
    assert repository_digest(REPOSITORY, REVISION, shuffled) == repository_digest(REPOSITORY, REVISION, files)


@given(
    files=FILE_LISTS,
    repository=st.text(max_size=8),
    revision=st.text(max_size=8),
    payload=st.text(max_size=70),
)
@BOUNDED
def test_an_upload_digest_differs_from_any_repository_digest(
    files: list[SourceFile], repository: str, revision: str, payload: str
) -> None:
    assert upload_digest(payload) != repository_digest(repository, revision, files)


def test_the_hashed_text_is_pinned() -> None:
    # Digests name stored directories: a change of the hashed text orphans every published artifact.
    text = (
        f"huggingface\n{REPOSITORY}\n{REVISION}\n"
        "config.json\t877\ta41fd4ea0eb3fcfe5a6a2d4c3dd6d0aaf3e1b2c4\n"
        "model.safetensors\t2471645608\t68a2e4be76fa709455a60272fba8e512c02d81c46e6c671cc9449e374fd6809a\n"
        "tokenizer.json\t9085657\t5cc5f00a5b203e90a27a3bd60d1ec393b07971e8\n"
    )
    assert digest() == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    payload = hashlib.sha256(b"weights").hexdigest()
    assert upload_digest(payload) == "sha256:" + hashlib.sha256(f"upload\n{payload}\n".encode()).hexdigest()
