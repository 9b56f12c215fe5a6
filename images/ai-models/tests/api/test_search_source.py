"""`?source=` of the catalog search names a served source or is refused like an unknown parameter
(issue 16, item 7; D146): an empty page would tell a typo "that source has no such models"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.catalog.layout import CatalogManifest
from ai_models.domain.catalog.record import CatalogRecord

RecordMaker = Callable[..., CatalogRecord]
GenerationWriter = Callable[..., CatalogManifest]
SEARCH = "/api/catalog-import/v1/models"


def test_an_unknown_source_is_refused_like_an_unknown_parameter(
    api_cluster: Any,
    start_api: Any,
    store: DirectoryStore,
    make_record: RecordMaker,
    write_generation: GenerationWriter,
) -> None:
    write_generation(store, "hf", "g1", [[make_record("hf", "org/model")]])
    write_generation(store, "empty", "g1", [[]])
    api = start_api(store)
    assert api.runtime.builder.first_pass_complete.wait(timeout=10)
    auth = {"Authorization": f"Bearer {api_cluster.user('reader').token}"}
    with httpx.Client(base_url=api.url, timeout=10, headers=auth) as http:
        served = http.get(SEARCH, params={"source": "hf"})
        assert served.status_code == 200, served.text
        assert [item["id"] for item in served.json()["items"]] == ["org/model"]
        # A served source without entries is an empty page, not an error.
        assert http.get(SEARCH, params={"source": "empty"}).json() == {"items": []}

        unknown_parameter = http.get(SEARCH, params={"sourceName": "hf"})
        typo = http.get(SEARCH, params={"source": "hugginface"})
    assert typo.status_code == unknown_parameter.status_code == 400
    assert typo.headers["content-type"] == unknown_parameter.headers["content-type"]
    assert (
        typo.json()["type"] == unknown_parameter.json()["type"] == "urn:ai-models:problem:invalid-parameter"
    )
    assert set(typo.json()) == set(unknown_parameter.json())
    detail = typo.json()["detail"]
    assert "'hugginface'" in detail
    assert "'empty', 'hf'" in detail
    assert "/api/catalog-import/v1/sources" in detail
