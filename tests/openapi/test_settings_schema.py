"""The module settings schema as addon-operator and DMT read it."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from ai_models.controller.settings import ControllerSettings
from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.settings import LogLevel
from support.docs import documented_objects
from support.paths import OPENAPI_DIR
from support.schemawalk import walk
from support.values import (
    MINIMAL_SETTINGS,
    InvalidModuleValues,
    deep_merge,
    module_values,
    settings_schema,
    values_schema,
)
from support.yamlfiles import load_yaml

CAMEL_CASE = re.compile(r"^[A-Z][A-Za-z0-9]*$")


def test_every_enum_value_is_camel_case() -> None:
    for name in ("config-values.yaml", "values.yaml"):
        for path, node in walk(load_yaml(OPENAPI_DIR / name)):
            for value in node.get("enum", []):
                assert CAMEL_CASE.match(value), f"{name} {'.'.join(path)}: enum value {value!r}"


def test_high_availability_has_no_default() -> None:
    node = load_yaml(OPENAPI_DIR / "config-values.yaml")["properties"]["highAvailability"]
    assert "default" not in node


def test_every_setting_is_described() -> None:
    for path, node in walk(load_yaml(OPENAPI_DIR / "config-values.yaml")):
        # Fields inside `items` mirror Kubernetes types (tolerations) and are described there.
        if path and path[-2] == "properties" and "items" not in path:
            assert node.get("description", "").strip(), f"{'.'.join(path)} has no description"


def _closed_node(path: tuple[str, ...]) -> dict[str, Any]:
    node: dict[str, Any] = settings_schema()
    for part in path:
        node = node[part]
    return node


def test_every_x_example_is_valid_for_its_setting() -> None:
    examples = [
        (path, example)
        for path, node in walk(load_yaml(OPENAPI_DIR / "config-values.yaml"))
        for example in node.get("x-examples", [])
    ]
    assert len(examples) >= 5
    for path, example in examples:
        jsonschema.validate(example, _closed_node(path))


def test_log_levels_of_the_runtime_are_the_setting_enum() -> None:
    enum = load_yaml(OPENAPI_DIR / "config-values.yaml")["properties"]["logLevel"]["enum"]
    assert [level.value for level in LogLevel] == enum


MODULE_CONFIGS = [
    pytest.param(document, id=origin)
    for origin, document in documented_objects()
    if document.get("kind") == "ModuleConfig"
]


def test_docs_show_module_configs() -> None:
    assert len(MODULE_CONFIGS) >= 4


@pytest.mark.parametrize("document", MODULE_CONFIGS)
def test_moduleconfig_examples_in_docs_are_valid_settings(document: dict[str, Any]) -> None:
    assert document["apiVersion"] == "deckhouse.io/v1alpha1"
    assert document["metadata"]["name"] == "ai-models"
    settings = document["spec"]["settings"]
    values = module_values(settings)
    assert values["aiModels"]["artifacts"]["bucket"] == settings["artifacts"]["bucket"]


def test_defaults_fill_every_optional_section() -> None:
    module = module_values()["aiModels"]
    assert module["logLevel"] == "Info"
    assert module["delivery"] == {
        "mode": "SharedPVC",
        "maxConcurrentMaterializations": 2,
        "provisioningTimeout": "10m",
        "nodeCache": {"size": "200Gi", "nodeSelector": {"ai.deckhouse.io/model-cache": "true"}},
    }
    assert module["sources"]["huggingFace"]["endpoint"] == "https://huggingface.co"
    assert module["artifacts"]["region"] == "us-east-1"
    assert "capacityLimit" not in module["artifacts"]


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"delivery": {"mode": "HostPath"}}, "aiModels.delivery.mode: 'HostPath' is not one of"),
        ({"artifacts": {"capacityLimit": "lots"}}, "aiModels.artifacts.capacityLimit: 'lots' does not match"),
        ({"https": {"mode": "Sometimes"}}, "aiModels.https.mode: 'Sometimes' is not one of"),
        (
            {"delivery": {"maxConcurrentMaterializations": 0}},
            "aiModels.delivery.maxConcurrentMaterializations",
        ),
        ({"delivery": {"sharedPvcClass": "x"}}, "aiModels.delivery: Additional properties are not allowed"),
        # A tag or a digest would pin a materializer of another version than the module's.
        (
            {"delivery": {"materializer": {"imageRepository": "mirror.example.com/ai-models:v1"}}},
            "aiModels.delivery.materializer.imageRepository",
        ),
        (
            {
                "delivery": {
                    "materializer": {"imageRepository": "mirror.example.com/ai-models@sha256:" + "a" * 64}
                }
            },
            "aiModels.delivery.materializer.imageRepository",
        ),
        (
            {"delivery": {"materializer": {"imageRepository": "https://mirror.example.com/ai-models"}}},
            "aiModels.delivery.materializer.imageRepository",
        ),
        (
            {"delivery": {"materializer": {"imageRepository": "mirror.example.com"}}},
            "aiModels.delivery.materializer.imageRepository",
        ),
        (
            {"delivery": {"materializer": {"imagePullSecretNames": ["Mirror_Pull"]}}},
            "aiModels.delivery.materializer.imagePullSecretNames",
        ),
        (
            {"delivery": {"materializer": {"copyPullSecret": False}}},
            "aiModels.delivery.materializer: Additional properties are not allowed",
        ),
        ({"sources": {"huggingFace": {"endpoint": "ftp://mirror"}}}, "aiModels.sources.huggingFace.endpoint"),
        # Credentials in the URL would reach every Model's status in the messages that name the endpoint.
        (
            {"sources": {"huggingFace": {"endpoint": "https://user:secret@mirror.example.com"}}},
            "aiModels.sources.huggingFace.endpoint",
        ),
        (
            {"sources": {"huggingFace": {"endpoint": "https://mirror.example.com/?token=secret"}}},
            "aiModels.sources.huggingFace.endpoint",
        ),
        ({"artifacts": {"bucket": None}}, "aiModels.artifacts: 'bucket' is a required property"),
    ],
)
def test_invalid_setting_is_refused_with_its_name(override: dict[str, Any], expected: str) -> None:
    with pytest.raises(InvalidModuleValues) as error:
        module_values(deep_merge(MINIMAL_SETTINGS, override))
    assert expected in str(error.value)


@pytest.mark.parametrize(
    "repository",
    [
        "mirror.example.com/ai-models",
        "mirror.example.com:5000/deckhouse/ai-models",
        "localhost:5000/a/b-c.d_e",
    ],
)
def test_a_mirror_repository_is_accepted(repository: str) -> None:
    settings = {
        "delivery": {"materializer": {"imageRepository": repository, "imagePullSecretNames": ["mirror-pull"]}}
    }
    values = module_values(deep_merge(MINIMAL_SETTINGS, settings))
    assert values["aiModels"]["delivery"]["materializer"]["imageRepository"] == repository


def test_module_cannot_be_enabled_without_an_object_store() -> None:
    with pytest.raises(InvalidModuleValues, match="'artifacts' is a required property"):
        module_values({})


def test_internal_values_are_declared_and_closed() -> None:
    internal = values_schema()["properties"]["internal"]
    assert internal["additionalProperties"] is False
    with pytest.raises(InvalidModuleValues, match=r"aiModels\.internal: Additional properties"):
        module_values(internal={"undeclaredKey": 1})


def test_the_delivery_mode_vocabulary_is_the_evaluators() -> None:
    settings = load_yaml(OPENAPI_DIR / "config-values.yaml")["properties"]
    assert settings["delivery"]["properties"]["mode"]["enum"] == [mode.value for mode in DeliveryMode]


def test_no_internal_value_repeats_what_the_controller_owns() -> None:
    """The StorageClass and the storage-prerequisites verdict are the controller's (D151): values
    no template reads would be a second producer of the same signal."""
    internal = load_yaml(OPENAPI_DIR / "values.yaml")["properties"]["internal"]["properties"]
    assert "delivery" not in internal
    assert "storagePrerequisites" not in internal


# ----- delivery.provisioningTimeout: the schema and the controller read one grammar ----------------

ACCEPTED_DURATIONS = {"10m": 600, "90s": 90, "1h30m": 5400, "2h": 7200, "1h0m5s": 3605, "0h1s": 1}
REFUSED_DURATIONS = ["", "m", "10", "10 m", "1d", "1.5h", "30m1h", "10M", "-5m", "PT10M"]


@pytest.mark.parametrize(("duration", "seconds"), ACCEPTED_DURATIONS.items())
def test_a_provisioning_timeout_the_schema_accepts_is_the_controllers_duration(
    duration: str, seconds: int
) -> None:
    values = module_values(deep_merge(MINIMAL_SETTINGS, {"delivery": {"provisioningTimeout": duration}}))
    assert values["aiModels"]["delivery"]["provisioningTimeout"] == duration
    settings = ControllerSettings.model_validate({"delivery_provisioning_timeout": duration})
    assert settings.delivery_provisioning_timeout.total_seconds() == seconds


@pytest.mark.parametrize("duration", REFUSED_DURATIONS)
def test_a_provisioning_timeout_that_is_not_a_duration_is_refused_with_its_name(duration: str) -> None:
    with pytest.raises(InvalidModuleValues, match=r"aiModels\.delivery\.provisioningTimeout"):
        module_values(deep_merge(MINIMAL_SETTINGS, {"delivery": {"provisioningTimeout": duration}}))
    # The controller refuses it too; it also reads bare seconds ("10"), which the setting never
    # hands it, and an empty value is "not set" there (the default).
    if duration and not duration.isdigit():
        with pytest.raises(ValidationError, match="delivery_provisioning_timeout"):
            ControllerSettings.model_validate({"delivery_provisioning_timeout": duration})


def test_the_provisioning_timeout_defaults_to_the_controllers_default() -> None:
    node = load_yaml(OPENAPI_DIR / "config-values.yaml")["properties"]["delivery"]["properties"]
    default = node["provisioningTimeout"]["default"]
    field = ControllerSettings.model_fields["delivery_provisioning_timeout"]
    assert (
        ControllerSettings.model_validate(
            {"delivery_provisioning_timeout": default}
        ).delivery_provisioning_timeout
        == field.default
    )
