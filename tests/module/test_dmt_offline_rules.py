"""DMT's rules that read only the repository's files, each encoded as a test against them (D163),
so a change that `dmt lint` would refuse fails here first, without the dmt binary. Each test
names its DMT linter and rule (deckhouse/dmt, pkg/linters/<linter>/rules/); the rules other tests
already hold, and those not checkable offline, are listed in docs/internal/DECISIONS.md, D163."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.paths import REPO_ROOT

CYRILLIC = re.compile("[\u0400-\u04ff]")
# no-cyrillic/files: the files it reads and the ones it skips (its skipDocRe, matched anywhere in
# the path as DMT does).
NO_CYRILLIC_SUFFIXES = (".yaml", ".yml", ".json", ".go")
NO_CYRILLIC_SKIPS = re.compile(
    r"doc-ru-.+\.ya?ml$|\.ru\.ya?ml$|\.ru\.json$|\.ru\.md$|\.ru\.html$|_RU\.md$|_ru\.html$"
    r"|docs/site/_.+|docs/documentation/_.+|tools/spelling/.+|openapi/conversions/.+|module\.yaml|ru\..+"
)
# docs/size: the limit of docs/ without docs/internal.
DOCS_SIZE_LIMIT = 15 * 1024 * 1024


def tracked_files() -> list[Path]:
    """The files of a clean clone (what DMT sees in CI), not local caches or environments."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO_ROOT, check=True, capture_output=True
    ).stdout.decode()
    return [REPO_ROOT / name for name in listed.split("\0") if name and (REPO_ROOT / name).is_file()]


def openapi_files() -> list[Path]:
    """What the openapi linter parses: openapi/**.yaml and crds/**.yaml, without the doc-ru-
    translations and -tests.yaml files."""
    found = []
    for directory in ("openapi", "crds"):
        for path in sorted((REPO_ROOT / directory).rglob("*.y*ml")):
            if path.name.startswith("doc-ru-") or path.name.endswith("-tests.yaml"):
                continue
            found.append(path)
    return found


def documents(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc is not None]


def walk(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every (absolute key, value) pair, with list indexes as keys, as DMT's openapi.Parse gives them."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            absolute = f"{prefix}.{key}" if prefix else str(key)
            yield absolute, value
            yield from walk(value, absolute)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from walk(item, f"{prefix}[{index}]")


def rel(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


OPENAPI_FILES = openapi_files()


def test_the_openapi_rules_see_the_settings_and_every_crd() -> None:
    # Otherwise the tests below could pass on nothing.
    names = {rel(path) for path in OPENAPI_FILES}
    assert {"openapi/config-values.yaml", "openapi/values.yaml"} <= names
    assert len([name for name in names if name.startswith("crds/")]) >= 3


def test_no_cyrillic_files_outside_the_russian_ones() -> None:
    """DMT no-cyrillic/files (error): no Cyrillic letter in a .yaml, .yml, .json or .go file but the
    Russian translations."""
    checked = [
        path
        for path in tracked_files()
        if path.suffix in NO_CYRILLIC_SUFFIXES and not NO_CYRILLIC_SKIPS.search(rel(path))
    ]
    assert any(rel(path) == "openapi/config-values.yaml" for path in checked)
    offending = [
        f"{rel(path)}:{number}"
        for path in checked
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if CYRILLIC.search(line)
    ]
    assert offending == []


def enum_problem(value: str) -> str | None:
    """DMT openapi/enum's test of one value: CamelCase with an initial capital; a dot only after a
    digit (a float)."""
    if not value:
        return None
    if value[0].isalpha() and not value[0].isupper():
        return f"{value!r} must start with a capital letter"
    for index, char in enumerate(value):
        if char.isalpha() or char.isdigit():
            continue
        if char == "." and index and value[index - 1].isdigit():
            continue
        return f"{value!r} must be in CamelCase"
    return None


@pytest.mark.parametrize(
    ("value", "valid"),
    [("SharedPVC", True), ("1.5", True), ("", True), ("debug", False), ("Shared-PVC", False), ("A B", False)],
)
def test_the_enum_rule_as_dmt_words_it(value: str, valid: bool) -> None:
    assert (enum_problem(value) is None) is valid


@pytest.mark.parametrize("path", OPENAPI_FILES, ids=rel)
def test_openapi_enum_values_are_camel_case(path: Path) -> None:
    """DMT openapi/enum (error): every string of an `enum` in openapi/ and crds/."""
    problems = [
        f"{key}: {problem}"
        for doc in documents(path)
        for key, value in walk(doc)
        if key.rsplit(".", 1)[-1] == "enum" and isinstance(value, list)
        for item in value
        if isinstance(item, str) and (problem := enum_problem(item)) is not None
    ]
    assert problems == []


@pytest.mark.parametrize("path", OPENAPI_FILES, ids=rel)
def test_high_availability_setting_has_no_default(path: Path) -> None:
    """DMT openapi/high-availability (error): the top-level `highAvailability` has no `default`
    (so the global setting and the discovered control plane decide when it is not set)."""
    for doc in documents(path):
        setting = ((doc.get("properties") or {}) if isinstance(doc, Mapping) else {}).get("highAvailability")
        if setting is not None:
            assert "default" not in setting, rel(path)


@pytest.mark.parametrize("path", [path for path in OPENAPI_FILES if rel(path).startswith("crds/")], ids=rel)
def test_crd_schemas_mark_deprecation_with_x_doc_deprecated(path: Path) -> None:
    """DMT openapi/deckhouse-crds (error): no `deprecated` key in a CRD's properties (Deckhouse's
    documentation reads `x-doc-deprecated: true`), and the CRD is apiextensions.k8s.io/v1."""
    for doc in documents(path):
        assert doc["apiVersion"] == "apiextensions.k8s.io/v1", rel(path)
        for version in doc["spec"]["versions"]:
            properties = version["schema"]["openAPIV3Schema"].get("properties") or {}
            found = [key for key, _ in walk(properties) if key.rsplit(".", 1)[-1] == "deprecated"]
            assert found == [], f"{rel(path)} {version['name']}"


@pytest.mark.parametrize(
    "path", [path for path in OPENAPI_FILES if rel(path).startswith("openapi/")], ids=rel
)
def test_settings_validations_are_deckhouses_and_complete(path: Path) -> None:
    """DMT openapi/deckhouse-validations (warning): in openapi/, `x-kubernetes-validations` is
    ignored by deckhouse-controller (a mix-up for `x-deckhouse-validations`), and every
    `x-deckhouse-validations` entry has a non-empty `expression` and `message`."""
    for doc in documents(path):
        for key, value in walk(doc):
            name = key.rsplit(".", 1)[-1]
            assert name != "x-kubernetes-validations", f"{rel(path)}: {key}"
            if name == "x-deckhouse-validations":
                assert isinstance(value, list), f"{rel(path)}: {key}"
                assert value, f"{rel(path)}: {key}"
                for entry in value:
                    assert isinstance(entry, Mapping), f"{rel(path)}: {key}"
                    for field in ("expression", "message"):
                        assert isinstance(entry.get(field), str), f"{key}.{field}"
                        assert entry[field].strip(), f"{key}.{field}"


def test_docs_readme_exists_and_is_not_empty() -> None:
    """DMT docs/readme (error): docs/README.md is the module's page in the documentation."""
    readme = REPO_ROOT / "docs" / "README.md"
    assert readme.is_file()
    assert readme.read_text(encoding="utf-8").strip()


def test_docs_stay_under_the_size_limit() -> None:
    """DMT docs/size (error): docs/ without docs/internal is at most 15 MiB."""
    docs = REPO_ROOT / "docs"
    total = sum(
        path.stat().st_size
        for path in docs.rglob("*")
        if path.is_file() and not path.is_relative_to(docs / "internal")
    )
    assert 0 < total <= DOCS_SIZE_LIMIT


def test_templates_never_write_the_cluster_domain() -> None:
    """DMT templates/cluster-domain (error): no template source (.yaml, .yml, .tpl, comments
    included) holds `cluster.local`; the domain is `global.discovery.clusterDomain`
    (tests/render/test_scenarios.py holds the rendered manifests to the same)."""
    templates = REPO_ROOT / "templates"
    sources = [path for path in templates.rglob("*") if path.suffix in {".yaml", ".yml", ".tpl"}]
    assert sources
    assert [rel(path) for path in sources if "cluster.local" in path.read_text(encoding="utf-8")] == []


def test_settings_version_and_conversions_agree() -> None:
    """DMT module/conversions (error): `x-config-version` of openapi/config-values.yaml is set
    exactly when openapi/conversions/ holds versions, which run 2, 3, ... up to it."""
    settings = documents(REPO_ROOT / "openapi" / "config-values.yaml")[0]
    config_version = int(settings.get("x-config-version") or 0)
    folder = REPO_ROOT / "openapi" / "conversions"
    versions = sorted(
        int(documents(path)[0]["version"])
        for path in (folder.glob("v*.yaml") if folder.is_dir() else [])
        if re.fullmatch(r"v\d+\.yaml", path.name)
    )
    if not versions:
        assert config_version == 0, "x-config-version without conversions"
        return
    assert config_version == versions[-1]
    assert versions == list(range(2, versions[-1] + 1))
