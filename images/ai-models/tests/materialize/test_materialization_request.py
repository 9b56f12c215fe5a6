"""The materialize Job's request (`domain.delivery.materialization`), pure: what the controller
writes is what the Job reads, the token only ever by reference, and every bad variable named."""

from __future__ import annotations

import pytest

from ai_models.domain.delivery.materialization import (
    CompletionRecord,
    MaterializationOutcome,
    MaterializationRequest,
    MaterializationRequestError,
    RequestedArtifact,
)
from ai_models.domain.models.reference import ModelKey
from ai_models.names import MODULE_CA_KEY, MaterializeVariable, ModelKind

DIGEST = "sha256:" + "a" * 64
REQUEST = MaterializationRequest(
    api_url="https://ai-models-api.d8-ai-models.svc",
    target_dir="/claim",
    artifacts=(
        RequestedArtifact.of("llama", ModelKey(ModelKind.MODEL, "team-a", "llama"), DIGEST),
        RequestedArtifact.of("qwen", ModelKey(ModelKind.CLUSTER_MODEL, "", "qwen"), DIGEST),
    ),
    termination_message_path="/dev/termination-log",
)
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def env_of(
    request: MaterializationRequest, *, token: str | None = "secret", ca: str | None = CA
) -> dict[str, str]:
    env = {
        item["name"]: item["value"] for item in request.to_env(token_secret="web-token") if "value" in item
    }
    if token is not None:
        env[MaterializeVariable.TOKEN.value] = token
    if ca is not None:
        env[MaterializeVariable.CA_BUNDLE.value] = ca
    return env


def test_the_request_survives_the_environment_and_the_token_is_only_a_secret_reference() -> None:
    variables = REQUEST.to_env(token_secret="web-token")
    token = [item for item in variables if item["name"] == MaterializeVariable.TOKEN.value]
    assert token == [
        {
            "name": MaterializeVariable.TOKEN.value,
            "valueFrom": {"secretKeyRef": {"name": "web-token", "key": "token"}},
        }
    ]
    assert MaterializationRequest.from_env(env_of(REQUEST)) == REQUEST


def test_the_module_ca_comes_from_the_token_secret_and_is_required() -> None:
    variables = REQUEST.to_env(token_secret="web-token")
    assert [item for item in variables if item["name"] == MaterializeVariable.CA_BUNDLE.value] == [
        {
            "name": MaterializeVariable.CA_BUNDLE.value,
            "valueFrom": {"secretKeyRef": {"name": "web-token", "key": MODULE_CA_KEY}},
        }
    ]
    for ca in (None, "", "not a certificate"):
        with pytest.raises(MaterializationRequestError) as error:
            MaterializationRequest.from_env(env_of(REQUEST, ca=ca))
        assert [problem.variable for problem in error.value.problems] == [MaterializeVariable.CA_BUNDLE]


def test_a_plain_http_api_is_refused_never_fallen_back_to() -> None:
    with pytest.raises(MaterializationRequestError) as error:
        MaterializationRequest.from_env(env_of(REQUEST) | {MaterializeVariable.API_URL.value: "http://api"})
    assert "must be an https URL" in str(error.value)


@pytest.mark.parametrize(
    ("change", "variable"),
    [
        ({MaterializeVariable.API_URL.value: "ftp://x"}, MaterializeVariable.API_URL),
        ({MaterializeVariable.API_URL.value: ""}, MaterializeVariable.API_URL),
        ({MaterializeVariable.TARGET_DIR.value: "relative"}, MaterializeVariable.TARGET_DIR),
        ({MaterializeVariable.ARTIFACTS.value: "[]"}, MaterializeVariable.ARTIFACTS),
        ({MaterializeVariable.ARTIFACTS.value: "not json"}, MaterializeVariable.ARTIFACTS),
        (
            {
                MaterializeVariable.ARTIFACTS.value: (
                    f'[{{"name": "a", "ref": {{"kind": "Model", "name": "m"}}, "digest": "{DIGEST}"}}]'
                )
            },
            MaterializeVariable.ARTIFACTS,
        ),
        (
            {
                MaterializeVariable.ARTIFACTS.value: (
                    f'[{{"name": "a", "ref": {{"kind": "ClusterModel", "name": "m"}}, "digest": "{DIGEST}"}},'
                    f'{{"name": "a", "ref": {{"kind": "ClusterModel", "name": "n"}}, "digest": "{DIGEST}"}}]'
                )
            },
            MaterializeVariable.ARTIFACTS,
        ),
    ],
)
def test_a_bad_variable_is_named(change: dict[str, str], variable: MaterializeVariable) -> None:
    with pytest.raises(MaterializationRequestError) as error:
        MaterializationRequest.from_env(env_of(REQUEST) | change)
    assert [problem.variable for problem in error.value.problems] == [variable]


def test_a_missing_token_is_a_problem() -> None:
    with pytest.raises(MaterializationRequestError, match=MaterializeVariable.TOKEN.value):
        MaterializationRequest.from_env(env_of(REQUEST, token=None))


def test_a_completion_record_reads_back_and_anything_else_is_none() -> None:
    record = CompletionRecord.model_validate(
        {
            "digest": DIGEST,
            "files": [{"path": "a", "size": 1, "sha256": "b" * 64}],
            "bytes": 1,
            "completedAt": "t",
        }
    )
    assert CompletionRecord.from_json(record.to_json()) == record
    for torn in (b"", b"{", b'{"digest": "x"}', record.to_json()[:-5]):
        assert CompletionRecord.from_json(torn) is None


def test_an_outcome_reads_back_and_a_foreign_message_is_none() -> None:
    outcome = MaterializationOutcome(succeeded=False, message="m" * 5000, delivered=(DIGEST,), retryable=True)
    read = MaterializationOutcome.from_json(outcome.to_json())
    assert read is not None
    assert read.retryable
    assert not read.succeeded
    assert read.delivered == (DIGEST,)
    assert len(read.message) <= 3000
    for foreign in (None, "", "panic: runtime error", '{"succeeded": "yes"}', "[]"):
        assert MaterializationOutcome.from_json(foreign) is None
