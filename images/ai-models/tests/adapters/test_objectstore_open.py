"""open_store: which AI_MODELS_STORE_URL forms make which store, and what a wrong one says."""

from __future__ import annotations

from pathlib import Path

import pytest

from ai_models.adapters.objectstore import ACCEPTED_FORMS, DirectoryStore, S3Store, open_store
from ai_models.settings import Settings
from fakes.s3 import isolate_aws_environment


@pytest.fixture(autouse=True)
def _no_stray_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings() reads AI_MODELS_* and boto3 reads AWS_*; a developer's shell must not leak in.
    isolate_aws_environment(monkeypatch)
    for name in (
        "AI_MODELS_STORE_URL",
        "AI_MODELS_S3_ENDPOINT",
        "AI_MODELS_S3_CA_FILE",
        "AI_MODELS_S3_INSECURE",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("url", "root"),
    [
        ("file:///var/lib/ai-models", "/var/lib/ai-models"),
        ("file://localhost/var/lib/ai-models", "/var/lib/ai-models"),
        ("file:///tmp/with%20space/", "/tmp/with space"),
        ("/var/lib/ai-models", "/var/lib/ai-models"),
    ],
)
def test_file_urls_and_absolute_paths_make_a_directory_store(url: str, root: str) -> None:
    store = open_store(Settings(store_url=url))
    assert isinstance(store, DirectoryStore)
    assert store.root == Path(root)
    assert store.description == f"directory {root}"


def test_an_s3_url_makes_an_s3_store_for_the_endpoint() -> None:
    settings = Settings(
        store_url="s3://ai-models", s3_endpoint="https://s3.example.com", s3_region="eu-west-3"
    )
    store = open_store(settings)
    assert isinstance(store, S3Store)
    assert store.bucket == "ai-models"
    assert store.description == "s3://ai-models at https://s3.example.com"


def test_an_s3_url_without_an_endpoint_goes_to_aws_in_the_region() -> None:
    store = open_store(Settings(store_url="s3://ai-models/", s3_region="eu-west-3"))
    assert isinstance(store, S3Store)
    assert store.bucket == "ai-models"
    assert "eu-west-3" in store.description
    assert "amazonaws.com" in store.description


def test_the_store_url_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AI_MODELS_STORE_URL", f"file://{tmp_path}")
    store = open_store(Settings())
    assert isinstance(store, DirectoryStore)
    assert store.root == tmp_path


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (None, "it is not set"),
        ("", "it is not set"),
        ("relative/dir", "unknown form"),
        ("gs://bucket", "unknown form"),
        ("https://s3.example.com/bucket", "unknown form"),
        ("s3://", "bucket name"),
        ("s3://bucket/prefix", "without a path"),
        ("file://server/share", "names no host"),
        ("file:relative", "must be absolute"),
        ("file:///dir?x=1", "no query"),
    ],
)
def test_an_unusable_store_url_names_the_variable_and_the_accepted_forms(
    url: str | None, reason: str
) -> None:
    with pytest.raises(ValueError, match="AI_MODELS_STORE_URL") as caught:
        open_store(Settings(store_url=url))
    message = str(caught.value)
    assert reason in message
    assert ACCEPTED_FORMS in message
    assert "s3://<bucket>" in message
    assert "file:///" in message
