"""`ai-models catalog index|search` as an admin runs them: the console script, a fake Hub, a directory."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fakes.hub import FakeHub, FakeModel
from fakes.hub_corpus import make_corpus
from support.paths import DOCS_DIR

ENTRY_POINT = Path(sys.executable).parent / "ai-models"


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return make_corpus(120, seed=3)


def ai_models(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ENTRY_POINT), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=120,
        check=False,
    )


def write_source(tmp_path: Path, spec: dict[str, object]) -> Path:
    path = tmp_path / "source.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "ai.deckhouse.io/v1alpha1",
                "kind": "ModelCatalogSource",
                "metadata": {"name": "local"},
                "spec": spec,
            }
        )
    )
    return path


def test_index_writes_a_served_generation_and_reports_it(fake_hub: FakeHub, tmp_path: Path) -> None:
    source = write_source(tmp_path, {"provider": "HuggingFace", "huggingFace": {"endpoint": fake_hub.url}})
    store = tmp_path / "store"
    result = ai_models("catalog", "index", "--source", str(source), "--store", str(store))
    assert result.returncode == 0, result.stderr
    manifest = json.loads((store / "catalog" / "local" / "manifest.json").read_text())
    expected = len([model for model in fake_hub.models if not model.gated])
    assert manifest["models"] == expected
    assert f"{expected} models of local indexed into {store}" in result.stdout


def test_a_relative_store_is_the_directory_under_the_working_one(fake_hub: FakeHub, tmp_path: Path) -> None:
    source = write_source(tmp_path, {"provider": "HuggingFace", "huggingFace": {"endpoint": fake_hub.url}})
    indexed = ai_models("catalog", "index", "--source", str(source), "--store", "store", cwd=tmp_path)
    assert indexed.returncode == 0, indexed.stderr
    assert (tmp_path / "store" / "catalog" / "local" / "manifest.json").is_file()
    found = ai_models("catalog", "search", "--store", "store", "--json", cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)


def test_index_of_the_documented_source_uses_the_endpoint_given(fake_hub: FakeHub, tmp_path: Path) -> None:
    documented = DOCS_DIR / "examples" / "modelcatalogsource-hf.yaml"
    store = tmp_path / "store"
    result = ai_models(
        "catalog", "index", "--source", str(documented), "--store", str(store), "--endpoint", fake_hub.url
    )
    assert result.returncode == 0, result.stderr
    assert (store / "catalog" / "huggingface" / "manifest.json").exists()
    assert all(request.params("filter") for request in fake_hub.listing_pages())


def test_index_reports_provider_failures_with_their_reason(fake_hub: FakeHub, tmp_path: Path) -> None:
    fake_hub.require_token("secret")
    source = write_source(tmp_path, {"provider": "HuggingFace", "huggingFace": {"endpoint": fake_hub.url}})
    result = ai_models("catalog", "index", "--source", str(source), "--store", str(tmp_path / "store"))
    assert result.returncode == 1
    assert "ProviderUnauthorized" in result.stderr
    with_token = ai_models(
        "catalog",
        "index",
        "--source",
        str(source),
        "--store",
        str(tmp_path / "store"),
        env={"HF_TOKEN": "secret"},
    )
    assert with_token.returncode == 0, with_token.stderr


def test_index_refuses_a_file_without_a_source(tmp_path: Path) -> None:
    path = tmp_path / "model.yaml"
    path.write_text("apiVersion: ai.deckhouse.io/v1alpha1\nkind: Model\nmetadata: {name: m}\n")
    result = ai_models("catalog", "index", "--source", str(path), "--store", str(tmp_path / "store"))
    assert result.returncode == 1
    assert "must hold exactly one ModelCatalogSource, found 0" in result.stderr


def test_search_json_returns_entries_in_the_api_shape_with_verdicts(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    source = write_source(tmp_path, {"provider": "HuggingFace", "huggingFace": {"endpoint": fake_hub.url}})
    store = tmp_path / "store"
    assert ai_models("catalog", "index", "--source", str(source), "--store", str(store)).returncode == 0
    result = ai_models(
        "catalog",
        "search",
        "--store",
        str(store),
        "--json",
        "--pipeline-tag",
        "text-generation",
        "--page-size",
        "500",
        env={"AI_MODELS_CAPACITY_LIMIT_BYTES": "10Gi"},
    )
    assert result.returncode == 0, result.stderr
    entries = json.loads(result.stdout)
    expected = [m.id for m in fake_hub.models if not m.gated and m.pipeline_tag == "text-generation"]
    assert sorted(entry["id"] for entry in entries) == sorted(expected)
    downloads = [entry["metadata"]["downloads"] for entry in entries]
    assert downloads == sorted(downloads, reverse=True)
    for entry in entries:
        assert set(entry) == {
            "source",
            "id",
            "provider",
            "metadata",
            "resources",
            "downloadVerdict",
            "indexedAt",
        }
        # A budget is set but there is no ledger outside a cluster: usage unknown, never "fits".
        verdict = entry["downloadVerdict"]
        if "weightsBytes" in entry["resources"]:
            assert (verdict["verdict"], verdict["reason"]) == ("NotFeasible", "StorageUsageUnknown")
        else:
            assert verdict["verdict"] == "EstimateUnavailable"


def test_search_table_and_full_text(fake_hub: FakeHub, tmp_path: Path) -> None:
    source = write_source(tmp_path, {"provider": "HuggingFace", "huggingFace": {"endpoint": fake_hub.url}})
    store = tmp_path / "store"
    assert ai_models("catalog", "index", "--source", str(source), "--store", str(store)).returncode == 0
    some = next(model for model in fake_hub.models if not model.gated)
    result = ai_models("catalog", "search", "--store", str(store), "--q", some.id.split("/")[1])
    assert result.returncode == 0, result.stderr
    assert some.id in result.stdout
    assert "verdict" in result.stdout


def test_search_without_an_index_says_what_to_run(tmp_path: Path) -> None:
    result = ai_models("catalog", "search", "--store", str(tmp_path))
    assert result.returncode == 1
    assert "run `ai-models catalog index` first" in result.stderr


def test_search_refuses_bad_filters_with_their_names(tmp_path: Path) -> None:
    result = ai_models("catalog", "search", "--store", str(tmp_path), "--page-size", "0")
    assert result.returncode == 1
    assert "pageSize" in result.stderr


def test_index_of_an_aimodels_source_reads_the_other_cluster_and_names_its_failure(tmp_path: Path) -> None:
    """An AIModels source is indexed from the other cluster's serving API, not from a Hub: without its
    token the command says which variable to set; an endpoint nothing answers is ProviderUnavailable."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    source = write_source(
        tmp_path,
        {
            "provider": "AIModels",
            "aiModels": {"endpoint": f"http://127.0.0.1:{port}", "tokenSecretRef": {"name": "t"}},
        },
    )
    store = tmp_path / "store"
    untokened = ai_models("catalog", "index", "--source", str(source), "--store", str(store))
    assert untokened.returncode != 0
    assert "AI_MODELS_SERVING_TOKEN" in untokened.stderr
    result = ai_models(
        "catalog",
        "index",
        "--source",
        str(source),
        "--store",
        str(store),
        env={"AI_MODELS_SERVING_TOKEN": "x"},
    )
    assert result.returncode == 1, result.stderr
    assert "ProviderUnavailable" in result.stderr
    assert f"the ai-models cluster at http://127.0.0.1:{port} is unreachable" in result.stderr


def test_index_reads_hf_endpoint_and_keeps_stderr_quiet_unless_verbose(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    """The README's endpoint story: `HF_ENDPOINT` names the Hub (or mirror) when the source sets
    none. Log lines of the pass show on stderr only with -v."""
    documented = DOCS_DIR / "examples" / "modelcatalogsource-hf.yaml"
    store = tmp_path / "store"
    env = {"HF_ENDPOINT": fake_hub.url}
    result = ai_models("catalog", "index", "--source", str(documented), "--store", str(store), env=env)
    assert result.returncode == 0, result.stderr
    assert (store / "catalog" / "huggingface" / "manifest.json").exists()
    assert " INFO " not in result.stderr
    assert "catalog pass starts" not in result.stderr
    verbose = ai_models("catalog", "index", "-v", "--source", str(documented), "--store", str(store), env=env)
    assert verbose.returncode == 0, verbose.stderr
    assert "catalog pass starts" in verbose.stderr
    quiet_search = ai_models("catalog", "search", "--store", str(store))
    assert quiet_search.returncode == 0, quiet_search.stderr
    assert quiet_search.stderr == ""


def test_search_table_shows_the_verdict_reason_and_says_when_nothing_matches(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    source = write_source(tmp_path, {"provider": "HuggingFace", "huggingFace": {"endpoint": fake_hub.url}})
    store = tmp_path / "store"
    assert ai_models("catalog", "index", "--source", str(source), "--store", str(store)).returncode == 0
    budget = {"AI_MODELS_CAPACITY_LIMIT_BYTES": "10Gi"}
    result = ai_models("catalog", "search", "--store", str(store), "--verdict", "NotFeasible", env=budget)
    assert result.returncode == 0, result.stderr
    assert "reason" in result.stdout.splitlines()[0]
    assert "StorageUsageUnknown" in result.stdout
    empty = ai_models("catalog", "search", "--store", str(store), "--q", "no-such-model-anywhere")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.strip() == "no entries match the query"
