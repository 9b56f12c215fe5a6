"""Every decoder of client input, fuzzed directly with hypothesis: for any text, bytes or nested
JSON only its documented error escapes (page tokens, Range, If-None-Match/If-Range, the bearer
token, path and query parameters). Then the same hostile inputs over HTTP to a running api: each
is a 400 or 401 in the problem shape, never a 500 or a dropped connection.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.api.auth import bearer_token
from ai_models.api.catalog.paging import decode_token
from ai_models.api.models import EntryLocator, ProblemType, SearchQuery
from ai_models.api.models_lookup import LookupQuery
from ai_models.api.models_serving import ClusterModelFileLocator, ModelFileLocator
from ai_models.api.problems import ApiProblem
from ai_models.api.serving.ranges import (
    ByteRange,
    RangeNotSatisfiable,
    none_match,
    range_applies,
    requested_range,
)
from ai_models.api.serving.routes import _locate

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FINGERPRINT = "0123456789abcdef"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _nested(depth: int, *, opener: str = "[", closer: str = "]") -> bytes:
    return (opener * depth + closer * depth).encode()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=30,
)
TOKENS = st.one_of(
    st.text(max_size=3000),
    st.binary(max_size=2000).map(_b64),
    JSON_VALUES.map(lambda value: _b64(json.dumps(value).encode())),
    st.integers(min_value=1, max_value=5000).map(lambda depth: _b64(_nested(depth))),
    st.integers(min_value=1, max_value=5000).map(
        lambda depth: _b64(_nested(depth, opener='{"a":', closer="}"))
    ),
    st.builds(
        lambda key, source, id_: _b64(json.dumps([1, FINGERPRINT, key, source, id_]).encode()),
        st.one_of(st.integers(), st.floats(), st.text(max_size=5)),
        st.text(max_size=10),
        st.text(max_size=10),
    ),
    st.just(_b64(b'[1,"0123456789abcdef",1e400,"a","b"]')),
    st.just(_b64(b'[1,"0123456789abcdef",' + b"9" * 5000 + b',"a","b"]')),
)


def _problem_of(call: Callable[[], object]) -> ApiProblem | None:
    """The problem `call` raised (None if it returned); any other exception fails the test."""
    try:
        call()
    except ApiProblem as problem:
        return problem
    return None


def _refused_as_page_token(call: Callable[[], object]) -> None:
    problem = _problem_of(call)
    assert problem is None or (problem.kind, problem.status) == (ProblemType.INVALID_PAGE_TOKEN, 400)


@FUZZ
@given(token=TOKENS)
def test_a_page_token_decodes_or_is_refused_as_one_for_any_input(token: str) -> None:
    _refused_as_page_token(lambda: decode_token(token, query_fingerprint=FINGERPRINT))


def test_deeply_nested_page_tokens_are_refused() -> None:
    for document in (_nested(1500), _nested(100_000), _nested(1500, opener='{"a":', closer="}")):
        with pytest.raises(ApiProblem) as refused:
            decode_token(_b64(document), query_fingerprint=FINGERPRINT)
        assert refused.value.kind is ProblemType.INVALID_PAGE_TOKEN


def test_a_page_token_longer_than_any_issued_one_is_refused_before_decoding() -> None:
    with pytest.raises(ApiProblem) as refused:
        decode_token("A" * 2049, query_fingerprint=FINGERPRINT)
    assert "longer" in refused.value.detail


@FUZZ
@given(header=st.one_of(st.none(), st.text(max_size=3000), st.from_regex(r"\s*bytes\s*=\s*\d*\s*-\s*\d*\s*")))
def test_a_range_header_is_a_range_the_file_has_none_or_unsatisfiable(header: str | None) -> None:
    for size in (0, 1, 100, 2**40):
        try:
            found = requested_range(header, size=size)
        except RangeNotSatisfiable:
            continue
        if found is not None:
            assert isinstance(found, ByteRange)
            assert 0 <= found.start <= found.end < size


@pytest.mark.parametrize("digits", [19, 20, 4301, 10_000])
def test_a_range_with_huge_numbers_is_unsatisfiable_or_ignored(digits: int) -> None:
    huge = "9" * digits
    with pytest.raises(RangeNotSatisfiable):
        requested_range(f"bytes={huge}-", size=100)
    assert requested_range(f"bytes=0-{huge}", size=100) == ByteRange(start=0, end=99)
    assert requested_range(f"bytes=-{huge}", size=100) == ByteRange(start=0, end=99)


@FUZZ
@given(header=st.one_of(st.none(), st.text(max_size=2000)), etag=st.text(max_size=70))
def test_conditional_headers_are_compared_for_any_input(header: str | None, etag: str) -> None:
    assert isinstance(none_match(header, etag), bool)
    assert isinstance(range_applies(header, etag), bool)


@FUZZ
@given(
    header=st.one_of(st.none(), st.text(max_size=20_000), st.text(max_size=30).map(lambda t: f"Bearer {t}"))
)
def test_an_authorization_header_is_a_token_or_a_401(header: str | None) -> None:
    problem = _problem_of(lambda: bearer_token(header))
    if problem is not None:
        assert (problem.kind, problem.status) == (ProblemType.UNAUTHENTICATED, 401)
    else:
        token = bearer_token(header)
        assert token
        assert not any(ch.isspace() for ch in token)


PATH_TEXT = st.one_of(st.text(max_size=300), st.text(alphabet="a-z0-9./%", max_size=1100))


@FUZZ
@given(namespace=PATH_TEXT, name=PATH_TEXT, path=PATH_TEXT)
def test_path_parameters_are_located_or_a_400(namespace: str, name: str, path: str) -> None:
    for model, values in (
        (ModelFileLocator, {"namespace": namespace, "name": name, "path": path}),
        (ClusterModelFileLocator, {"name": name, "path": path}),
    ):
        problem = _problem_of(functools.partial(_locate, model, **values))
        assert problem is None or (problem.kind, problem.status) == (ProblemType.INVALID_PARAMETER, 400)


@FUZZ
@given(values=st.dictionaries(st.sampled_from(["source", "id", "kind", "namespace", "name"]), PATH_TEXT))
def test_entry_and_lookup_parameters_validate_or_fail_validation(values: dict[str, str]) -> None:
    models: tuple[type[BaseModel], ...] = (EntryLocator, LookupQuery)
    for model in models:
        with contextlib.suppress(ValidationError):
            model.model_validate(values)


QUERY_NAMES = [
    "q", "source", "pipelineTag", "library", "author", "minParameters", "maxParameters",
    "maxWeightsBytes", "verdict", "sort", "pageSize", "pageToken",
]  # fmt: skip


@FUZZ
@given(values=st.dictionaries(st.sampled_from(QUERY_NAMES), st.text(max_size=300)))
def test_search_parameters_validate_or_fail_validation(values: dict[str, str]) -> None:
    with contextlib.suppress(ValidationError):
        SearchQuery.model_validate(values)


# Over HTTP.


@pytest.fixture
def running(api_cluster: Any, start_api: Any, store: DirectoryStore) -> tuple[str, dict[str, str]]:
    api = start_api(store)
    return api.url, {"Authorization": f"Bearer {api_cluster.user('reader').token}"}


def _problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert set(body) == {"type", "title", "status", "detail"}
    return body


@pytest.mark.parametrize(
    "token",
    [
        _b64(b"[" * 1500),  # the reported one: 2,000 characters, within the parameter's bound
        _b64(b'{"a":' * 300),
        _b64(b'[1,"0123456789abcdef",1e400,"a","b"]'),
        _b64(b'[1,"0123456789abcdef",' + b"9" * 1400 + b',"a","b"]'),
    ],
)
def test_hostile_page_tokens_are_400_problems(running: tuple[str, dict[str, str]], token: str) -> None:
    url, auth = running
    response = httpx.get(f"{url}/api/catalog-import/v1/models", params={"pageToken": token}, headers=auth)
    assert _problem(response, 400)["type"] == ProblemType.INVALID_PAGE_TOKEN.value


@pytest.mark.parametrize(
    "header",
    ["Basic Zm9vOmJhcg==", "Bearer", "Bearer a b", "Bearer " + "x" * 20_000, "bearer\t\x7f"],
)
def test_hostile_authorization_headers_are_401_problems(
    running: tuple[str, dict[str, str]], header: str
) -> None:
    url, _ = running
    response = httpx.get(f"{url}/api/catalog-import/v1/models", headers={"Authorization": header})
    _problem(response, 401)


def test_a_request_http_cannot_parse_is_a_400_problem(running: tuple[str, dict[str, str]]) -> None:
    url, _ = running
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"GET /api/\xff\x00 HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"content-type: application/problem+json" in head.lower()
    assert json.loads(body)["type"] == ProblemType.INVALID_PARAMETER.value


UPLOAD_SIGNING_KEY = b"decoders-upload-signing-key-32b!"


@pytest.fixture
def uploads_running(api_cluster: Any, start_api: Any, store: DirectoryStore) -> tuple[str, dict[str, str]]:
    api_cluster.put_signing_key(UPLOAD_SIGNING_KEY)
    api = start_api(store)
    return api.url, {"Authorization": f"Bearer {api_cluster.user('writer', level='Editor').token}"}


def test_any_upload_token_over_http_is_a_4xx_problem(uploads_running: tuple[str, dict[str, str]]) -> None:
    """The upload token's decoder belongs to the upload API; over HTTP, any token it is handed is
    refused in the problem shape, never a 500."""
    url, auth = uploads_running
    with httpx.Client(base_url=url, headers=auth, timeout=30) as http:

        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
        @given(
            token=st.one_of(st.text(min_size=1, max_size=300), st.binary(min_size=1, max_size=300).map(_b64))
        )
        def refused(token: str) -> None:
            response = http.put(
                f"/api/upload/v1/uploads/{quote(token, safe='')}",
                params={"filename": "model.gguf"},
                content=b"GGUF",
            )
            assert 400 <= response.status_code < 500, response.text
            if response.status_code != 404:  # a token holding "/" names no route: the router's 404
                assert response.headers["content-type"] == "application/problem+json", response.text

        refused()
