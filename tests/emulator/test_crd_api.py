"""CRDs through the API (live registration) and the module's real CRDs from crds/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as typed_client
from kubernetes.client.exceptions import ApiException

from kubeemu.pytest_fixtures import RunningEmulator, api_status

# The generated client types its parameters as pydantic models; tests pass plain dicts, as
# callers do at runtime, so the client is used untyped here.
client: Any = typed_client

REPO = Path(__file__).resolve().parents[2]


def thing_crd(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.other.test"},
        "spec": {
            "group": "other.test",
            "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing", "shortNames": ["th"]},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
            ],
        },
    }


def test_creating_a_crd_registers_its_resource_live(api: Any) -> None:
    extensions = client.ApiextensionsV1Api(api)
    created = extensions.create_custom_resource_definition(
        thing_crd(
            {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "properties": {"n": {"type": "integer", "default": 5}}}
                },
            }
        )
    )
    conditions = {c.type: c.status for c in created.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert created.status.stored_versions == ["v1"]
    thing = client.CustomObjectsApi(api).create_namespaced_custom_object(
        "other.test",
        "v1",
        "default",
        "things",
        {"apiVersion": "other.test/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {}},
    )
    assert thing["spec"] == {"n": 5}
    extensions.delete_custom_resource_definition("things.other.test")
    groups = [g.name for g in client.ApisApi(api).get_api_versions().groups]
    assert "other.test" not in groups


def test_invalid_crds_are_rejected_with_422(api: Any) -> None:
    extensions = client.ApiextensionsV1Api(api)
    cases = [
        (
            thing_crd({"type": "object", "properties": {"spec": {"description": "untyped"}}}),
            "must not be empty for specified object fields",
        ),
        (
            thing_crd({"type": "object", "x-kubernetes-validations": [{"rule": "self.missing == 1"}]}),
            "undefined field 'missing'",
        ),
    ]
    for crd, fragment in cases:
        with pytest.raises(ApiException) as caught:
            extensions.create_custom_resource_definition(crd)
        status = api_status(caught.value)
        assert (caught.value.status, status["reason"]) == (422, "Invalid")
        assert status["message"].startswith(
            'CustomResourceDefinition.apiextensions.k8s.io "things.other.test" is invalid'
        )
        assert fragment in status["message"]


def test_module_crds_are_served_and_enforced(kube_emulator: RunningEmulator) -> None:
    resources = kube_emulator.kubectl(
        "api-resources", "--api-group=ai.deckhouse.io", "-o", "name"
    ).stdout.split()
    assert sorted(resources) == [
        "clustermodels.ai.deckhouse.io",
        "modelcatalogsources.ai.deckhouse.io",
        "models.ai.deckhouse.io",
    ]
    example = (REPO / "docs" / "examples" / "model-hf.yaml").read_text()
    assert "created" in kube_emulator.kubectl("apply", "-f", "-", input=example).stdout
    listed = kube_emulator.kubectl("get", "ai-models", "-A", "-o", "name").stdout.split()
    assert f"model.ai.deckhouse.io/{yaml.safe_load(example)['metadata']['name']}" in listed
    bad = yaml.safe_load(example)
    bad["metadata"]["name"] = "two-sources"
    bad["spec"]["source"]["upload"] = {}
    rejected = kube_emulator.kubectl("apply", "-f", "-", input=yaml.safe_dump(bad), check=False)
    assert rejected.returncode == 1
    assert (
        'The Model "two-sources" is invalid: spec.source: Invalid value: "object": '
        "exactly one of url, upload "
        "or catalog must be set"
    ) in rejected.stderr
    name = yaml.safe_load(example)["metadata"]["name"]
    changed = kube_emulator.kubectl(
        "patch",
        "model",
        name,
        "--type=merge",
        "-p",
        '{"spec":{"source":{"url":"https://huggingface.co/other/repo"}}}',
        check=False,
    )
    assert "spec.source is immutable" in changed.stderr
