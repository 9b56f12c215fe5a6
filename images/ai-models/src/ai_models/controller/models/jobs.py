"""Publication Jobs: what one publication adds to the publisher's pod template (its name, owner
labels, request variables and token Secret), built by the shared `controller.jobs.builder`; the
API calls that create, remove and read them are `adapters.kube.jobs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ai_models.adapters.kube.jobs import Jobs
from ai_models.controller.jobs.builder import JobLimits, WorkerJob, worker_job
from ai_models.controller.jobs.labels import label_value
from ai_models.controller.jobs.templates import pod_template_from_setting
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
    MODULE_OBJECT_LABELS,
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


def publisher_template(path: Path | None, *, variable: str) -> dict[str, Any]:
    """The publisher's pod template at the path the setting `variable` names."""
    return pod_template_from_setting(
        path, variable=variable, container=PUBLISHER_CONTAINER, configmap=PUBLISHER_TEMPLATE_CONFIGMAP
    )


def job_name(owner: Owner) -> str:
    # From the UID (36 characters), never the name: a Job name is a label value of its Pods.
    return f"{PUBLICATION_JOB_PREFIX}{owner.uid}"


def owner_labels(owner: Owner) -> dict[str, str]:
    return {
        **MODULE_OBJECT_LABELS,
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


def publication_job(
    template: Mapping[str, Any],
    *,
    owner: Owner,
    namespace: str,
    digest: str,
    env: Sequence[Mapping[str, Any]],
    limits: JobLimits,
) -> dict[str, Any]:
    return worker_job(
        template,
        WorkerJob(
            name=job_name(owner),
            namespace=namespace,
            container=PUBLISHER_CONTAINER,
            labels=owner_labels(owner),
            annotations={DIGEST_ANNOTATION: digest, **owner_annotations(owner)},
            env=env,
            termination_message_path=TERMINATION_MESSAGE_PATH,
            limits=limits,
        ),
    )


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

    def __init__(self, api_client: Any, *, namespace: str) -> None:
        self._jobs = Jobs(api_client, namespace=namespace)

    def create(self, job: Mapping[str, Any], secret: Mapping[str, Any] | None) -> None:
        """Create the token Secret (or update it) and the Job; the `KubeError` says which one failed."""
        self._jobs.create(job, secret)

    def delete(self, owner: Owner) -> None:
        self._jobs.delete(job_name(owner), secret_name=token_secret_name(owner))

    def termination_message(self, job: Mapping[str, Any]) -> str | None:
        """The termination message of the publisher container of the Job's most recent Pod."""
        return self._jobs.termination_message(job, container=PUBLISHER_CONTAINER)
