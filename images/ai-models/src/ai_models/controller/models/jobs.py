"""Publication Jobs: built from the Helm-rendered pod template, and their state read back; the
API calls that create, remove and read them are `adapters.kube.jobs`.

Helm renders the publisher's pod template (image, placement, security context, resources, store
settings and credentials) into a ConfigMap mounted into the controller, so every pod the module
runs is reviewed in one place; the controller adds only what is specific to one publication.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from ai_models.adapters.kube.jobs import Jobs
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.publication.request import (
    DEFAULT_TERMINATION_MESSAGE_PATH,
    TOKEN_SECRET_KEY,
    PublicationRequest,
    PublicationSource,
    token_reference,
    token_secret_name,
)
from ai_models.domain.storage.ledger import Owner
from ai_models.names import (
    ARTIFACT_DIGEST_ANNOTATION,
    COMPONENT_LABEL,
    OWNER_KIND_LABEL,
    OWNER_NAME_ANNOTATION,
    OWNER_NAME_LABEL,
    OWNER_NAMESPACE_LABEL,
    OWNER_UID_LABEL,
    PUBLICATION_COMPONENT,
    PUBLICATION_JOB_PREFIX,
    PUBLISHER_TEMPLATE_CONFIGMAP,
    ModelKind,
)

DIGEST_ANNOTATION: Final = ARTIFACT_DIGEST_ANNOTATION
TERMINATION_MESSAGE_PATH: Final = DEFAULT_TERMINATION_MESSAGE_PATH
PUBLISHER_CONTAINER: Final = "publish"
TOKEN_KEY: Final = TOKEN_SECRET_KEY
# Exit codes of `ai-models publish` that mean "the outcome is final for this Job": a new Pod would
# fail the same way, so the Job must not spend its retries on it (1: failure with an outcome,
# 2: bad settings). Anything else (a killed or evicted Pod) is retried by the Job.
FINAL_EXIT_CODES: Final = (1, 2)
# What the API server accepts as a label value (and a Job name must be one: its Pods carry it in
# the `job-name` label).
LABEL_VALUE_MAX: Final = 63
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NAME_HASH_CHARACTERS: Final = 12


class PodTemplateError(RuntimeError):
    """A Job pod template the chart renders is missing or malformed; the message names the file."""


def load_pod_template(
    path: Path, *, container: str = PUBLISHER_CONTAINER, configmap: str = PUBLISHER_TEMPLATE_CONFIGMAP
) -> dict[str, Any]:
    """The pod template in `path` (mounted from `configmap`), which must have `container`."""
    what = configmap.removeprefix("ai-models-").removesuffix("-template") + " pod template"
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise PodTemplateError(f"cannot read the {what} {path}: {error}") from error
    spec = document.get("spec") if isinstance(document, dict) else None
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not any(
        isinstance(item, dict) and item.get("name") == container for item in containers
    ):
        raise PodTemplateError(
            f"the {what} {path} has no container named {container!r}; "
            f"it comes from the ConfigMap {configmap} rendered by the module's Helm chart"
        )
    result: dict[str, Any] = document
    return result


def pod_template_from_setting(
    path: Path | None,
    *,
    variable: str,
    container: str = PUBLISHER_CONTAINER,
    configmap: str = PUBLISHER_TEMPLATE_CONFIGMAP,
) -> dict[str, Any]:
    """The Job pod template at the path a setting (`variable`) names; a setting left unset is a
    `PodTemplateError` that says which ConfigMap of the module's Helm chart provides it."""
    if path is None:
        what = configmap.removeprefix("ai-models-").removesuffix("-template") + " pod template"
        raise PodTemplateError(
            f"{variable} is not set: the controller needs the {what} that the module's Helm chart renders "
            f"(ConfigMap {configmap})"
        )
    return load_pod_template(path, container=container, configmap=configmap)


def job_name(owner: Owner) -> str:
    # From the UID (36 characters), never the name: a Job name is a label value of its Pods.
    return f"{PUBLICATION_JOB_PREFIX}{owner.uid}"


def label_value(text: str) -> str:
    """`text` when it is a valid label value, else its first characters, `-` and a hash of all of it.

    Object names go to 253 characters, label values to 63; the derived value stays readable in
    `kubectl get -L` and differs for names that share their first 50 characters.
    """
    if len(text) <= LABEL_VALUE_MAX and _LABEL_VALUE.match(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:_NAME_HASH_CHARACTERS]
    head = re.sub(r"[^A-Za-z0-9]+$", "", re.sub(r"[^-A-Za-z0-9_.]", "", text)[: LABEL_VALUE_MAX - 13])
    head = re.sub(r"^[^A-Za-z0-9]+", "", head)
    return f"{head}-{digest}" if head else digest


def owner_labels(owner: Owner) -> dict[str, str]:
    return {
        COMPONENT_LABEL: PUBLICATION_COMPONENT,
        OWNER_KIND_LABEL: owner.kind,
        OWNER_NAMESPACE_LABEL: owner.namespace,  # a namespace name is a DNS label: it always fits
        OWNER_NAME_LABEL: label_value(owner.name),
        OWNER_UID_LABEL: owner.uid,
    }


def owner_annotations(owner: Owner) -> dict[str, str]:
    return {OWNER_NAME_ANNOTATION: owner.name}


def owner_key(obj: Mapping[str, Any]) -> ModelKey | None:
    """Which Model or ClusterModel a publication Job (or its Secret) is for; None if not ours.

    The whole name is in the annotation; a Job an earlier version created has only the label,
    which then held the whole name (longer names could not be published at all)."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    try:
        kind = ModelKind(labels.get(OWNER_KIND_LABEL, ""))
    except ValueError:
        return None
    name = (meta.get("annotations") or {}).get(OWNER_NAME_ANNOTATION) or labels.get(OWNER_NAME_LABEL)
    if not name:
        return None
    return ModelKey(kind, labels.get(OWNER_NAMESPACE_LABEL, ""), name)


def publication_env(owner: Owner, *, digest: str, source: PublicationSource) -> list[dict[str, Any]]:
    """The variables of the publication request (`domain.publication.request`), without the token."""
    request = PublicationRequest(
        owner=owner, digest=digest, source=source, termination_message_path=TERMINATION_MESSAGE_PATH
    )
    return request.to_env()


def token_env(owner: Owner) -> dict[str, Any]:
    """The request's token variable: a secretKeyRef to the token Secret, never the value."""
    return token_reference(owner)


@dataclasses.dataclass(frozen=True)
class JobLimits:
    backoff_limit: int
    deadline_seconds: int


def publication_job(
    template: Mapping[str, Any],
    *,
    owner: Owner,
    namespace: str,
    digest: str,
    env: Sequence[Mapping[str, Any]],
    limits: JobLimits,
) -> dict[str, Any]:
    pod = copy.deepcopy(dict(template))
    labels = owner_labels(owner)
    metadata = pod.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
    spec = pod["spec"]
    spec["restartPolicy"] = "Never"
    for container in spec["containers"]:
        if container["name"] == PUBLISHER_CONTAINER:
            container["env"] = [*(container.get("env") or []), *env]
            container["terminationMessagePath"] = TERMINATION_MESSAGE_PATH
            container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(owner),
            "namespace": namespace,
            "labels": {**(metadata.get("labels") or {}), **labels},
            "annotations": {DIGEST_ANNOTATION: digest, **owner_annotations(owner)},
        },
        "spec": {
            "backoffLimit": limits.backoff_limit,
            "activeDeadlineSeconds": limits.deadline_seconds,
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "FailJob",
                        "onExitCodes": {
                            "containerName": PUBLISHER_CONTAINER,
                            "operator": "In",
                            "values": list(FINAL_EXIT_CODES),
                        },
                    }
                ]
            },
            "template": pod,
        },
    }


def token_secret(owner: Owner, *, namespace: str, token: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": token_secret_name(owner),
            "namespace": namespace,
            "labels": owner_labels(owner),
            "annotations": owner_annotations(owner),
        },
        "type": "Opaque",
        "stringData": {TOKEN_KEY: token},
    }


class JobApi:
    """The publication objects of one owner in the module namespace: its Job and token Secret."""

    def __init__(self, api_client: Any, *, namespace: str, timeout: tuple[float, float] = (3, 30)) -> None:
        self._jobs = Jobs(api_client, namespace=namespace, timeout=timeout)

    def create(self, job: Mapping[str, Any], secret: Mapping[str, Any] | None) -> None:
        """Create the token Secret (or update it) and the Job; `ObjectRefused` says which one failed."""
        self._jobs.create(job, secret)

    def delete(self, owner: Owner) -> None:
        self._jobs.delete(job_name(owner), secret_name=token_secret_name(owner))

    def termination_message(self, job: Mapping[str, Any]) -> str | None:
        """The termination message of the publisher container of the Job's most recent Pod."""
        return self._jobs.termination_message(job, container=PUBLISHER_CONTAINER)
