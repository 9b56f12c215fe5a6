"""The claim layout the materializer writes and pods mount."""

from __future__ import annotations

import pytest

from ai_models.domain.delivery.claim_layout import completion_record, object_dir, staging_dir

DIGEST = "sha256:" + "ab" * 32


def test_an_artifact_has_its_tree_its_completion_record_beside_it_and_a_separate_staging_dir() -> None:
    assert object_dir(DIGEST) == "objects/sha256-" + "ab" * 32
    assert completion_record(DIGEST) == object_dir(DIGEST) + ".complete"
    assert staging_dir(DIGEST) == "staging/sha256-" + "ab" * 32


@pytest.mark.parametrize(
    "digest", ["", "sha256:" + "AB" * 32, "sha256:" + "ab" * 31, "md5:" + "ab" * 32, "sha256:../" + "a" * 61]
)
def test_anything_but_a_sha256_digest_names_no_path(digest: str) -> None:
    with pytest.raises(ValueError, match="not an artifact digest"):
        object_dir(digest)
