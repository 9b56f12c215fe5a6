"""Reading Hub listing entries: whatever a repository's metadata holds, parsing never raises."""

from __future__ import annotations

import datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ai_models.adapters.hub.listing import LISTING_EXPAND, HubModel, parse_model
from ai_models.domain.catalog.record import Gated

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
FIELDS = st.sampled_from(["id", *LISTING_EXPAND])


@given(st.dictionaries(FIELDS, JSON) | JSON)
def test_parsing_any_json_never_raises(item: Any) -> None:
    model = parse_model(item)

    assert model is None or isinstance(model, HubModel)


def test_entry_without_an_id_is_skipped() -> None:
    assert parse_model({"modelId": ""}) is None
    assert parse_model({"id": 7}) is None
    assert parse_model({"modelId": "org/name"}) == HubModel(id="org/name")


def test_values_of_the_wrong_type_are_absent_not_errors() -> None:
    model = parse_model(
        {
            "id": "org/name",
            "downloads": -3,
            "likes": True,
            "createdAt": "yesterday",
            "tags": ["ok", 3, None],
            "safetensors": {"parameters": {"BF16": "many", "F32": 10}, "total": "x"},
            "siblings": [{"rfilename": "config.json"}, "README.md", {"size": 3}],
            "gguf": [],
        }
    )

    assert model == HubModel(
        id="org/name",
        tags=("ok",),
        safetensors_parameters={"F32": 10},
        filenames=("config.json",),
    )


def test_gate_modes_map_to_the_record_vocabulary() -> None:
    gates = [parse_model({"id": "o/n", "gated": value}) for value in (False, None, "auto", "manual", True)]

    assert [model.gated for model in gates if model] == [
        Gated.NONE,
        Gated.NONE,
        Gated.AUTO,
        Gated.MANUAL,
        Gated.MANUAL,
    ]


def test_timestamps_are_timezone_aware() -> None:
    model = parse_model(
        {"id": "o/n", "createdAt": "2024-07-18T08:56:00.000Z", "lastModified": "2024-07-19T10:00:00"}
    )

    assert model is not None
    assert model.created_at == datetime.datetime(2024, 7, 18, 8, 56, tzinfo=datetime.UTC)
    assert model.last_modified == datetime.datetime(2024, 7, 19, 10, 0, tzinfo=datetime.UTC)


def test_license_comes_from_the_license_tag() -> None:
    model = parse_model({"id": "o/n", "tags": ["transformers", "license:apache-2.0"]})

    assert model is not None
    assert model.license == "apache-2.0"
    assert HubModel(id="o/n", tags=("license:",)).license is None
