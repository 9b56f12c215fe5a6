"""module.yaml, release.yaml, Chart.yaml, .helmignore and oss.yaml as Deckhouse reads them."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import pytest
import yaml

from support.paths import REPO_ROOT
from support.yamlfiles import load_yaml

# A label key's name part (Deckhouse turns each tag into the label `module.deckhouse.io/<tag>`).
LABEL_NAME = re.compile(r"^[a-z0-9A-Z]([-a-z0-9A-Z_.]{0,61}[a-z0-9A-Z])?$")
CYRILLIC = re.compile(r"[А-Яа-яЁё]")


@pytest.fixture(scope="module")
def module() -> dict[str, Any]:
    loaded: dict[str, Any] = load_yaml(REPO_ROOT / "module.yaml")
    return loaded


def test_module_identity_and_namespace(module: dict[str, Any]) -> None:
    assert module["name"] == "ai-models"
    assert module["namespace"] == "d8-ai-models"
    assert module["stage"] in {"Experimental", "Preview", "General Availability", "Deprecated"}


def test_module_requires_deckhouse_1_75_and_kubernetes_1_34(module: dict[str, Any]) -> None:
    assert module["requirements"] == {"deckhouse": ">= 1.75.0", "kubernetes": ">= 1.34"}
    # With a Deckhouse floor >= 1.72 the module must not declare a weight (DMT `requirements`).
    assert "weight" not in module


def test_module_has_english_and_russian_descriptions(module: dict[str, Any]) -> None:
    assert module["descriptions"]["en"].strip()
    assert not CYRILLIC.search(module["descriptions"]["en"])
    assert CYRILLIC.search(module["descriptions"]["ru"])


def test_every_tag_becomes_a_valid_label_key(module: dict[str, Any]) -> None:
    assert module["tags"]
    for tag in module["tags"]:
        assert isinstance(tag, str)
        assert LABEL_NAME.match(tag), f"tag {tag!r} is not a valid label name"
        assert len(f"module.deckhouse.io/{tag}".split("/", 1)[1]) <= 63


def test_disabling_the_module_needs_confirmation(module: dict[str, Any]) -> None:
    assert module["disable"]["confirmation"] is True
    assert module["disable"]["message"].strip()


def _deckhouse_floor(module: dict[str, Any]) -> tuple[int, int]:
    found = re.fullmatch(r">=\s*v?(\d+)\.(\d+)(?:\.\d+)?", module["requirements"]["deckhouse"])
    assert found, "requirements.deckhouse is expected to be a plain '>= X.Y[.Z]' floor"
    return int(found[1]), int(found[2])


def test_disable_messages_are_localized_with_a_fallback_for_older_deckhouse(module: dict[str, Any]) -> None:
    # DMT's module.yaml rule (deckhouse/dmt pkg/linters/module/rules/module_yaml.go): Deckhouse
    # >= 1.77 reads disable.messages {en, ru}, older releases only disable.message; both languages
    # are required, and the fallback must stay while the floor admits a release below 1.77 (and
    # must go once it does not).
    disable = module["disable"]
    messages = disable["messages"]
    assert set(messages) == {"en", "ru"}
    assert messages["en"].strip()
    assert not CYRILLIC.search(messages["en"])
    assert CYRILLIC.search(messages["ru"])
    if _deckhouse_floor(module) < (1, 77):
        assert disable["message"] == messages["en"], "the < 1.77 fallback says what the English message says"
    else:
        assert "message" not in disable, "Deckhouse >= 1.77 reads only disable.messages: drop the fallback"


def test_subsystems_are_listed(module: dict[str, Any]) -> None:
    assert module["subsystems"]
    assert all(isinstance(item, str) and item for item in module["subsystems"])


def test_chart_and_package_and_release_agree_on_the_version() -> None:
    chart = load_yaml(REPO_ROOT / "Chart.yaml")
    release = load_yaml(REPO_ROOT / "release.yaml")
    package = tomllib.loads((REPO_ROOT / "images/ai-models/pyproject.toml").read_text(encoding="utf-8"))
    assert chart["name"] == "ai-models"
    assert release["version"] == f"v{chart['version']}" == f"v{package['project']['version']}"


def test_release_changelog_is_a_short_english_projection() -> None:
    release = load_yaml(REPO_ROOT / "release.yaml")
    changelog = release["changelog"]
    assert set(changelog) <= {"features", "fixes", "security", "breaking", "requirements"}
    entries = [entry for section in changelog.values() for entry in section]
    assert all(isinstance(entry, str) and entry.strip() for entry in entries)
    assert not any(CYRILLIC.search(entry) for entry in entries)
    text = " ".join(entries)
    for contract_name in (
        "ModelCatalogSource",
        "d8_ai_models_storage_prerequisites_satisfied",
        "/api/internal/v1/models/lookup",
        "maxConcurrentMaterializations",
        "DownloadTask",
    ):
        assert contract_name in text


def test_helmignore_keeps_templates_and_monitoring_and_drops_the_rest() -> None:
    patterns = [
        line.strip()
        for line in (REPO_ROOT / ".helmignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns
    assert not {"*", "**", "templates", "Chart.yaml", "monitoring"} & set(patterns)
    for heavy in ("crds", "images", "hooks", "openapi", "docs", "tests"):
        assert heavy in patterns


# Licenses a work under Apache-2.0 may depend on and ship with (permissive ones; the ASF's
# "Category A", https://www.apache.org/legal/resolved.html). oss.yaml must stay inside this set.
APACHE_COMPATIBLE = {"Apache-2.0", "MIT", "BSD-2-Clause", "BSD-3-Clause", "ISC", "PSF-2.0", "0BSD"}


def test_the_module_code_is_licensed_under_apache_2_0() -> None:
    # D129: the module's own code is Apache-2.0, the Deckhouse ecosystem's license, stated once in
    # LICENSE (the verbatim text) and in the package metadata.
    text = (REPO_ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.split()[:5] == ["Apache", "License", "Version", "2.0,", "January"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    package = tomllib.loads((REPO_ROOT / "images/ai-models/pyproject.toml").read_text(encoding="utf-8"))
    assert package["project"]["license"] == {"text": "Apache-2.0"}


def test_license_ships_in_the_bundle_not_in_the_helm_release() -> None:
    # Apache-2.0 4(a): recipients get a copy of the license. The bundle is what is distributed;
    # the Helm release leaves it out (DMT's helmignore rule lists every non-chart root entry).
    text = re.sub(
        r"\{\{-? /\*.*?\*/ -?\}\}",
        "",
        (REPO_ROOT / ".werf/stages/bundle.yaml").read_text("utf-8"),
        flags=re.S,
    )
    [bundle] = [image for image in yaml.safe_load_all(text) if image and image.get("image") == "bundle"]
    assert "LICENSE" in bundle["git"][0]["includePaths"]
    helmignore = (REPO_ROOT / ".helmignore").read_text(encoding="utf-8").splitlines()
    assert "LICENSE" in helmignore


def test_every_dependency_license_is_compatible_with_apache_2_0() -> None:
    licenses = {entry["id"]: entry["license"] for entry in load_yaml(REPO_ROOT / "oss.yaml")}
    assert licenses
    incompatible = {name: license for name, license in licenses.items() if license not in APACHE_COMPATIBLE}
    assert not incompatible, f"check these against Apache-2.0 before shipping them: {incompatible}"


def _runtime_dependencies() -> dict[str, str]:
    package = tomllib.loads((REPO_ROOT / "images/ai-models/pyproject.toml").read_text(encoding="utf-8"))
    pins: dict[str, str] = {}
    for requirement in package["project"]["dependencies"]:
        name, _, version = requirement.partition("==")
        assert version, f"runtime dependency {requirement!r} must be pinned with =="
        pins[name.strip().lower()] = version.strip()
    return pins


def test_every_runtime_dependency_is_attributed_in_oss_yaml() -> None:
    entries = load_yaml(REPO_ROOT / "oss.yaml")
    ids = [entry["id"] for entry in entries]
    assert len(ids) == len(set(ids)), "oss.yaml ids must be unique"
    for entry in entries:
        assert {"id", "name", "description", "link", "license", "version"} <= set(entry)
        assert entry["link"].startswith("https://")
    attributed = {entry["id"].lower(): str(entry["version"]) for entry in entries}
    assert attributed == _runtime_dependencies()
