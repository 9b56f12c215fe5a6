"""The publication pages say what the module does: the reasons and Events of a Model, the upload
API's answers, the storage alerts and metrics, the lookup and storage summary fields, and commands
whose YAML a cluster would take."""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from ai_models.api.contract import Contract, contract_document
from ai_models.api.models import Problem
from ai_models.api.models_lookup import LOOKUP_PATH
from ai_models.api.upload.models import UPLOAD_PATH
from ai_models.controller.models import reconciler
from ai_models.controller.models.metrics import ModelMetrics
from ai_models.controller.settings import ControllerSettings
from ai_models.controller.storage import catalogs, runtime
from ai_models.controller.storage.metrics import LEDGER_METRICS, StorageMetrics
from ai_models.domain.artifacts import safetensors
from ai_models.domain.artifacts.selection import GGUF_PREFERENCE
from ai_models.domain.artifacts.sniff import ACCEPTED_DESCRIPTION
from ai_models.domain.models import status as situations
from ai_models.domain.storage.codec import LEDGER_SECRET_KEY, LEDGER_SECRET_NAME
from ai_models.names import (
    CLUSTER_EVENTS_NAMESPACE,
    COMPONENT_LABEL,
    MODEL_FINALIZER,
    MODULE_NAMESPACE,
    OWNER_KIND_LABEL,
    OWNER_NAME_LABEL,
    OWNER_NAMESPACE_LABEL,
    OWNER_UID_LABEL,
    PUBLICATION_COMPONENT,
    ModelConditionType,
    ModelEvent,
    ModelPhase,
    ModelReason,
)
from ai_models.publish import archives, readback, tarformat
from kubeemu.crdvalidation import CRDSchema
from support.access_matrix import markdown_tables
from support.docs import pages, yaml_blocks
from support.manifest_schemas import validate_object
from support.metrics_contract import exported_metrics
from support.paths import CRDS_DIR, DOCS_DIR, REPO_ROOT
from support.yamlfiles import load_yaml

USER_GUIDES = ["USER_GUIDE.md", "USER_GUIDE.ru.md"]
ADMIN_GUIDES = ["ADMIN_GUIDE.md", "ADMIN_GUIDE.ru.md"]
FAQS = ["FAQ.md", "FAQ.ru.md"]
PAGES = [*USER_GUIDES, *ADMIN_GUIDES, *FAQS]
RULES_DIR = REPO_ROOT / "monitoring" / "prometheus-rules"
STORAGE_RULES = RULES_DIR / "storage.yaml"
MODULE_CRDS = {
    "Model": "ai.deckhouse.io_models.yaml",
    "ClusterModel": "ai.deckhouse.io_clustermodels.yaml",
    "ModelCatalogSource": "ai.deckhouse.io_modelcatalogsources.yaml",
}

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?[^\n]*\n(.*?)^\1$", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`([^`]+)`")
METRIC = re.compile(r"\bd8_ai_models_[a-z0-9_]+")
ALERT = re.compile(r"\bD8AIModels[A-Za-z]+")
EXAMPLE_FILE = re.compile(r"\bexamples/[A-Za-z0-9._-]+\.yaml\b")


def text(page: str) -> str:
    return (DOCS_DIR / page).read_text(encoding="utf-8")


def flat(value: str) -> str:
    """`value` with every run of whitespace (line breaks of wrapped paragraphs) as one space."""
    return " ".join(value.split())


def english(page: str) -> str:
    return page.replace(".ru.md", ".md")


def twin(page: str) -> str:
    return page.removesuffix(".md") + ".ru.md"


def sections(page: str) -> list[tuple[str, str]]:
    """The `##` sections of a page: (heading, body up to the next `##`), code blocks included."""
    found: list[tuple[str, str]] = []
    for part in re.split(r"^(?=## )", text(page), flags=re.MULTILINE)[1:]:
        heading, _, body = part.partition("\n")
        found.append((heading.removeprefix("## ").strip(), body))
    return found


def section(page: str, english_heading: str) -> str:
    """A section by its English heading: a Russian twin's section sits at the same position."""
    headings = [heading for heading, _ in sections(english(page))]
    return sections(page)[headings.index(english_heading)][1]


def codes(cell: str) -> set[str]:
    return set(CODE.findall(cell))


def table_with(page: str, first_cell: str) -> list[list[str]]:
    """The one table of `page` whose first column holds `first_cell` (a backticked name)."""
    [table] = [table for table in markdown_tables(text(page)) if any(row[0] == first_cell for row in table)]
    return table


def _headings(page: str) -> list[str]:
    return [line.split(" ", 1)[0] for line in text(page).splitlines() if re.match(r"#{2,6} ", line)]


@pytest.mark.parametrize("page", [USER_GUIDES[0], ADMIN_GUIDES[0], FAQS[0]])
def test_twins_have_the_same_headings_and_byte_identical_code_blocks(page: str) -> None:
    assert _headings(twin(page)) == _headings(page)
    assert [block for _, block in FENCE.findall(text(twin(page)))] == [
        block for _, block in FENCE.findall(text(page))
    ]


@pytest.mark.parametrize("page", [twin(page) for page in (USER_GUIDES[0], ADMIN_GUIDES[0], FAQS[0])])
def test_russian_pages_write_ye_not_yo(page: str) -> None:
    assert not re.search("[ёЁ]", text(page))


# ----- Model reasons and Events ----------------------------------------------------------------


@cache
def reasons_by_situation() -> dict[str, tuple[set[str], set[str]]]:
    """reason -> (condition types that carry it, phases it is shown in), from the status table."""
    shown = [
        situations.pending("m"),
        situations.waiting_for_upload("m"),
        situations.publishing("m"),
        situations.publishing("m", damaged=True),
        situations.ready("m", metadata_complete=True, metadata_message="m"),
        situations.ready("m", metadata_complete=False, metadata_message="m"),
        situations.deleting("m"),
        *(situations.failed(reason, "m") for reason in sorted(situations.FAILURE_REASONS)),
    ]
    found: dict[str, tuple[set[str], set[str]]] = {}
    for situation in shown:
        patch = situations.status_patch(
            situation, conditions=None, generation=1, now=datetime.datetime.now(datetime.UTC)
        )
        for condition in patch["conditions"]:
            types, phases = found.setdefault(condition["reason"], (set(), set()))
            types.add(condition["type"])
            phases.add(situation.phase.value)
    return found


def test_every_reason_is_shown_in_some_situation() -> None:
    assert set(reasons_by_situation()) == set(ModelReason)


@pytest.mark.parametrize("page", USER_GUIDES)
def test_the_reasons_table_lists_every_reason_with_its_conditions_and_phases(page: str) -> None:
    table = table_with(page, "`ArtifactPublished`")
    documented = {row[0].strip("`"): (codes(row[1]), codes(row[2])) for row in table[1:]}
    assert set(documented) == set(ModelReason)
    assert len(table) - 1 == len(ModelReason), "a reason is listed twice"
    for reason, (types, phases) in documented.items():
        assert types <= set(ModelConditionType), reason
        assert phases <= set(ModelPhase), reason
        assert (types, phases) == reasons_by_situation()[reason], reason


@pytest.mark.parametrize("page", USER_GUIDES)
def test_the_events_table_lists_every_event_the_controller_records(page: str) -> None:
    table = table_with(page, "`UploadWaiting`")
    documented = [row[0].strip("`") for row in table[1:]]
    assert sorted(documented) == sorted(ModelEvent)
    assert {row[1] for row in table[1:]} <= {"Normal", "Warning"}


@pytest.mark.parametrize("page", USER_GUIDES)
def test_the_user_guide_names_the_finalizer_and_where_cluster_model_events_go(page: str) -> None:
    watching = section(page, "Watching a model")
    assert f"`{MODEL_FINALIZER}`" in watching
    assert f"`{CLUSTER_EVENTS_NAMESPACE}`" in watching
    assert "involvedObject.kind=ClusterModel" in watching


@pytest.mark.parametrize("page", [*USER_GUIDES, *FAQS])
def test_the_gguf_preference_is_the_selections(page: str) -> None:
    assert ", ".join(f"`{marker}`" for marker in GGUF_PREFERENCE) in flat(text(page))


def test_the_numbers_the_pages_state_are_the_codes() -> None:
    """Five minutes before a retry, one hour per upload URL and between inventory passes, four
    publications at once, three attempts, and the archive limits."""
    fields = ControllerSettings.model_fields
    assert fields["publication_retry_seconds"].default == 300
    assert fields["upload_token_ttl_seconds"].default == 3600
    assert fields["inventory_interval_seconds"].default == 3600
    assert fields["publication_max_concurrent"].default == 4
    assert fields["publication_deadline_seconds"].default == 24 * 3600
    assert fields["publication_backoff_limit"].default == 3
    assert reconciler.MAX_ATTEMPTS == 3
    assert (archives.MAX_MEMBERS, archives.MAX_EXPANSION) == (10_000, 10)
    assert archives.EXPANSION_FLOOR_BYTES == 256 * 1024 * 1024
    assert tarformat.MAX_EXTENDED_HEADER_BYTES == 1024 * 1024
    assert archives.MAX_ZIP_DIRECTORY_BYTES == 4 * 1024 * 1024
    assert safetensors.MAX_HEADER_BYTES == 16 * 1024 * 1024
    assert readback.GGUF_HEADER_BYTES == 32 * 1024 * 1024
    config = load_yaml(REPO_ROOT / "openapi" / "config-values.yaml")
    assert config["properties"]["publication"]["properties"]["maxConcurrentPublications"]["default"] == 4


# ----- Upload API ----------------------------------------------------------------------------


def upload_responses() -> set[str]:
    return set(contract_document(Contract.UPLOAD)["paths"][UPLOAD_PATH]["put"]["responses"])


@pytest.mark.parametrize("page", USER_GUIDES)
def test_the_upload_answers_documented_are_the_contracts(page: str) -> None:
    table = table_with(page, "`507`")
    documented = [row[0].strip("`") for row in table[1:]]
    assert sorted(documented) == sorted(upload_responses())
    assert {"411", "507"} <= set(documented)


@pytest.mark.parametrize("page", USER_GUIDES)
def test_the_upload_section_shows_a_problem_the_upload_api_answers(page: str) -> None:
    blocks = [
        block for kind, block in FENCE.findall(section(page, "Uploading your own files")) if kind == "json"
    ]
    assert blocks
    for block in blocks:
        problem = Problem.model_validate_json(block)
        assert str(problem.status) in upload_responses()


def test_the_upload_formats_are_the_sniffers() -> None:
    assert ACCEPTED_DESCRIPTION in flat(section("USER_GUIDE.md", "Uploading your own files"))


# ----- Storage: alerts and metrics -------------------------------------------------------------


def storage_rules() -> dict[str, dict[str, Any]]:
    groups = load_yaml(STORAGE_RULES)
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}


def storage_sections(page: str) -> str:
    return "\n".join(
        section(page, heading) for heading, _ in sections(english(page)) if heading.startswith("Storage")
    )


@pytest.mark.parametrize("page", ADMIN_GUIDES)
def test_the_storage_sections_name_exactly_the_storage_alerts(page: str) -> None:
    assert set(ALERT.findall(storage_sections(page))) == set(storage_rules())


@pytest.mark.parametrize("page", ADMIN_GUIDES)
def test_the_storage_alert_table_shows_when_each_alert_fires(page: str) -> None:
    table = table_with(page, "`D8AIModelsStorageLedgerMissing`")
    rules = storage_rules()
    for row in table[1:]:
        alert = row[0].strip("`")
        assert row[1].strip("`") == rules[alert]["for"], alert


@pytest.mark.parametrize("page", PAGES)
def test_every_alert_a_page_names_exists(page: str) -> None:
    defined = {
        name
        for path in sorted(RULES_DIR.rglob("*"))
        if path.is_file()
        for name in re.findall(r"alert:\s*(\w+)", path.read_text(encoding="utf-8"))
    }
    assert set(ALERT.findall(text(page))) <= defined


def storage_metrics() -> set[str]:
    registry = CollectorRegistry()
    StorageMetrics(registry)
    ModelMetrics(registry)
    families = {family.name + ("_total" if family.type == "counter" else "") for family in registry.collect()}
    return families | set(LEDGER_METRICS)


@pytest.mark.parametrize("page", ADMIN_GUIDES)
def test_every_metric_the_admin_guide_names_is_exported(page: str) -> None:
    named = set(METRIC.findall(text(page)))
    assert named <= exported_metrics(), sorted(named - exported_metrics())


@pytest.mark.parametrize("page", ADMIN_GUIDES)
def test_the_admin_guide_names_every_storage_and_publication_metric(page: str) -> None:
    named = set(METRIC.findall(text(page)))
    assert storage_metrics() <= named, sorted(storage_metrics() - named)


@pytest.mark.parametrize("page", ADMIN_GUIDES)
def test_the_admin_guide_names_the_objects_an_administrator_looks_at(page: str) -> None:
    publication = section(page, "Publication")
    accounting = section(page, "Storage accounting")
    for label in (OWNER_KIND_LABEL, OWNER_NAMESPACE_LABEL, OWNER_NAME_LABEL, OWNER_UID_LABEL):
        assert f"`{label}`" in publication
    assert f"`{COMPONENT_LABEL}={PUBLICATION_COMPONENT}`" in publication
    assert f"`{MODULE_NAMESPACE}`" in publication
    assert f"`{LEDGER_SECRET_NAME}`" in accounting
    assert f"`{LEDGER_SECRET_KEY}`" in accounting


@pytest.mark.parametrize("page", ADMIN_GUIDES)
def test_the_log_lines_to_grep_for_are_the_controllers(page: str) -> None:
    source = "".join(Path(str(module.__file__)).read_text(encoding="utf-8") for module in (runtime, catalogs))
    accounting = section(page, "Storage accounting")
    quoted = re.findall(r"`(inventory pass [^`]+)`", accounting)
    assert len(quoted) == 4
    # The steps of a deleted source's catalog index (controller.storage.catalogs).
    steps = re.findall(r"`(catalog index [^`]+)`", accounting)
    assert len(steps) == 3
    for line in (*quoted, *steps):
        assert f'"{line}"' in source, line


# ----- API fields ----------------------------------------------------------------------------


def schema_properties(contract: Contract, name: str) -> set[str]:
    return set(contract_document(contract)["components"]["schemas"][name]["properties"])


@pytest.mark.parametrize("page", USER_GUIDES)
def test_the_storage_summary_fields_are_the_contracts(page: str) -> None:
    table = table_with(page, "`usageKnown`")
    documented = {name for row in table[1:] for name in codes(row[0])}
    assert documented == schema_properties(Contract.CATALOG_IMPORT, "StorageSummary")


@pytest.mark.parametrize("page", ADMIN_GUIDES)
def test_the_lookup_fields_are_the_contracts_and_there_is_no_state(page: str) -> None:
    lookup = section(page, "Internal lookup API")
    assert LOOKUP_PATH in lookup
    table = table_with(page, "`uid`")
    documented = {name for row in table[1:] for name in codes(row[0])}
    properties = schema_properties(Contract.INTERNAL_LOOKUP, "ModelLookup")
    assert documented == properties
    assert "state" not in properties
    assert "`state`" in lookup


# ----- Commands, YAML and example files ------------------------------------------------------


def shell_blocks(page: str) -> list[str]:
    return [block for kind, block in FENCE.findall(text(page)) if kind == "shell"]


def heredoc_documents() -> Iterator[Any]:
    for page in PAGES:
        for index, block in enumerate(shell_blocks(page)):
            for _delimiter, body in HEREDOC.findall(block):
                for document in yaml.safe_load_all(body):
                    if document is not None:
                        yield pytest.param(document, id=f"{page}:shell{index}")


@cache
def crd_schema(kind: str) -> CRDSchema:
    return CRDSchema.from_crd(load_yaml(CRDS_DIR / MODULE_CRDS[kind]), version="v1alpha1")


def test_the_pages_show_commands_that_apply_yaml() -> None:
    assert list(heredoc_documents())


@pytest.mark.parametrize("document", list(heredoc_documents()))
def test_yaml_applied_by_a_command_is_a_valid_object(document: Any) -> None:
    assert isinstance(document, dict)
    if document["kind"] in MODULE_CRDS:
        schema = crd_schema(document["kind"])
        assert [str(error) for error in schema.validate(schema.default_and_prune(document))] == []
    else:
        validate_object(document)


@pytest.mark.parametrize("page", PAGES)
def test_yaml_blocks_parse_into_named_objects(page: str) -> None:
    for block in yaml_blocks(DOCS_DIR / page):
        for document in yaml.safe_load_all(block):
            assert isinstance(document, dict)
            assert document["apiVersion"]
            assert document["kind"]
            assert document["metadata"]["name"]


@pytest.mark.parametrize("page", PAGES)
def test_commands_use_d8_k(page: str) -> None:
    for block in shell_blocks(page):
        assert not re.search(r"(^|[|$(]\s*)kubectl\b", block, re.MULTILINE), block


@pytest.mark.parametrize("page", [path.name for path in pages()])
def test_referenced_example_files_exist(page: str) -> None:
    for reference in EXAMPLE_FILE.findall(text(page)):
        assert (DOCS_DIR / reference).is_file(), f"{page} names missing docs/{reference}"


def test_the_admin_guide_points_at_an_example_with_a_storage_budget() -> None:
    [reference] = set(EXAMPLE_FILE.findall(section("ADMIN_GUIDE.md", "Storage accounting")))
    assert "capacityLimit" in (DOCS_DIR / reference).read_text(encoding="utf-8")
