"""`spec.source` parsed before anything is fetched, and cross-checked with the CRD's URL rule."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import re2
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_models.domain.models.source import (
    DEFAULT_REVISION,
    CatalogSource,
    HuggingFaceSource,
    InvalidSource,
    UploadSource,
    parse_source,
    parse_url,
    revision_problem,
    token_from_secret_data,
)
from ai_models.names import ModelKind

REPO = Path(__file__).resolve().parents[4]
CRDS = {kind: REPO / "crds" / f"ai.deckhouse.io_{kind.plural.value}.yaml" for kind in ModelKind}
MODEL_CRD = CRDS[ModelKind.MODEL]


# ----- parse_url ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "repository", "revision"),
    [
        ("https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct", "main"),
        (
            "https://hf.co/TheBloke/Mistral-7B-Instruct-v0.2-GGUF",
            "TheBloke/Mistral-7B-Instruct-v0.2-GGUF",
            "main",
        ),
        ("https://www.huggingface.co/google/gemma-2-2b-it", "google/gemma-2-2b-it", "main"),
        ("https://www.hf.co/microsoft/phi-2", "microsoft/phi-2", "main"),
        ("https://huggingface.co/openai-community/gpt2/", "openai-community/gpt2", "main"),
        ("https://huggingface.co/meta-llama/Llama-3.1-8B?revision=main", "meta-llama/Llama-3.1-8B", "main"),
        ("https://huggingface.co/openai-community/gpt2/?revision=v1.0", "openai-community/gpt2", "v1.0"),
        ("https://huggingface.co/bigscience/bloom?revision=refs/pr/42", "bigscience/bloom", "refs/pr/42"),
        (
            "https://huggingface.co/BAAI/bge-m3?revision=5617a9f61b028005a4858fdac845db406aefb181",
            "BAAI/bge-m3",
            "5617a9f61b028005a4858fdac845db406aefb181",
        ),
        ("https://hf.co/a/b_c.d-e", "a/b_c.d-e", "main"),
    ],
)
def test_model_urls_give_the_repository_and_revision(url: str, repository: str, revision: str) -> None:
    assert parse_url(url) == (repository, revision)


def test_the_default_revision_is_main() -> None:
    assert DEFAULT_REVISION == "main"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct", "is not a Hugging Face URL"),
        ("https://huggingface.com/Qwen/Qwen2.5-0.5B-Instruct", "is not a Hugging Face URL"),
        ("https://huggingface.co.evil.example/Qwen/Qwen2.5", "is not a Hugging Face URL"),
        ("https://huggingface.co:443/Qwen/Qwen2.5-0.5B-Instruct", "is not a Hugging Face URL"),
        ("https://user@huggingface.co/Qwen/Qwen2.5-0.5B-Instruct", "is not a Hugging Face URL"),
        ("https://HuggingFace.co/Qwen/Qwen2.5-0.5B-Instruct", "is not a Hugging Face URL"),
        ("HTTPS://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct", "is not a Hugging Face URL"),
        (" https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct", "is not a Hugging Face URL"),
        ("huggingface.co/Qwen/Qwen2.5-0.5B-Instruct", "is not a Hugging Face URL"),
        ("https://huggingface.co/datasets/squad", "datasets and spaces cannot be published"),
        ("https://huggingface.co/spaces/gradio", "datasets and spaces cannot be published"),
        ("https://huggingface.co/datasets/openai/gsm8k", "does not name a model repository"),
        ("https://huggingface.co/spaces/black-forest-labs/FLUX.1-dev", "does not name a model repository"),
        ("https://huggingface.co/Qwen", "does not name a model repository"),
        ("https://huggingface.co/", "does not name a model repository"),
        ("https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct/tree/main", "does not name a model repository"),
        ("https://huggingface.co//Qwen/Qwen2.5-0.5B-Instruct", "does not name a model repository"),
        ("https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct//", "does not name a model repository"),
        ("https://huggingface.co/-Qwen/model", "does not name a model repository"),
        ("https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct ", "does not name a model repository"),
        ("https://huggingface.co/Qwen/Qwen2.5?revision=main&foo=bar", "unsupported query"),
        ("https://huggingface.co/Qwen/Qwen2.5?foo=bar", "unsupported query"),
        ("https://huggingface.co/Qwen/Qwen2.5?download", "unsupported query"),
        ("https://huggingface.co/Qwen/Qwen2.5?revision=", "unsupported query"),
        ("https://huggingface.co/Qwen/Qwen2.5?", "unsupported query"),
        ("https://huggingface.co/Qwen/Qwen2.5?revision=main&revision=dev", "unsupported query"),
        ("https://huggingface.co/Qwen/Qwen2.5?revision=v1%2E0", "percent-encoded"),
        ("https://huggingface.co/Qwen/Qwen2.5?revision=main\n", "unsupported query"),
        ("https://huggingface.co/Qwen/Qwen2.5#model-card", "unsupported query or fragment"),
    ],
)
def test_anything_else_is_refused_with_a_reason_that_names_the_url(url: str, why: str) -> None:
    message = parse_url(url)
    assert isinstance(message, str)
    assert why in message
    assert repr(url) in message


@pytest.mark.parametrize(
    ("revision", "problem"),
    [
        ("..", "`.` or `..` path segment"),
        (".", "`.` or `..` path segment"),
        ("refs/../main", "`.` or `..` path segment"),
        ("refs/pr/.", "`.` or `..` path segment"),
        ("%2e%2e", "percent-encoded"),
        ("refs%2Fpr%2F1", "percent-encoded"),
        ("main\x07", "control character"),
        ("main\x7f", "control character"),
    ],
)
def test_revisions_an_http_client_would_rewrite_are_refused_naming_the_problem(
    revision: str, problem: str
) -> None:
    # Today `?revision=..` parses, and the client's path normalization then reads the default branch.
    message = parse_url(f"https://huggingface.co/Qwen/Qwen2.5?revision={revision}")
    assert isinstance(message, str)
    assert problem in message
    assert revision_problem(revision) is not None


@pytest.mark.parametrize("revision", ["main", "v1.0", "v1.0..rc", "refs/pr/42", "..rc", "a.", "fp16"])
def test_ordinary_revisions_have_no_problem(revision: str) -> None:
    assert revision_problem(revision) is None


# ----- cross-check with the CRD ----------------------------------------------------------------------


def validation_rules(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for item in node.get("x-kubernetes-validations") or ():
            yield item["rule"]
        for value in node.values():
            yield from validation_rules(value)
    elif isinstance(node, list):
        for value in node:
            yield from validation_rules(value)


@functools.cache
def crd_url_patterns(path: Path) -> tuple[tuple[bool, str], ...]:
    """The CRD's `self.matches(...)` and `!self.matches(...)` rules on the URL, as (negated, RE2 pattern)."""
    rules = [rule for rule in validation_rules(yaml.safe_load(path.read_text())) if "self.matches(" in rule]
    assert len(rules) == 2, rules
    patterns = []
    for rule in rules:
        literal = re.fullmatch(r"(!?)self\.matches\(('(?:[^'\\]|\\.)*')\)", rule.strip())
        assert literal is not None, rule
        patterns.append((literal.group(1) == "!", str(ast.literal_eval(literal.group(2)))))
    return tuple(patterns)


def crd_url_pattern(path: Path) -> str:
    """The shape rule: the one pattern that must match."""
    [pattern] = [pattern for negated, pattern in crd_url_patterns(path) if not negated]
    return pattern


def crd_accepts(url: str) -> bool:
    # CEL's matches() is RE2 and unanchored; the shape pattern anchors itself.
    return all(
        (re2.search(pattern, url) is None) == negated for negated, pattern in crd_url_patterns(MODEL_CRD)
    )


def controller_accepts(url: str) -> bool:
    return not isinstance(parse_url(url), str)


SAMPLES = [
    "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct",
    "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct?revision=main",
    "https://hf.co/TheBloke/Mistral-7B-Instruct-v0.2-GGUF",
    "https://www.huggingface.co/google/gemma-2-2b-it",
    "https://www.hf.co/microsoft/phi-2",
    "https://huggingface.co/openai-community/gpt2/",
    "https://huggingface.co/openai-community/gpt2/?revision=v1.0",
    "https://huggingface.co/bigscience/bloom?revision=refs/pr/42",
    "https://huggingface.co/BAAI/bge-m3?revision=5617a9f61b028005a4858fdac845db406aefb181",
    "https://huggingface.co/stabilityai/stable-diffusion-xl-base-1.0?revision=fp16",
    "https://huggingface.co/datasets/squad",
    "https://huggingface.co/spaces/gradio",
    "http://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct",
    "https://huggingface.co/Qwen",
    "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct/tree/main",
    "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct/resolve/main/config.json",
    "https://huggingface.co/datasets/openai/gsm8k",
    "https://huggingface.com/Qwen/Qwen2.5-0.5B-Instruct",
    "https://HuggingFace.co/Qwen/Qwen2.5-0.5B-Instruct",
    "https://huggingface.co:443/Qwen/Qwen2.5-0.5B-Instruct",
    "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct?revision=",
    "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct?revision=main&foo=bar",
    "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct?download=true",
    "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct#model-card",
    " https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct",
    "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct?revision=..",
    "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct?revision=.",
    "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct?revision=refs/../main",
    "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct?revision=v1.0..rc",
    "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct?revision=%2e%2e",
]
# Two-segment Hub paths that are not model repositories: the CRD's pattern cannot tell them apart.
CONTROLLER_STRICTER = {"https://huggingface.co/datasets/squad", "https://huggingface.co/spaces/gradio"}


def test_both_crds_carry_the_same_url_rules() -> None:
    assert {crd_url_patterns(path) for path in CRDS.values()} == {crd_url_patterns(MODEL_CRD)}


def test_the_samples_cover_both_verdicts_of_the_crd() -> None:
    verdicts = [crd_accepts(url) for url in SAMPLES]
    assert verdicts.count(True) >= 8
    assert verdicts.count(False) >= 8


@pytest.mark.parametrize("url", SAMPLES)
def test_the_controller_accepts_exactly_what_the_crd_accepts(url: str) -> None:
    if url in CONTROLLER_STRICTER:
        assert crd_accepts(url)
        assert not controller_accepts(url)
    else:
        assert controller_accepts(url) == crd_accepts(url)


_SEGMENT_CHARS = st.sampled_from("aZ09-_.~%/ ?#&=@:")
_SEGMENT = st.one_of(
    st.sampled_from(["org", "Qwen2.5-7B", "a", "x" * 96, "x" * 97, "datasets", "spaces", "-x", ".x"]),
    st.text(_SEGMENT_CHARS, min_size=0, max_size=6),
)


@st.composite
def hub_like_urls(draw: st.DrawFn) -> tuple[str, list[str]]:
    """URLs built from the pieces the CRD's pattern and `parse_url` look at, right and wrong."""
    scheme = draw(st.sampled_from(["https://", "http://", "HTTPS://", " https://", ""]))
    host = draw(
        st.sampled_from(["huggingface.co", "hf.co", "www.hf.co", "www.huggingface.co", "HF.co", "hf.co:443"])
    )
    segments = draw(st.lists(_SEGMENT, min_size=0, max_size=3))
    slash = draw(st.sampled_from(["", "/", "//"]))
    query = draw(
        st.sampled_from(
            [
                "",
                "?",
                "?revision=",
                "?revision=v1.0",
                "?revision=refs/pr/1",
                "?revision=a%20b",
                "?revision=..",
                "?revision=.",
                "?revision=a/../b",
                "?revision=a/.",
                "?revision=..a",
                "?revision=%2e%2e",
                "?revision=a\x07",
            ]
        )
    )
    tail = draw(st.sampled_from(["", "&x=1", "#top", "\n", " "]))
    return f"{scheme}{host}/{'/'.join(segments)}{slash}{query}{tail}", segments


@settings(max_examples=400, deadline=None)
@given(hub_like_urls())
def test_generated_urls_get_the_same_verdict_from_the_controller_and_the_crd(
    generated: tuple[str, list[str]],
) -> None:
    url, segments = generated
    crd, controller = crd_accepts(url), controller_accepts(url)
    if crd and segments and segments[0] in ("datasets", "spaces"):
        assert not controller
    else:
        assert controller == crd, url


# ----- parse_source -----------------------------------------------------------------------------------


def test_a_url_source_without_credentials() -> None:
    assert parse_source(
        "Model", "team-a", {"url": "https://hf.co/org/model?revision=v2"}
    ) == HuggingFaceSource("org/model", "v2")
    assert parse_source("ClusterModel", "", {"url": "https://hf.co/org/model"}) == HuggingFaceSource(
        "org/model", "main"
    )


def test_an_upload_source() -> None:
    assert parse_source(ModelKind.MODEL, "team-a", {"upload": {}}) == UploadSource()


def test_a_catalog_source() -> None:
    source = {"catalog": {"sourceName": "huggingface", "name": "Qwen/Qwen2.5-0.5B-Instruct"}}
    assert parse_source(ModelKind.CLUSTER_MODEL, "", source) == CatalogSource(
        source_name="huggingface", entry_name="Qwen/Qwen2.5-0.5B-Instruct"
    )


@pytest.mark.parametrize("catalog", [{}, {"sourceName": "huggingface"}, {"name": "org/model"}])
def test_a_catalog_source_needs_both_names(catalog: dict[str, str]) -> None:
    parsed = parse_source("Model", "team-a", {"catalog": catalog})
    assert parsed == InvalidSource("spec.source.catalog needs sourceName and name")


@pytest.mark.parametrize(
    "source",
    [
        None,
        {},
        {"url": "https://hf.co/org/model", "upload": {}},
        {"upload": {}, "catalog": {"sourceName": "s", "name": "n"}},
        {"url": None},
    ],
)
def test_exactly_one_source_kind_is_required(source: dict[str, Any] | None) -> None:
    parsed = parse_source("Model", "team-a", source)
    assert isinstance(parsed, InvalidSource)
    assert "exactly one of spec.source.url, spec.source.upload or spec.source.catalog" in parsed.message


def test_a_bad_url_is_an_invalid_source_with_the_url_check_message() -> None:
    url = "https://huggingface.co/datasets/squad"
    assert parse_source("Model", "team-a", {"url": url}) == InvalidSource(str(parse_url(url)))


@pytest.mark.parametrize(
    "ref",
    [
        {"name": "hf-token"},
        {"name": "hf-token", "namespace": ""},
        {"name": "hf-token", "namespace": "team-a"},
    ],
)
def test_the_auth_secret_is_read_from_the_models_own_namespace(ref: dict[str, str]) -> None:
    parsed = parse_source("Model", "team-a", {"url": "https://hf.co/org/model", "authSecretRef": ref})
    assert parsed == HuggingFaceSource("org/model", "main", secret_name="hf-token", secret_namespace="team-a")


def test_an_auth_secret_in_another_namespace_is_refused_naming_both() -> None:
    ref = {"name": "hf-token", "namespace": "kube-system"}
    parsed = parse_source("Model", "team-a", {"url": "https://hf.co/org/model", "authSecretRef": ref})
    assert isinstance(parsed, InvalidSource)
    assert "'kube-system'" in parsed.message
    assert "'team-a'" in parsed.message


def test_a_cluster_model_cannot_name_an_auth_secret() -> None:
    ref = {"name": "hf-token", "namespace": "team-a"}
    parsed = parse_source(
        ModelKind.CLUSTER_MODEL, "", {"url": "https://hf.co/org/model", "authSecretRef": ref}
    )
    assert parsed == InvalidSource("spec.source.authSecretRef is not supported for ClusterModel")


# ----- token_from_secret_data -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "token"),
    [
        ({"token": "hf_a", "HF_TOKEN": "hf_b", "HUGGING_FACE_HUB_TOKEN": "hf_c"}, "hf_a"),
        ({"HUGGING_FACE_HUB_TOKEN": "hf_c", "HF_TOKEN": "hf_b"}, "hf_b"),
        ({"HUGGING_FACE_HUB_TOKEN": "hf_c"}, "hf_c"),
        ({"token": "  \n", "HF_TOKEN": "hf_b"}, "hf_b"),  # a blank key does not hide the next one
        ({"token": "", "HUGGING_FACE_HUB_TOKEN": "hf_c"}, "hf_c"),
        ({"token": "hf_a\n"}, "hf_a"),  # `echo` into a Secret leaves a newline
        ({"hf_token": "hf_x", "password": "p"}, None),
        ({"token": " "}, None),
        ({}, None),
    ],
)
def test_the_token_comes_from_the_first_accepted_key_that_has_one(
    data: dict[str, str], token: str | None
) -> None:
    assert token_from_secret_data(data) == token
