"""The grant that lets the controller read one Secret, and the Secrets a catalog source may not
name (D160)."""

from __future__ import annotations

import pytest

from ai_models import names
from ai_models.domain.secret_reads import (
    grant_commands,
    grant_objects,
    module_secret_refusal,
    read_refused,
)

FIELD = "spec.huggingFace.tokenSecretRef"
MODULE_SECRETS = sorted(
    value for key, value in vars(names).items() if key.endswith("_SECRET") and isinstance(value, str)
)


def test_names_lists_the_module_secrets_this_file_checks() -> None:
    assert {"ai-models-upload-signing", "ai-models-root-ca", "ai-models-storage-accounting"} <= set(
        MODULE_SECRETS
    )


@pytest.mark.parametrize(
    "secret",
    [*MODULE_SECRETS, "ai-models-module-registry", "publish-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0-token"],
)
def test_a_source_may_not_take_its_token_from_a_module_secret(secret: str) -> None:
    refusal = module_secret_refusal(secret, field=FIELD)
    assert refusal is not None
    assert f"Secret d8-ai-models/{secret} named in {FIELD} is one of the module's own" in refusal
    assert "put the token into a Secret of another name" in refusal


@pytest.mark.parametrize(
    "secret", ["hub-token", "cluster-a-token", "my-ai-models-token", "publisher", "ai-model"]
)
def test_a_source_may_name_any_other_secret(secret: str) -> None:
    assert module_secret_refusal(secret, field=FIELD) is None


def test_the_refusal_to_read_names_the_secret_and_the_exact_grant() -> None:
    message = read_refused("team-a", "hf", field="spec.source.authSecretRef")
    assert message == (
        "the controller may not read Secret team-a/hf named in spec.source.authSecretRef: someone who "
        "can read that Secret grants it with `d8 k -n team-a create role ai-models-read-hf --verb=get "
        "--resource=secrets --resource-name=hf` and `d8 k -n team-a create rolebinding ai-models-read-hf "
        "--role=ai-models-read-hf --serviceaccount=d8-ai-models:controller`; the controller tries again"
    )
    assert grant_commands("team-a", "hf") in message


def test_the_grant_objects_read_one_secret_by_name_for_the_controller_only() -> None:
    role, binding = grant_objects("team-a", "hf")
    assert (role["kind"], role["metadata"]) == ("Role", {"name": "ai-models-read-hf", "namespace": "team-a"})
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["hf"], "verbs": ["get"]}
    ]
    assert binding["kind"] == "RoleBinding"
    assert binding["metadata"] == role["metadata"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "ai-models-read-hf",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "controller", "namespace": "d8-ai-models"}
    ]
