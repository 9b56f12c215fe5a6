"""The controller reads a user's Secret only through a grant that names it (D160), with the chart's
RBAC stored in the emulator and enforced on the controller's own ServiceAccount: a Model's
authSecretRef through the Role the docs' example shows, a catalog source's token through the
commands the refusal gives, and never one of the module's own Secrets through a source."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.secrets import Secrets
from ai_models.adapters.kube.source_tokens import TokenSecretMissing, source_token
from ai_models.domain.secret_reads import (
    grant_commands,
    grant_objects,
    module_secret_refusal,
    read_refused,
)
from ai_models.names import MODULE_NAMESPACE, UPLOAD_SIGNING_SECRET
from kubeemu.pytest_fixtures import RunningEmulator
from support.module_install import install_module
from support.paths import DOCS_DIR
from support.yamlfiles import load_yaml_documents

COMMAND = re.compile(r"`d8 k ([^`]+)`")
# A grant's two commands as the guides show them, one per line of a shell block.
GUIDE_GRANT = re.compile(
    r"^ *d8 k (-n (\S+) create role ai-models-read-\S+ --verb=get --resource=secrets --resource-name=(\S+))\n"
    r" *d8 k (-n \S+ create rolebinding .*)$",
    re.MULTILINE,
)
TOKEN_FIELD = "spec.huggingFace.tokenSecretRef"


@pytest.fixture
def controller_api(kube_emulator: RunningEmulator) -> Any:
    """An API client of the controller's ServiceAccount, with the chart's roles installed."""
    module = install_module(kube_emulator)
    return kube_emulator.api_client(module.service_accounts["controller"])


def _secret(emulator: RunningEmulator, namespace: str, name: str, token: str) -> None:
    emulator.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "stringData": {"token": token},
        }
    )


def _source(secret: str) -> dict[str, Any]:
    return {
        "kind": "ModelCatalogSource",
        "metadata": {"name": "hub"},
        "spec": {"provider": "HuggingFace", "huggingFace": {"tokenSecretRef": {"name": secret}}},
    }


def test_the_controller_reads_a_model_secret_only_once_the_documented_grant_is_applied(
    kube_emulator: RunningEmulator, controller_api: Any
) -> None:
    documents = load_yaml_documents(DOCS_DIR / "examples" / "model-hf-private.yaml")
    [secret] = [item for item in documents if item["kind"] == "Secret"]
    grant = [item for item in documents if item["kind"] in ("Role", "RoleBinding")]
    assert grant == grant_objects("default", "hf-token")
    kube_emulator.cluster.apply(secret)
    _secret(kube_emulator, "default", "other", "hf_other")

    with pytest.raises(KubeError) as refused:
        Secrets(controller_api).read("default", "hf-token")
    assert refused.value.forbidden

    for obj in grant:
        kube_emulator.cluster.apply(obj)
    found = Secrets(controller_api).read("default", "hf-token")
    assert found is not None
    assert found.text("token") == secret["stringData"]["token"]
    # The grant names one Secret: its neighbour stays out of reach.
    with pytest.raises(KubeError) as neighbour:
        Secrets(controller_api).read("default", "other")
    assert neighbour.value.forbidden


def test_a_catalog_source_token_is_read_once_the_grant_the_refusal_names_is_made(
    kube_emulator: RunningEmulator, controller_api: Any
) -> None:
    _secret(kube_emulator, MODULE_NAMESPACE, "hub-token", "hf_admin")

    with pytest.raises(TokenSecretMissing) as refused:
        source_token(controller_api, MODULE_NAMESPACE, _source("hub-token"))
    message = str(refused.value)
    assert message == read_refused(MODULE_NAMESPACE, "hub-token", field=TOKEN_FIELD)

    commands = COMMAND.findall(message)
    assert len(commands) == 2
    for command in commands:
        kube_emulator.kubectl(*shlex.split(command))
    assert source_token(controller_api, MODULE_NAMESPACE, _source("hub-token")) == "hf_admin"


def test_a_catalog_source_cannot_borrow_a_module_secret_the_chart_lets_the_controller_read(
    kube_emulator: RunningEmulator, controller_api: Any
) -> None:
    _secret(kube_emulator, MODULE_NAMESPACE, UPLOAD_SIGNING_SECRET, "signing-key")
    # RBAC alone would let it through: the chart grants the controller this Secret by name.
    assert Secrets(controller_api).read(MODULE_NAMESPACE, UPLOAD_SIGNING_SECRET) is not None

    with pytest.raises(TokenSecretMissing) as refused:
        source_token(controller_api, MODULE_NAMESPACE, _source(UPLOAD_SIGNING_SECRET))
    assert str(refused.value) == module_secret_refusal(UPLOAD_SIGNING_SECRET, field=TOKEN_FIELD)


@pytest.mark.parametrize("page", ["USER_GUIDE.md", "ADMIN_GUIDE.md"])
def test_the_grants_the_guides_show_let_the_controller_read_the_secret_they_name(
    kube_emulator: RunningEmulator, controller_api: Any, page: str
) -> None:
    grants = GUIDE_GRANT.findall((DOCS_DIR / page).read_text(encoding="utf-8"))
    assert grants, f"{page} shows no grant"
    for role_command, namespace, secret, binding_command in grants:
        # The guide's commands are the ones a refusal gives for that Secret.
        assert f"`d8 k {role_command}` and `d8 k {binding_command}`" == grant_commands(namespace, secret)
        kube_emulator.cluster.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        _secret(kube_emulator, namespace, secret, f"token of {secret}")
        with pytest.raises(KubeError):
            Secrets(controller_api).read(namespace, secret)
        kube_emulator.kubectl(*shlex.split(role_command))
        kube_emulator.kubectl(*shlex.split(binding_command))
        found = Secrets(controller_api).read(namespace, secret)
        assert found is not None
        assert found.text("token") == f"token of {secret}"
