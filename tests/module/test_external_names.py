"""Every external name of the module is spelled once, in `ai_models/names.py`.

A name a user, an operator or another module sees (the namespace, Secret, ConfigMap, Service and
Lease names, labels, annotations, finalizers, API paths, environment variables, metric and alert
names) is a contract: a second spelling drifts. This test reads the runtime package and the hooks
with `ast` and fails on any string literal that holds one, outside names.py.

What counts: the string constants of the code (f-string parts included). Docstrings do not count:
they document the names and are not used as them. Comments are not in the syntax tree.

Process settings are the one derived kind: pydantic-settings reads the field `store_url` as
`names.ENV_PREFIX + "STORE_URL"`. A message that names such a variable spells it
`Settings.variable("store_url")` (the field must exist; checked below), never as a literal.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ai_models.api.settings import ApiSettings
from ai_models.controller.settings import ControllerSettings
from ai_models.names import (
    API_IN_CLUSTER_URL,
    API_SERVICE,
    CONTROLLER_LEASE,
    ENV_PREFIX,
    MODULE_NAMESPACE,
    PUBLISHER_TEMPLATE_CONFIGMAP,
)
from ai_models.publish.settings import PublishSettings
from ai_models.settings import Settings
from support.paths import REPO_ROOT
from support.render import RenderedChart, render_chart
from support.values import module_values

PACKAGE = REPO_ROOT / "images" / "ai-models" / "src" / "ai_models"
HOOKS = REPO_ROOT / "hooks"
NAMES = PACKAGE / "names.py"
SETTINGS_CLASSES: dict[str, type[Settings]] = {
    cls.__name__: cls for cls in (Settings, ApiSettings, ControllerSettings, PublishSettings)
}

# The shapes of the module's external names (ARCHITECTURE.md sections 4-8).
EXTERNAL_NAME = {
    "the module namespace": re.compile(r"\bd8-ai-models\b"),
    "an object or component name": re.compile(r"\bai-models-[a-z0-9]"),
    "a label, annotation or finalizer key": re.compile(r"(?:\bai\.deckhouse\.io|\bapp\.kubernetes\.io)/"),
    "a webhook or CSI driver name": re.compile(r"\.ai-models\.deckhouse\.io\b"),
    "an API path": re.compile(r"/api/(?:catalog-import|serving|upload|internal)/"),
    "an environment variable": re.compile(r"\bAI_MODELS_"),
    "a metric or alert name": re.compile(r"\bd8_ai_models_|\bD8AIModels[A-Z]"),
}


@dataclasses.dataclass(frozen=True)
class Literal:
    path: Path
    line: int
    column: int
    text: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}: {self.text[:100]!r}"


def sources() -> list[Path]:
    files = [*sorted(PACKAGE.rglob("*.py")), *sorted(HOOKS.rglob("*.py"))]
    return [path for path in files if path != NAMES and "__pycache__" not in path.parts]


def docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def literals(path: Path, text: str) -> Iterator[Literal]:
    tree = ast.parse(text, filename=str(path))
    skipped = docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            yield Literal(path, node.lineno, node.col_offset, node.value)


def external_names(path: Path, text: str) -> list[tuple[Literal, str]]:
    found = []
    for literal in sorted(literals(path, text), key=lambda item: (item.line, item.column)):
        for kind, pattern in EXTERNAL_NAME.items():
            if pattern.search(literal.text):
                found.append((literal, kind))
                break
    return found


def test_no_external_name_is_spelled_outside_names_py() -> None:
    found = [item for path in sources() for item in external_names(path, path.read_text(encoding="utf-8"))]

    assert not found, (
        "external names spelled outside ai_models/names.py; define each once there and import it "
        "(hooks too: `from ai_models.names import ...`); a setting's variable in a message is "
        "`Settings.variable('<field>')`:\n" + "\n".join(f"  {literal}  ({kind})" for literal, kind in found)
    )


def setting_variable_calls(path: Path, text: str) -> Iterator[tuple[int, str, str]]:
    """`<SomeSettings>.variable("<field>")` calls: (line, class name, field)."""
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "variable"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in SETTINGS_CLASSES
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            yield node.lineno, node.func.value.id, str(node.args[0].value)


def test_every_setting_variable_a_message_names_is_a_field_of_its_settings() -> None:
    unknown = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {owner}.variable({field!r})"
        for path in sources()
        for line, owner, field in setting_variable_calls(path, path.read_text(encoding="utf-8"))
        if field not in SETTINGS_CLASSES[owner].model_fields
    ]

    assert not unknown, "these settings do not exist (a renamed field?):\n" + "\n".join(unknown)


# ----- the chart spells the same names ------------------------------------------------------------


@pytest.fixture(scope="module")
def chart() -> RenderedChart:
    return render_chart(module_values())


def containers_with_settings(chart: RenderedChart) -> Iterator[tuple[str, type[Settings], dict[str, Any]]]:
    """Every container that runs `ai-models`, with the settings class of its sub-command."""
    processes: dict[tuple[str, str], type[Settings]] = {
        ("Deployment", "ai-models-api"): ApiSettings,
        ("Deployment", "ai-models-controller"): ControllerSettings,
    }
    for (kind, name), settings in processes.items():
        for item in chart.get(kind, name, MODULE_NAMESPACE)["spec"]["template"]["spec"]["containers"]:
            yield f"{kind} {name}, container {item['name']}", settings, item
    template = chart.get("ConfigMap", PUBLISHER_TEMPLATE_CONFIGMAP, MODULE_NAMESPACE)["data"]["template.yaml"]
    for item in yaml.safe_load(template)["spec"]["containers"]:
        yield f"the publisher pod template, container {item['name']}", PublishSettings, item


def test_every_variable_the_chart_sets_is_a_setting_of_that_process(chart: RenderedChart) -> None:
    found = list(containers_with_settings(chart))
    assert {settings for _, settings, _ in found} == {ApiSettings, ControllerSettings, PublishSettings}
    unknown = [
        f"{where}: {variable['name']} (no field {variable['name'].removeprefix(ENV_PREFIX).lower()!r} "
        f"in {settings.__name__})"
        for where, settings, container in found
        for variable in container.get("env") or []
        if variable["name"].startswith(ENV_PREFIX)
        and variable["name"].removeprefix(ENV_PREFIX).lower() not in settings.model_fields
    ]

    assert not unknown, "the chart sets variables no process reads:\n" + "\n".join(unknown)


def test_the_chart_renders_the_objects_names_py_names(chart: RenderedChart) -> None:
    chart.get("Namespace", MODULE_NAMESPACE)
    chart.get("Service", API_SERVICE, MODULE_NAMESPACE)
    chart.get("ConfigMap", PUBLISHER_TEMPLATE_CONFIGMAP, MODULE_NAMESPACE)
    controller = {
        variable["name"]: variable.get("value")
        for where, _, container in containers_with_settings(chart)
        if where.startswith("Deployment ai-models-controller")
        for variable in container.get("env") or []
    }
    assert controller[ControllerSettings.variable("controller_lease_name")] == CONTROLLER_LEASE
    assert controller[ControllerSettings.variable("upload_in_cluster_url")] == API_IN_CLUSTER_URL


# ----- the rule itself ----------------------------------------------------------------------------


SAMPLE = '''
"""The Secret ai-models-storage-accounting in d8-ai-models (a docstring: documentation)."""
LEDGER = "ai-models-storage-accounting"


def read():
    """Reads AI_MODELS_STORE_URL."""
    return f"set AI_MODELS_STORE_URL to {LEDGER}", {"app.kubernetes.io/name": 1}, "/api/serving/v1/x"
'''


def test_the_rule_finds_every_kind_of_literal_and_ignores_docstrings(tmp_path: Path) -> None:
    found = external_names(tmp_path / "sample.py", SAMPLE)

    assert [(literal.line, literal.text, kind) for literal, kind in found] == [
        (3, "ai-models-storage-accounting", "an object or component name"),
        (8, "set AI_MODELS_STORE_URL to ", "an environment variable"),
        (8, "app.kubernetes.io/name", "a label, annotation or finalizer key"),
        (8, "/api/serving/v1/x", "an API path"),
    ]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("d8-ai-models", "the module namespace"),
        ("ai.deckhouse.io/model", "a label, annotation or finalizer key"),
        ("controller.ai.deckhouse.io/last-handled", "a label, annotation or finalizer key"),
        ("node-cache.ai-models.deckhouse.io", "a webhook or CSI driver name"),
        ("delivery.ai-models.deckhouse.io", "a webhook or CSI driver name"),
        ("d8_ai_models_models", "a metric or alert name"),
        ("D8AIModelsStoragePrerequisitesNotSatisfied", "a metric or alert name"),
    ],
)
def test_each_shape_of_external_name_is_recognised(tmp_path: Path, text: str, kind: str) -> None:
    assert [found for _, found in external_names(tmp_path / "sample.py", f"X = {text!r}\n")] == [kind]


@pytest.mark.parametrize(
    "text",
    [
        "ai-models publish: invalid setting",
        "/api/models",
        "https://huggingface.co/api/models/x",
        "ai_models.names",
    ],
)
def test_names_that_are_not_the_module_s_own_are_left_alone(tmp_path: Path, text: str) -> None:
    assert external_names(tmp_path / "sample.py", f"X = {text!r}\n") == []


def test_names_py_holds_the_names_the_rule_looks_for() -> None:
    text = NAMES.read_text(encoding="utf-8")

    kinds = {kind for _, kind in external_names(NAMES, text)}
    assert kinds == set(EXTERNAL_NAME)
