"""Module identity helpers: labels, namespace, image references, pull secret."""

from __future__ import annotations

import helm_python
import pytest

from support.probe import ProbeChart
from support.values import IMAGE_DIGEST, deep_merge, module_values


def with_registry(base: str | None) -> dict[str, object]:
    values = module_values()
    values["aiModels"]["registry"] = {"base": base} if base is not None else {}
    return values


def test_module_labels_carry_heritage_and_module_plus_extras(probe_chart: ProbeChart) -> None:
    labels = probe_chart.evaluate_yaml(
        '{{ include "ai_models.module_labels" (list . (dict "app" "controller" "empty" "")) }}'
    )
    assert labels == {
        "labels": {"heritage": "deckhouse", "module": "ai-models", "app": "controller", "empty": ""}
    }


def test_module_labels_cannot_be_overridden_by_extras(probe_chart: ProbeChart) -> None:
    labels = probe_chart.evaluate_yaml(
        '{{ include "ai_models.module_labels" (list . (dict "module" "other" "heritage" "helm")) }}'
    )
    assert labels == {"labels": {"heritage": "deckhouse", "module": "ai-models"}}


def test_module_names_come_from_the_chart(probe_chart: ProbeChart) -> None:
    text = probe_chart.evaluate(
        '{{ include "ai_models.module_name" . }} {{ include "ai_models.module_camelcase_name" . }} '
        '{{ include "ai_models.module_namespace" . }}'
    )
    assert text == "ai-models aiModels d8-ai-models"


def test_module_image_of_an_external_module_uses_the_module_registry(probe_chart: ProbeChart) -> None:
    image = probe_chart.evaluate(
        '{{ include "ai_models.module_image" (list . "aiModels") }}',
        with_registry("registry.example.com/deckhouse/modules/"),
    )
    assert image == f"registry.example.com/deckhouse/modules/ai-models@{IMAGE_DIGEST}"


def test_module_image_falls_back_to_the_global_registry(probe_chart: ProbeChart) -> None:
    image = probe_chart.evaluate(
        '{{ include "ai_models.module_image" (list . "aiModels") }}', with_registry(None)
    )
    assert image == f"registry.deckhouse.io/deckhouse/ce@{IMAGE_DIGEST}"


def test_module_image_fails_naming_the_missing_digest(probe_chart: ProbeChart) -> None:
    with pytest.raises(
        helm_python.HelmRenderError, match=r"global\.modulesImages\.digests\.aiModels\.apiServer"
    ):
        probe_chart.evaluate('{{ include "ai_models.module_image" (list . "apiServer") }}')


def test_module_image_fails_when_deckhouse_published_no_digests_at_all(probe_chart: ProbeChart) -> None:
    values = module_values(global_overrides={"modulesImages": {"digests": None}})
    with pytest.raises(helm_python.HelmRenderError, match=r"has no digest"):
        probe_chart.evaluate('{{ include "ai_models.module_image" (list . "aiModels") }}', values)


def test_common_image_reads_the_common_digests_and_global_registry(probe_chart: ProbeChart) -> None:
    digest = "sha256:" + "b2" * 32
    values = module_values(
        global_overrides={"modulesImages": {"digests": {"common": {"kubeRbacProxy": digest}}}}
    )
    values = deep_merge(values, {"aiModels": {"registry": {"base": "registry.example.com/modules"}}})
    image = probe_chart.evaluate(
        '{{ include "ai_models.module_common_image" (list . "kubeRbacProxy") }}', values
    )
    assert image == f"registry.deckhouse.io/deckhouse/ce@{digest}"


def test_common_image_fails_naming_the_missing_digest(probe_chart: ProbeChart) -> None:
    with pytest.raises(
        helm_python.HelmRenderError, match=r"global\.modulesImages\.digests\.common\.kubeRbacProxy"
    ):
        probe_chart.evaluate(
            '{{ include "ai_models.module_common_image" (list . "kubeRbacProxy") }}',
            module_values(global_overrides={"modulesImages": {"digests": {"common": None}}}),
        )


def test_image_pull_secrets_name_the_module_registry_secret(probe_chart: ProbeChart) -> None:
    block = probe_chart.evaluate_yaml('{{ include "ai_models.image_pull_secrets" . }}')
    assert block == {"imagePullSecrets": [{"name": "ai-models-module-registry"}]}
    assert (
        probe_chart.evaluate('{{ include "ai_models.registry_secret_name" . }}')
        == "ai-models-module-registry"
    )
