"""Search over the local index built from a directory store: filters, sorts, text, keyset pages."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.api.catalog.catalog import Catalog
from ai_models.api.catalog.index import CatalogIndex
from ai_models.api.catalog.index_builder import IndexBuilder
from ai_models.api.catalog.ledger_view import LedgerReading, LedgerState, LedgerView
from ai_models.api.metrics import ApiMetrics
from ai_models.api.models import EntryLocator, ProblemType, SearchPage, SearchQuery
from ai_models.api.problems import ApiProblem
from ai_models.catalog.layout import CatalogManifest
from ai_models.domain.catalog.record import CatalogRecord

RecordMaker = Callable[..., CatalogRecord]
GenerationWriter = Callable[..., CatalogManifest]


def day(n: int) -> datetime.datetime:
    return datetime.datetime(2025, 1, n, tzinfo=datetime.UTC)


Spec = tuple[str, str, dict[str, Any]]


def spec(source: str, model_id: str, **facts: Any) -> Spec:
    return (source, model_id, facts)


GB = 1_000_000_000
HF_RECORDS = [
    spec(
        "hf",
        "meta-llama/Llama-3.1-8B-Instruct",
        downloads=900,
        likes=50,
        pipeline_tag="text-generation",
        library_name="transformers",
        tags=("llama", "conversational"),
        parameter_count=8_000_000_000,
        weights_bytes=16 * GB,
        architecture="LlamaForCausalLM",
        family="llama",
        created_at=day(1),
        last_modified=day(20),
    ),
    spec(
        "hf",
        "Qwen/Qwen2.5-7B",
        downloads=700,
        likes=80,
        pipeline_tag="text-generation",
        library_name="transformers",
        tags=("qwen2",),
        parameter_count=7_600_000_000,
        weights_bytes=15 * GB,
        architecture="Qwen2ForCausalLM",
        family="qwen2",
        created_at=day(5),
        last_modified=day(6),
    ),
    spec(
        "hf",
        "google-bert/bert-base-uncased",
        downloads=5000,
        likes=10,
        pipeline_tag="fill-mask",
        library_name="transformers",
        tags=("bert", "exbert"),
        parameter_count=110_000_000,
        weights_bytes=440_000_000,
        architecture="BertForMaskedLM",
        family="bert",
        created_at=day(2),
    ),
    spec(
        "hf",
        "TheBloke/Llama-2-7B-GGUF",
        downloads=300,
        likes=80,
        pipeline_tag="text-generation",
        library_name="gguf",
        tags=("llama", "gguf"),
        parameter_count=6_700_000_000,
        weights_bytes=4 * GB,
        family="llama",
        last_modified=day(9),
    ),
    spec(
        "hf",
        "gpt2",
        downloads=300,
        pipeline_tag="text-generation",
        library_name="transformers",
        tags=("gpt2",),
        parameter_count=124_000_000,
        architecture="GPT2LMHeadModel",
        family="gpt2",
    ),
    spec(
        "hf",
        "stabilityai/sdxl",
        likes=5,
        pipeline_tag="text-to-image",
        library_name="diffusers",
        tags=("diffusers",),
    ),
]
MIRROR_RECORDS = [
    spec(
        "mirror",
        "Qwen/Qwen2.5-7B",
        downloads=10,
        pipeline_tag="text-generation",
        library_name="transformers",
        parameter_count=7_600_000_000,
        weights_bytes=15 * GB,
    ),
    spec(
        "mirror",
        "mistralai/Mistral-7B-v0.3",
        downloads=600,
        likes=80,
        pipeline_tag="text-generation",
        library_name="transformers",
        tags=("mistral",),
        parameter_count=7_200_000_000,
        weights_bytes=14 * GB,
        architecture="MistralForCausalLM",
        family="mistral",
        created_at=day(3),
    ),
]


def fixed_ledger(state: LedgerState = LedgerState.MISSING) -> LedgerView:
    return LedgerView(read=lambda: LedgerReading(None, state), capacity_bytes=None)


@pytest.fixture
def catalog(
    store: DirectoryStore, make_record: RecordMaker, write_generation: GenerationWriter
) -> Iterator[Catalog]:
    hf = [make_record(source, model_id, **facts) for source, model_id, facts in HF_RECORDS]
    mirror = [make_record(source, model_id, **facts) for source, model_id, facts in MIRROR_RECORDS]
    write_generation(store, "hf", "g1", [hf[:3], hf[3:]])
    write_generation(store, "mirror", "g1", [mirror])
    index = CatalogIndex()
    assert IndexBuilder(store=store, index=index, metrics=ApiMetrics()).poll_once()
    yield Catalog(index=index, ledger=fixed_ledger())
    index.close()


def search(catalog: Catalog, **params: Any) -> SearchPage:
    return SearchPage.model_validate_json(catalog.search(SearchQuery.model_validate(params)))


def ids(page: SearchPage) -> list[str]:
    return [f"{entry.source}:{entry.id}" for entry in page.items]


def test_sorts_put_the_largest_first_then_source_and_id(catalog: Catalog) -> None:
    assert ids(search(catalog)) == [
        "hf:google-bert/bert-base-uncased",
        "hf:meta-llama/Llama-3.1-8B-Instruct",
        "hf:Qwen/Qwen2.5-7B",
        "mirror:mistralai/Mistral-7B-v0.3",
        "hf:TheBloke/Llama-2-7B-GGUF",  # 300 downloads, tie broken by id (byte order)
        "hf:gpt2",
        "mirror:Qwen/Qwen2.5-7B",
        "hf:stabilityai/sdxl",  # no download count: last
    ]
    assert ids(search(catalog, sort="Likes"))[:4] == [
        "hf:Qwen/Qwen2.5-7B",
        "hf:TheBloke/Llama-2-7B-GGUF",
        "mirror:mistralai/Mistral-7B-v0.3",
        "hf:meta-llama/Llama-3.1-8B-Instruct",
    ]
    assert ids(search(catalog, sort="WeightsBytes"))[:2] == [
        "hf:meta-llama/Llama-3.1-8B-Instruct",
        "hf:Qwen/Qwen2.5-7B",
    ]
    assert ids(search(catalog, sort="WeightsBytes"))[-2:] == ["hf:gpt2", "hf:stabilityai/sdxl"]
    assert ids(search(catalog, sort="ParameterCount"))[0] == "hf:meta-llama/Llama-3.1-8B-Instruct"
    assert ids(search(catalog, sort="CreatedAt"))[:4] == [
        "hf:Qwen/Qwen2.5-7B",
        "mirror:mistralai/Mistral-7B-v0.3",
        "hf:google-bert/bert-base-uncased",
        "hf:meta-llama/Llama-3.1-8B-Instruct",
    ]
    assert ids(search(catalog, sort="LastModified"))[:3] == [
        "hf:meta-llama/Llama-3.1-8B-Instruct",
        "hf:TheBloke/Llama-2-7B-GGUF",
        "hf:Qwen/Qwen2.5-7B",
    ]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"source": "mirror"}, ["mirror:mistralai/Mistral-7B-v0.3", "mirror:Qwen/Qwen2.5-7B"]),
        ({"pipelineTag": "FILL-MASK"}, ["hf:google-bert/bert-base-uncased"]),
        ({"library": "gguf"}, ["hf:TheBloke/Llama-2-7B-GGUF"]),
        ({"author": "qwen"}, ["hf:Qwen/Qwen2.5-7B", "mirror:Qwen/Qwen2.5-7B"]),
        (
            {"minParameters": 7_600_000_000},
            ["hf:meta-llama/Llama-3.1-8B-Instruct", "hf:Qwen/Qwen2.5-7B", "mirror:Qwen/Qwen2.5-7B"],
        ),
        ({"maxParameters": 200_000_000}, ["hf:google-bert/bert-base-uncased", "hf:gpt2"]),
        (
            {"minParameters": 7_000_000_000, "maxParameters": 7_500_000_000},
            ["mirror:mistralai/Mistral-7B-v0.3"],
        ),
        ({"maxWeightsBytes": 4 * GB}, ["hf:google-bert/bert-base-uncased", "hf:TheBloke/Llama-2-7B-GGUF"]),
        ({"minParameters": 9, "maxParameters": 8}, []),
        ({"source": "mirror", "author": "qwen", "library": "transformers"}, ["mirror:Qwen/Qwen2.5-7B"]),
        ({"source": "nowhere"}, []),
    ],
)
def test_filters_select_entries_and_exclude_entries_lacking_the_fact(
    catalog: Catalog, params: dict[str, Any], expected: list[str]
) -> None:
    assert ids(search(catalog, **params)) == expected


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("llama", ["hf:meta-llama/Llama-3.1-8B-Instruct", "hf:TheBloke/Llama-2-7B-GGUF"]),
        ("LLAM inst", ["hf:meta-llama/Llama-3.1-8B-Instruct"]),
        ("Qwen2ForCausal", ["hf:Qwen/Qwen2.5-7B"]),  # architecture
        ("exbert", ["hf:google-bert/bert-base-uncased"]),  # tag
        ("mistral", ["mirror:mistralai/Mistral-7B-v0.3"]),  # family, id, author
        ("diffusers text-to-image", ["hf:stabilityai/sdxl"]),  # library and pipeline tag
        ("gguf thebloke", ["hf:TheBloke/Llama-2-7B-GGUF"]),
        ("llama qwen", []),  # every word must match
        ('NEAR(llama) OR "x" *', []),  # FTS syntax is searched for as words, never interpreted
    ],
)
def test_text_search_matches_every_word_as_a_prefix(catalog: Catalog, q: str, expected: list[str]) -> None:
    assert ids(search(catalog, q=q)) == expected


def test_text_without_words_filters_nothing(catalog: Catalog) -> None:
    assert ids(search(catalog, q=" -/_* ")) == ids(search(catalog))


def test_pages_cover_the_result_exactly_once_in_order(catalog: Catalog) -> None:
    full = ids(search(catalog, sort="Likes"))
    seen: list[str] = []
    token = None
    sizes = iter([3, 1, 2, 5])  # pageSize may change between pages
    for _ in range(10):
        params: dict[str, Any] = {"sort": "Likes", "pageSize": next(sizes)}
        if token:
            params["pageToken"] = token
        page = search(catalog, **params)
        seen += ids(page)
        token = page.next_page_token
        if token is None:
            break
    assert seen == full


def test_last_page_has_no_token(catalog: Catalog) -> None:
    assert search(catalog, pageSize=8).next_page_token is None
    assert search(catalog, pageSize=7).next_page_token is not None


def test_a_token_from_another_search_is_refused(catalog: Catalog) -> None:
    token = search(catalog, q="llama", pageSize=1).next_page_token
    assert token is not None
    with pytest.raises(ApiProblem) as refused:
        search(catalog, q="qwen", pageToken=token)
    assert refused.value.kind is ProblemType.INVALID_PAGE_TOKEN
    assert refused.value.status == 400
    # Same words, other spelling: the same search.
    assert ids(search(catalog, q="LLAMA ", pageToken=token)) == ["hf:TheBloke/Llama-2-7B-GGUF"]


@pytest.mark.parametrize(
    "token", ["AAAA", "bm90IGpzb24", "WzEsImEiLDEsImIiXQ", "WzEsImEiLHRydWUsImIiLCJjIl0"]
)
def test_a_forged_token_is_refused(catalog: Catalog, token: str) -> None:
    with pytest.raises(ApiProblem) as refused:
        search(catalog, pageToken=token)
    assert refused.value.kind is ProblemType.INVALID_PAGE_TOKEN


def test_same_model_id_in_two_sources_stays_two_entries(catalog: Catalog) -> None:
    both = search(catalog, q="Qwen2.5")
    assert [(e.source, e.id, e.metadata.downloads) for e in both.items] == [
        ("hf", "Qwen/Qwen2.5-7B", 700),
        ("mirror", "Qwen/Qwen2.5-7B", 10),
    ]
    one = json.loads(catalog.entry(EntryLocator(source="mirror", id="Qwen/Qwen2.5-7B")))
    assert one["metadata"]["downloads"] == 10


def test_entries_are_the_stored_records_plus_a_verdict_and_leave_absent_facts_out(
    catalog: Catalog, make_record: RecordMaker
) -> None:
    raw = json.loads(catalog.entry(EntryLocator(source="hf", id="stabilityai/sdxl")))
    assert raw["downloadVerdict"] == {"verdict": "EstimateUnavailable", "reason": "SizeUnknown"}
    assert "downloads" not in raw["metadata"]
    assert "weightsBytes" not in raw["resources"]
    assert None not in raw["metadata"].values()
    assert None not in raw["resources"].values()
    stored = {k: v for k, v in raw.items() if k != "downloadVerdict"}
    source, model_id, facts = HF_RECORDS[5]
    assert stored == json.loads(make_record(source, model_id, **facts).to_json())


def test_an_unknown_entry_is_404(catalog: Catalog) -> None:
    with pytest.raises(ApiProblem) as missing:
        catalog.entry(EntryLocator(source="mirror", id="gpt2"))
    assert missing.value.status == 404
    assert "mirror" in missing.value.detail
    assert "gpt2" in missing.value.detail


def test_sources_list_the_served_generations(catalog: Catalog) -> None:
    listed = catalog.sources()
    assert [(s.name, s.generation, s.models, s.provider) for s in listed.items] == [
        ("hf", "g1", 6, "HuggingFace"),
        ("mirror", "g1", 2, "HuggingFace"),
    ]
