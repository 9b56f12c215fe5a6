"""Catalog sizes for models the Hub listing does not size (D131): one file-list request each, the
same number the controller reserves for a publication, and no request where none can pay."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from ai_models.adapters.hub import HubClient, ProviderRateLimited, repository_snapshot
from ai_models.adapters.objectstore import DirectoryStore
from ai_models.catalog.indexing import run_pass
from ai_models.catalog.reading import iter_records, read_manifest
from ai_models.catalog.source import SourceSpec
from ai_models.domain.artifacts.digest import SourceFile
from ai_models.domain.artifacts.sizing import chosen_files, publication_bytes, reserved_bytes
from ai_models.domain.catalog.record import CatalogRecord
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel, make_model
from fakes.model_files import content_size
from fakes.sized_repositories import ENCODER, GGUF_ONLY, PICKLES_ONLY, SIZED, expected_bytes

LISTED = make_model("llama", 1)  # the listing's safetensors counts size it
GATED = dataclasses.replace(make_model("gguf", 2), gated="manual")


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return [*SIZED, PICKLES_ONLY, LISTED, GATED]


def index(hub: FakeHub, client: HubClient, store: DirectoryStore, **spec: object) -> dict[str, CatalogRecord]:
    source = SourceSpec(name="hf", endpoint=hub.url, chunk_size=25, max_models=0, **spec)  # type: ignore[arg-type]
    result = run_pass(
        spec=source,
        hub=client,
        store=store,
        resume=None,
        on_checkpoint=lambda _: None,
        clock=lambda: datetime.datetime.now(datetime.UTC),
    )
    assert result is not None
    manifest = read_manifest(store, "hf")
    assert manifest is not None
    return {record.id: record for record in iter_records(store, manifest)}


def test_every_model_the_hub_can_size_gets_the_size_its_publication_reserves(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    records = index(fake_hub, hub_client, store, include_gated=True)

    for model in SIZED:
        assert records[model.id].resources.weights_bytes == expected_bytes(model), model.id
        # The controller's own snapshot, read and summed by the same code, says the same.
        snapshot = repository_snapshot(model.id, model.sha, endpoint=fake_hub.url, token=None)
        assert publication_bytes(snapshot.files) == expected_bytes(model)
    # The GGUF-only entry is one quantization, not the repository.
    every_quantization = sum(content_size(body) for path, body in (GGUF_ONLY.contents or {}).items())
    assert expected_bytes(GGUF_ONLY) < every_quantization
    # The listing's own size stays first; nothing the publisher would take means no size at all.
    assert records[LISTED.id].resources.weights_bytes == 2 * LISTED.safetensors["parameters"]["BF16"]  # type: ignore[index]
    assert records[PICKLES_ONLY.id].resources.weights_bytes is None


def test_sizes_cost_one_file_list_request_per_unsized_model_and_nothing_elsewhere(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    index(fake_hub, hub_client, store, include_gated=True)

    asked = sorted(request.path for request in fake_hub.size_requests())
    # Not the model the listing sizes, not the pickles-only one, not the gated one (no token).
    assert asked == sorted(f"/api/models/{model.id}/revision/{model.sha}" for model in SIZED)
    assert len(fake_hub.listing_pages()) == 1


def test_a_rate_limited_size_request_fails_the_page_so_the_pass_resumes_it(
    fake_hub: FakeHub, hub_client: HubClient
) -> None:
    fake_hub.rate_limit_next(1, retry_after="9", bucket="api")
    with pytest.raises(ProviderRateLimited) as raised:
        hub_client.fetch_size(ENCODER.id, ENCODER.sha)
    assert raised.value.retry_after == 9


def test_a_file_list_that_is_refused_missing_or_of_another_commit_gives_no_size(
    fake_hub: FakeHub, hub_client: HubClient
) -> None:
    assert hub_client.fetch_size("sized/nowhere", ENCODER.sha) is None  # 404
    assert hub_client.fetch_size(ENCODER.id, "f" * 40) is None  # no such revision
    fake_hub.fail_next(1, status=200, bucket="api", body=b'{"sha": "' + b"a" * 40 + b'", "siblings": []}')
    assert hub_client.fetch_size(ENCODER.id, ENCODER.sha) is None  # another commit's files
    fake_hub.fail_next(1, status=403, bucket="api")
    assert hub_client.fetch_size(ENCODER.id, ENCODER.sha) is None


def test_a_chosen_file_listed_without_a_size_leaves_the_size_unknown_but_the_reservation_counts_it_as_0() -> (
    None
):
    files = [
        SourceFile(path="model.safetensors", size=None, content_id="a"),
        SourceFile(path="config.json", size=10, content_id="b"),
        SourceFile(path="pytorch_model.bin", size=999, content_id="c"),
    ]
    _, chosen = chosen_files(files)
    assert [item.path for item in chosen] == ["model.safetensors", "config.json"]
    assert reserved_bytes(chosen) == 10
    assert publication_bytes(files) is None
    assert publication_bytes(files[2:]) is None  # nothing publishable
