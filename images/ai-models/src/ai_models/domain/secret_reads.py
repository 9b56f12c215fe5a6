"""Which Secrets the controller may read, and how a user lets it read one (D160).

The controller holds no cluster-wide `get` on Secrets. It reads a user's Secret (a Model's
`spec.source.authSecretRef`, a ModelCatalogSource's `tokenSecretRef`) only where a Role names that
Secret in `resourceNames` and a RoleBinding gives it to the controller's ServiceAccount. RBAC lets
only someone who may read the Secret create that grant, so a reference alone never reaches a
Secret its author could not read. This module spells the grant once: as the two commands a refusal
message gives and as the objects they create (the docs' example is checked against them). It also
holds the one rule that keeps a ModelCatalogSource's token away from the module's own Secrets,
some of which the chart lets the controller read by name. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from ai_models.names import (
    CONTROLLER_SERVICE_ACCOUNT,
    MODULE_NAMESPACE,
    MODULE_SECRET_PREFIX,
    PUBLICATION_JOB_PREFIX,
    SECRET_READ_GRANT_PREFIX,
)

RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"


def grant_name(secret: str) -> str:
    """The name of the Role and of the RoleBinding that let the controller read `secret`."""
    return f"{SECRET_READ_GRANT_PREFIX}{secret}"


def grant_commands(namespace: str, secret: str) -> str:
    """The two commands that let the controller read Secret `namespace/secret` and nothing else."""
    name = grant_name(secret)
    return (
        f"`d8 k -n {namespace} create role {name} --verb=get --resource=secrets "
        f"--resource-name={secret}` and `d8 k -n {namespace} create rolebinding {name} --role={name} "
        f"--serviceaccount={MODULE_NAMESPACE}:{CONTROLLER_SERVICE_ACCOUNT}`"
    )


def grant_objects(namespace: str, secret: str) -> list[dict[str, Any]]:
    """The Role and the RoleBinding `grant_commands` creates, as objects to apply."""
    name = grant_name(secret)
    return [
        {
            "apiVersion": RBAC_API_VERSION,
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret], "verbs": ["get"]}
            ],
        },
        {
            "apiVersion": RBAC_API_VERSION,
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [
                {"kind": "ServiceAccount", "name": CONTROLLER_SERVICE_ACCOUNT, "namespace": MODULE_NAMESPACE}
            ],
        },
    ]


def read_refused(namespace: str, secret: str, *, field: str) -> str:
    """The message for a Secret the API server would not let the controller read."""
    return (
        f"the controller may not read Secret {namespace}/{secret} named in {field}: someone who can "
        f"read that Secret grants it with {grant_commands(namespace, secret)}; the controller tries again"
    )


def module_secret_refusal(secret: str, *, field: str) -> str | None:
    """Why a ModelCatalogSource may not take its token from `secret` in the module namespace (it is
    one of the module's own Secrets, or named like one), or None when it may."""
    if not (secret.startswith(MODULE_SECRET_PREFIX) or secret.startswith(PUBLICATION_JOB_PREFIX)):
        return None
    return (
        f"Secret {MODULE_NAMESPACE}/{secret} named in {field} is one of the module's own (the names "
        f"{MODULE_SECRET_PREFIX}* and {PUBLICATION_JOB_PREFIX}* are reserved for them), never a source's "
        "token; put the token into a Secret of another name and name that one"
    )
