"""From a listed Hub model to the stored record, and when config.json is worth a request."""

from __future__ import annotations

import datetime

import pytest

from ai_models.adapters.hub import HubModel
from ai_models.catalog.records import build_record, wants_config
from ai_models.domain.catalog.record import Gated, WeightsFormat

NOW = datetime.datetime(2026, 5, 1, tzinfo=datetime.UTC)
SHA = "a" * 40


@pytest.mark.parametrize(
    ("model", "authenticated", "wanted"),
    [
        (HubModel(id="o/n", sha=SHA, filenames=("config.json",)), False, True),
        (HubModel(id="o/n", sha=SHA), False, True),  # no file list: it may be there
        (HubModel(id="o/n", sha=SHA, filenames=("model-Q4_K_M.gguf",)), False, False),
        (HubModel(id="o/n", filenames=("config.json",)), False, False),  # no commit to pin it to
        (HubModel(id="o/n", sha=SHA, gated=Gated.AUTO, filenames=("config.json",)), False, False),
        (HubModel(id="o/n", sha=SHA, gated=Gated.MANUAL, filenames=("config.json",)), True, True),
    ],
)
def test_config_is_fetched_only_where_it_can_add_facts(
    model: HubModel, authenticated: bool, wanted: bool
) -> None:
    assert wants_config(model, authenticated=authenticated) is wanted


def test_record_takes_metadata_from_the_listing_and_facts_from_the_config() -> None:
    model = HubModel(
        id="meta-llama/Llama-3.1-8B",
        sha=SHA,
        tags=("transformers", "license:llama3.1"),
        gated=Gated.MANUAL,
        downloads=5,
        safetensors_parameters={"BF16": 8_030_261_248},
        safetensors_total=8_030_261_248,
        filenames=("config.json", "model.safetensors"),
    )
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    }

    record = build_record(source="hf", model=model, config=config, indexed_at=NOW)

    assert record.metadata.author == "meta-llama"  # from the id when the listing does not say
    assert record.metadata.license == "llama3.1"
    assert record.metadata.gated is Gated.MANUAL
    assert record.resources.format is WeightsFormat.SAFETENSORS
    assert record.resources.parameter_count == 8_030_261_248
    assert record.resources.kv_cache_bytes_per_token == 2 * 32 * 8 * 128 * 2  # K and V, BF16
    assert record.indexed_at == NOW


def test_without_config_json_the_listing_config_still_names_the_architecture() -> None:
    model = HubModel(
        id="o/n", listing_config={"architectures": ["MixtralForCausalLM"], "model_type": "mixtral"}
    )

    record = build_record(source="hf", model=model, config=None, indexed_at=NOW)

    assert record.resources.architecture == "MixtralForCausalLM"
    assert record.resources.layers is None


def test_a_model_with_nothing_known_is_still_a_record() -> None:
    record = build_record(source="hf", model=HubModel(id="bare"), config=None, indexed_at=NOW)

    assert record.to_json().startswith('{"source":"hf","id":"bare"')
    assert record.metadata.author is None
