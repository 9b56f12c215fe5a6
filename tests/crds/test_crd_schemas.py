"""The module's CRDs: structure, metadata, CEL rules and every example in docs/."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from kubeemu.crdvalidation import CRDSchema
from support.docs import documented_objects
from support.paths import CRDS_DIR, DOCS_DIR
from support.schemawalk import walk
from support.yamlfiles import load_yaml

VERSION = "v1alpha1"
GROUP = "ai.deckhouse.io"
CRD_FILES = {
    "Model": "ai.deckhouse.io_models.yaml",
    "ClusterModel": "ai.deckhouse.io_clustermodels.yaml",
    "ModelCatalogSource": "ai.deckhouse.io_modelcatalogsources.yaml",
}
CASE_FILES = {
    "Model": "models.yaml",
    "ClusterModel": "models.yaml",
    "ModelCatalogSource": "modelcatalogsources.yaml",
}
CASES_DIR = Path(__file__).parent / "cases"


def crd(kind: str) -> dict[str, Any]:
    loaded: dict[str, Any] = load_yaml(CRDS_DIR / CRD_FILES[kind])
    return loaded


def schema(kind: str) -> CRDSchema:
    return CRDSchema.from_crd(crd(kind), version=VERSION)


def test_crds_directory_holds_exactly_the_three_kinds_and_their_translations() -> None:
    manifests = sorted(path.name for path in CRDS_DIR.glob("*.yaml") if not path.name.startswith("doc-"))
    assert manifests == sorted(CRD_FILES.values())
    translations = sorted(path.name for path in CRDS_DIR.glob("doc-ru-*.yaml"))
    assert translations == sorted(f"doc-ru-{name}" for name in CRD_FILES.values())


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_crd_metadata_follows_deckhouse_conventions(kind: str) -> None:
    definition = crd(kind)
    spec = definition["spec"]
    assert definition["apiVersion"] == "apiextensions.k8s.io/v1"
    assert definition["metadata"]["labels"] == {"heritage": "deckhouse", "module": "ai-models"}
    assert definition["metadata"]["name"] == f"{spec['names']['plural']}.{GROUP}"
    assert spec["group"] == GROUP
    assert spec["names"]["kind"] == kind
    assert spec["names"]["categories"] == ["ai-models"]
    assert spec["scope"] == ("Namespaced" if kind == "Model" else "Cluster")
    [version] = spec["versions"]
    assert version["name"] == VERSION
    assert version["served"] is True
    assert version["storage"] is True
    assert version["subresources"] == {"status": {}}
    columns = {column["name"] for column in version["additionalPrinterColumns"]}
    assert "Age" in columns


# D130: `kubectl get mcs` and friends. Short names kubectl already resolves elsewhere would make it
# pick one resource and warn: Kubernetes 1.34's built-in short names, and those of Deckhouse's own
# kinds (deckhouse/deckhouse deckhouse-controller/crds: ModuleConfig mc, ModuleSource ms,
# ModuleRelease mr, ModulePackage mp, ModulePullOverride mpo, ModuleUpdatePolicy mup; NodeGroup ng).
SHORT_NAMES = {"Model": ["mdl"], "ClusterModel": ["cmdl"], "ModelCatalogSource": ["mcs"]}
TAKEN_SHORT_NAMES = {
    "cm", "cs", "csr", "crd", "crds", "cj", "deploy", "ds", "ep", "ev", "hpa", "ing", "limits",
    "netpol", "no", "ns", "pc", "pdb", "po", "pv", "pvc", "quota", "rc", "rs", "sa", "sc", "sts",
    "svc", "vac",
    "mc", "ms", "mr", "mp", "mpo", "mup", "ng",
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_short_names_are_ours_and_clash_with_nothing(kind: str) -> None:
    names = crd(kind)["spec"]["names"]
    assert names["shortNames"] == SHORT_NAMES[kind]
    others = {name for other, short in SHORT_NAMES.items() if other != kind for name in short}
    plurals = {crd(other)["spec"]["names"]["plural"] for other in CRD_FILES}
    for short in names["shortNames"]:
        assert short == short.lower()
        assert short not in TAKEN_SHORT_NAMES | others | plurals, f"{short} is taken"


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_schema_is_structural_and_every_rule_compiles(kind: str) -> None:
    compiled = schema(kind)
    assert compiled.structural_errors() == []
    assert compiled.rules()


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_every_validation_rule_has_a_message(kind: str) -> None:
    openapi = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in walk(openapi):
        for rule in node.get("x-kubernetes-validations", []):
            assert rule.get("message", "").strip(), f"{'.'.join(path)}: rule {rule['rule']!r} has no message"


def test_removed_kinds_and_fields_do_not_exist() -> None:
    text = "\n".join(path.read_text(encoding="utf-8") for path in CRDS_DIR.glob("*.yaml"))
    for removed in ("DownloadTask", "ModelDelivery", "downloadTasks", "discovered", "availability"):
        assert removed not in text
    for kind in ("Model", "ClusterModel"):
        properties = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        assert set(properties["spec"]["properties"]) == {"source"}
        assert "state" not in properties["status"]["properties"]
        assert "metadata" not in properties["spec"]["properties"]


def test_model_and_cluster_model_share_the_status_contract() -> None:
    def status(kind: str) -> Any:
        return crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"][
            "properties"
        ]

    assert status("Model") == status("ClusterModel")


def _object(kind: str, spec: dict[str, Any] | None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "example"}
    if kind == "Model":
        metadata["namespace"] = "default"
    obj: dict[str, Any] = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": metadata}
    if spec is not None:
        obj["spec"] = spec
    if status is not None:
        obj["status"] = status
    return obj


def _cases(kind: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = load_yaml(CASES_DIR / CASE_FILES[kind])
    return [case for case in cases if kind in case.get("kinds", [kind])]


def _case_params() -> list[Any]:
    return [
        pytest.param(kind, case, id=f"{kind}: {case['name']}")
        for kind in sorted(CRD_FILES)
        for case in _cases(kind)
    ]


def _evaluate(kind: str, case: dict[str, Any]) -> list[str]:
    compiled = schema(kind)
    if "object" in case:
        obj = {**_object(kind, None), **copy.deepcopy(case["object"])}
    else:
        obj = _object(kind, copy.deepcopy(case["spec"]), copy.deepcopy(case.get("status")))
    old = _object(kind, copy.deepcopy(case["old"])) if "old" in case else None
    if old is not None:
        old = compiled.default_and_prune(old)
    return [str(error) for error in compiled.validate(compiled.default_and_prune(obj), old=old)]


@pytest.mark.parametrize(("kind", "case"), _case_params())
def test_cel_and_schema_case(kind: str, case: dict[str, Any]) -> None:
    errors = _evaluate(kind, case)
    if case["expect"] == "valid":
        assert errors == []
    else:
        assert errors, "the object must be rejected"
        for expected in case["errors"]:
            assert any(expected in error for error in errors), f"{expected!r} not in {errors}"


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_every_cel_rule_is_violated_by_some_case(kind: str) -> None:
    compiled = schema(kind)
    violated: set[str] = set()
    for case in _cases(kind):
        if case["expect"] != "invalid":
            continue
        for error_text in _evaluate(kind, case):
            violated.update(rule.message for rule in compiled.rules() if rule.message in error_text)
    assert {rule.message for rule in compiled.rules()} == violated


def _documented_objects() -> list[Any]:
    return [
        pytest.param(document, id=origin)
        for origin, document in documented_objects()
        if document.get("kind") in CRD_FILES
    ]


@pytest.mark.parametrize("document", _documented_objects())
def test_every_example_in_docs_is_a_valid_object_with_no_unknown_fields(document: dict[str, Any]) -> None:
    kind = document["kind"]
    compiled = schema(kind)
    assert document["apiVersion"] == f"{GROUP}/{VERSION}"
    pruned = compiled.default_and_prune(copy.deepcopy(document))
    assert [str(error) for error in compiled.validate(pruned)] == []

    def contains(full: Any, part: Any) -> bool:
        if isinstance(part, dict):
            return isinstance(full, dict) and all(
                key in full and contains(full[key], v) for key, v in part.items()
            )
        return bool(full == part)

    assert contains(pruned, document), "the example carries fields the apiserver would drop"


def test_docs_have_an_example_of_every_source_kind() -> None:
    sources = {
        next(iter(doc["spec"]["source"].keys() - {"authSecretRef"}))
        for param in _documented_objects()
        for doc in param.values
        if isinstance(doc, dict) and doc["kind"] in {"Model", "ClusterModel"}
    }
    assert sources == {"url", "upload", "catalog"}


@pytest.mark.parametrize("page", ["USER_GUIDE.md", "USER_GUIDE.ru.md"])
def test_user_guide_quotes_every_model_rule_message_verbatim(page: str) -> None:
    text = " ".join((DOCS_DIR / page).read_text(encoding="utf-8").split())
    for kind in ("Model", "ClusterModel"):
        for rule in schema(kind).rules():
            assert " ".join(rule.message.split()) in text, f"{page} does not explain: {rule.message}"
