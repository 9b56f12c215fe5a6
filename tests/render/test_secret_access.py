"""Who may touch which Secret of d8-ai-models (issue 14 item 8, D122), asked of the emulator's RBAC
authorizer (the upstream rules) over every rendered role and binding, for each module
ServiceAccount, in both delivery modes.

- Secrets of the module namespace are reached by name (`resourceNames`) wherever the chart knows
  the name. What no rule can narrow stays, exactly: create (the object does not exist yet, so its
  name is not an authorization attribute), the controller's update and delete of the publication
  token Secrets (named after object UIDs). The controller has no cluster-wide read of Secrets
  (D160): a user's Secret is read only where its namespace's admin granted it by name.
- Nobody lists or watches the Secrets of d8-ai-models, or patches one it does not own.
- The module CA (ai-models-root-ca, its key) is read only by the internal TLS hook (Deckhouse's own
  identity): it is in nobody's resourceNames and no rendered object but the Secret itself names it,
  so no pod mounts it or reads it through an env var.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache

import pytest

from ai_models.domain.secret_reads import module_secret_refusal
from ai_models.names import MODULE_NAMESPACE, ROOT_CA_SECRET
from kubeemu.authz import Attributes
from kubeemu.cluster import Cluster
from support.render import RenderedChart
from support.scenarios import generated_certificate, scenario

RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
MODES = {"SharedPVC": "minimal", "NodeCache": "delivery-node-cache"}
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")
# A name the chart does not know: a catalog source token, a publication token, anything else.
UNKNOWN = "someone-elses-secret"
# (ServiceAccount, verb) allowed on a Secret of d8-ai-models whose name the chart does not know.
UNNARROWABLE = {
    ("controller", "create"),
    ("controller", "update"),  # a publication token left by an earlier attempt
    ("controller", "delete"),  # a publication token, with its Job
    ("api", "create"),  # the ledger on the first upload
}
# The Secrets the chart knows by name, and what each ServiceAccount may do to them beyond the above.
NAMED = {
    ("controller", "ai-models-storage-accounting"): {"get", "list", "watch", "patch"},
    ("controller", "ai-models-upload-signing"): {"get"},
    ("controller", "ai-models-delivery-signing"): {"get"},
    ("controller", "ai-models-module-registry"): {"get"},
    ("api", "ai-models-storage-accounting"): {"get", "patch"},
    ("api", "ai-models-upload-signing"): {"get"},
    ("api", "ai-models-delivery-signing"): {"get"},
}


@cache
def chart(mode: str) -> RenderedChart:
    """The mode's scenario once the internal TLS hook has run: the CA and both certificates render."""
    pair = generated_certificate()
    certificate = {"ca": pair.ca_pem, "crt": pair.cert_pem, "key": pair.key_pem}
    tls = {
        "rootCA": {"crt": pair.ca_pem, "key": pair.key_pem},
        "apiCert": certificate,
        "controllerCert": certificate,
    }
    base = scenario(MODES[mode])
    rendered = dataclasses.replace(base, internal={**base.internal, **tls}).render()
    rendered.get("Secret", ROOT_CA_SECRET, MODULE_NAMESPACE)  # the object this file is about renders
    return rendered


@cache
def authorizer(mode: str) -> Cluster:
    cluster = Cluster()
    cluster.apply(chart(mode).get("Namespace", MODULE_NAMESPACE))
    for kind in RBAC_KINDS:
        for obj in chart(mode).of_kind(kind):
            cluster.apply(obj)
    return cluster


def service_accounts(mode: str) -> list[str]:
    return sorted(account["metadata"]["name"] for account in chart(mode).of_kind("ServiceAccount"))


def allowed(mode: str, account: str, verb: str, name: str) -> bool:
    attrs = Attributes(
        user=f"system:serviceaccount:{MODULE_NAMESPACE}:{account}",
        groups=(
            "system:serviceaccounts",
            f"system:serviceaccounts:{MODULE_NAMESPACE}",
            "system:authenticated",
        ),
        verb=verb,
        namespace=MODULE_NAMESPACE,
        resource="secrets",
        name=name,
    )
    return authorizer(mode).authz.authorize(attrs).allowed


def granted(mode: str, name: str) -> set[tuple[str, str]]:
    return {
        (account, verb)
        for account in service_accounts(mode)
        for verb in VERBS
        if allowed(mode, account, verb, name)
    }


@pytest.mark.parametrize("mode", MODES)
def test_every_module_service_account_is_checked(mode: str) -> None:
    expected = {"api", "controller", "publisher"} | ({"node-cache"} if mode == "NodeCache" else set())
    assert set(service_accounts(mode)) == expected


@pytest.mark.parametrize("mode", MODES)
def test_a_secret_the_chart_does_not_name_gets_only_what_rbac_cannot_narrow(mode: str) -> None:
    assert granted(mode, UNKNOWN) == UNNARROWABLE


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("verb", ["list", "watch"])
def test_nobody_lists_or_watches_the_module_namespace_secrets(mode: str, verb: str) -> None:
    """A list or watch without a metadata.name field selector carries no name: it would return
    every Secret of d8-ai-models, the module CA among them."""
    assert {account for account, granted_verb in granted(mode, "") if granted_verb == verb} == set()


@pytest.mark.parametrize("mode", MODES)
def test_named_secrets_are_reached_by_name_and_no_further(mode: str) -> None:
    """Each Secret the chart names: exactly what its users need, on top of UNNARROWABLE."""
    for name in sorted({name for _, name in NAMED}):
        by_name = {
            (account, verb) for (account, named), verbs in NAMED.items() if named == name for verb in verbs
        }
        assert granted(mode, name) == UNNARROWABLE | by_name, name


@pytest.mark.parametrize("mode", MODES)
def test_the_module_ca_is_granted_by_name_to_nobody(mode: str) -> None:
    """What reaches ai-models-root-ca is only what reaches any Secret (UNNARROWABLE): no rule names it."""
    assert granted(mode, ROOT_CA_SECRET) == UNNARROWABLE
    for kind in ("Role", "ClusterRole"):
        for role in chart(mode).of_kind(kind):
            for rule in role.get("rules") or []:
                assert ROOT_CA_SECRET not in (rule.get("resourceNames") or []), role["metadata"]["name"]


@pytest.mark.parametrize("mode", MODES)
def test_no_rendered_object_but_the_secret_names_the_module_ca(mode: str) -> None:
    """No pod (Deployment, DaemonSet, the Job pod templates) mounts the CA's Secret or reads it
    through an env var or a projected volume: its name appears in no other object."""
    naming = [
        f"{obj['kind']}/{obj['metadata']['name']}"
        for obj in chart(mode).objects
        if ROOT_CA_SECRET in json.dumps(obj)
        and not (obj["kind"] == "Secret" and obj["metadata"]["name"] == ROOT_CA_SECRET)
    ]
    assert naming == []


@pytest.mark.parametrize("mode", MODES)
def test_the_module_namespace_secret_rules_without_names_grant_only_create_update_delete(mode: str) -> None:
    """Structural twin of the authorizer checks: every Role of d8-ai-models and every ClusterRole
    bound to a module ServiceAccount, rule by rule."""
    for kind in ("Role", "ClusterRole"):
        for role in chart(mode).of_kind(kind):
            if kind == "Role" and role["metadata"].get("namespace") != MODULE_NAMESPACE:
                continue
            for rule in role.get("rules") or []:
                if "secrets" not in (rule.get("resources") or []) or rule.get("resourceNames"):
                    continue
                verbs = set(rule["verbs"])
                allowed_verbs = {"create", "update", "delete"} if kind == "Role" else {"create", "update"}
                assert verbs <= allowed_verbs, f"{kind} {role['metadata']['name']}: {sorted(verbs)}"


@pytest.mark.parametrize("mode", MODES)
def test_no_cluster_role_of_a_module_account_reads_secrets(mode: str) -> None:
    """No ClusterRole bound to a module ServiceAccount gives get, list or watch on Secrets, so no
    Secret of any namespace (Helm's, the CA's, a user's) is readable by the module without a grant
    naming it (D160)."""
    subjects = {f"system:serviceaccount:{MODULE_NAMESPACE}:{name}" for name in service_accounts(mode)}
    bound = {
        binding["roleRef"]["name"]
        for binding in chart(mode).of_kind("ClusterRoleBinding")
        if any(
            f"system:serviceaccount:{item.get('namespace')}:{item['name']}" in subjects
            for item in binding.get("subjects") or []
            if item.get("kind") == "ServiceAccount"
        )
    }
    reading = [
        (role["metadata"]["name"], sorted(set(rule["verbs"]) & {"get", "list", "watch", "*"}))
        for role in chart(mode).of_kind("ClusterRole")
        if role["metadata"]["name"] in bound
        for rule in role.get("rules") or []
        if {"secrets", "*"} & set(rule.get("resources") or [])
        and set(rule["verbs"]) & {"get", "list", "watch", "*"}
    ]
    assert bound, "no ClusterRole is bound to a module ServiceAccount: the check would see nothing"
    assert reading == []


@pytest.mark.parametrize("mode", MODES)
def test_the_controller_reads_no_secret_of_another_namespace(mode: str) -> None:
    attrs = Attributes(
        user=f"system:serviceaccount:{MODULE_NAMESPACE}:controller",
        groups=(
            "system:serviceaccounts",
            f"system:serviceaccounts:{MODULE_NAMESPACE}",
            "system:authenticated",
        ),
        verb="get",
        namespace="team-a",
        resource="secrets",
        name="hf-token",
    )
    assert not authorizer(mode).authz.authorize(attrs).allowed


@pytest.mark.parametrize("mode", MODES)
def test_every_secret_the_controller_may_read_is_one_no_source_may_name(mode: str) -> None:
    """The names the chart lets the controller read in d8-ai-models are all reserved by the rule
    that refuses them as a ModelCatalogSource's token, and so is every Secret the chart renders
    there: a source cannot make the controller send one of them."""
    readable = {
        name for (account, name), verbs in NAMED.items() if account == "controller" and "get" in verbs
    }
    for name in sorted(readable):
        assert ("controller", "get") in granted(mode, name), name
    rendered = {
        obj["metadata"]["name"]
        for obj in chart(mode).of_kind("Secret")
        if obj["metadata"].get("namespace") == MODULE_NAMESPACE
    }
    named_in_roles = {
        name
        for role in chart(mode).of_kind("Role")
        if role["metadata"].get("namespace") == MODULE_NAMESPACE
        for rule in role.get("rules") or []
        if "secrets" in (rule.get("resources") or [])
        for name in rule.get("resourceNames") or []
    }
    assert rendered
    assert named_in_roles
    for name in sorted(readable | rendered | named_in_roles):
        assert module_secret_refusal(name, field="spec.huggingFace.tokenSecretRef") is not None, name


@pytest.mark.parametrize("mode", MODES)
def test_the_pull_secret_the_controller_is_told_to_copy_is_granted_to_it_by_name(mode: str) -> None:
    """SharedPVC delivery copies the Secret AI_MODELS_DELIVERY_REGISTRY_SECRET names: without a
    cluster-wide read, that name must be one the controller's Role names."""
    deployment = chart(mode).get("Deployment", "ai-models-controller", MODULE_NAMESPACE)
    [name] = [
        item["value"]
        for container in deployment["spec"]["template"]["spec"]["containers"]
        for item in container.get("env") or []
        if item["name"] == "AI_MODELS_DELIVERY_REGISTRY_SECRET"
    ]
    assert ("controller", "get") in granted(mode, name)
