"""ai_models.module_image against lib-helm's helm_lib_module_image (charts/helm_lib/templates/
_module_image.tpl, deckhouse_lib_helm 1.71.11): the package path Deckhouse takes when it renders
the module as a package, and the legacy path of an external module otherwise (D128)."""

from __future__ import annotations

import helm_python
import pytest

from support.probe import ProbeChart
from support.scenarios import DEFAULT_REGISTRY, scenario

# Deckhouse renders a module installed as a package with .Module.Package in the template context;
# lib-helm's helm_lib_module_image then builds <Registry.repository>/<Name>@<Digests.<image>>.
# A plain Helm render has no .Module, so the probe hands the helper such a context itself.
PACKAGE_DIGEST = "sha256:" + "e5" * 32
PACKAGE_CONTEXT = (
    '{{{{ include "ai_models.module_image" (list (dict "Module" (dict "Package" {package}) '
    '"Values" .Values "Chart" .Chart) "aiModels") }}}}'
)
PACKAGE = (
    '(dict "Name" "ai-models" "Registry" (dict "repository" "registry.example.com/deckhouse/packages") '
    f'"Digests" (dict "aiModels" "{PACKAGE_DIGEST}"))'
)


def test_module_image_of_a_package_comes_from_the_package_registry(probe_chart: ProbeChart) -> None:
    image = probe_chart.evaluate(PACKAGE_CONTEXT.format(package=PACKAGE))
    assert image == f"registry.example.com/deckhouse/packages/ai-models@{PACKAGE_DIGEST}"


@pytest.mark.parametrize(
    ("package", "message"),
    [
        (
            f'(dict "Name" "ai-models" "Digests" (dict "aiModels" "{PACKAGE_DIGEST}"))',
            r"Module\.Package\.Registry\.repository is not set",
        ),
        (
            '(dict "Registry" (dict "repository" "registry.example.com/p") '
            f'"Digests" (dict "aiModels" "{PACKAGE_DIGEST}"))',
            r"Module\.Package\.Name is not set",
        ),
        (
            '(dict "Name" "ai-models" "Registry" (dict "repository" "registry.example.com/p"))',
            r"Module\.Package\.Digests\.aiModels is not set",
        ),
    ],
    ids=["no-registry", "no-name", "no-digest"],
)
def test_module_image_of_a_package_fails_naming_what_is_missing(
    probe_chart: ProbeChart, package: str, message: str
) -> None:
    with pytest.raises(helm_python.HelmRenderError, match=message):
        probe_chart.evaluate(PACKAGE_CONTEXT.format(package=package))


def test_module_image_without_a_package_follows_lib_helms_legacy_path(probe_chart: ProbeChart) -> None:
    """No .Module: global digests, the external module's registry.base plus the module name."""
    values = scenario("minimal").values()
    image = probe_chart.evaluate('{{ include "ai_models.module_image" (list . "aiModels") }}', values)
    assert image == f"{DEFAULT_REGISTRY['base']}/ai-models@sha256:{'a1' * 32}"
