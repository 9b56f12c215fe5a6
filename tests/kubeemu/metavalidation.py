"""ObjectMeta validation common to every kind (names, labels, annotations), with apiserver wording."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kubeemu.crdvalidation import FieldError
from kubeemu.resources import ResourceType

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)

# Kinds whose names follow other rules than a DNS subdomain.
_NAME_RULES = {
    "/namespaces": "label",
    "/services": "dns1035",
    "rbac.authorization.k8s.io/roles": "path",
    "rbac.authorization.k8s.io/rolebindings": "path",
    "rbac.authorization.k8s.io/clusterroles": "path",
    "rbac.authorization.k8s.io/clusterrolebindings": "path",
}


def _name_errors(rtype: ResourceType, name: str) -> list[FieldError]:
    rule = _NAME_RULES.get(rtype.storage_key, "subdomain")
    if rule == "path":
        if name in (".", "..") or "/" in name or "%" in name:
            return [
                FieldError(
                    "metadata.name", "Invalid", "may not contain '/' or '%' or be '.' or '..'", value=name
                )
            ]
        return []
    if rule == "label":
        if len(name) > 63:
            return [FieldError("metadata.name", "Invalid", "must be no more than 63 characters", value=name)]
        if not _DNS1123_LABEL.match(name):
            return [FieldError("metadata.name", "Invalid", _LABEL_MSG, value=name)]
        return []
    if rule == "dns1035":
        if len(name) > 63:
            return [FieldError("metadata.name", "Invalid", "must be no more than 63 characters", value=name)]
        if not _DNS1035_LABEL.match(name):
            return [FieldError("metadata.name", "Invalid", _DNS1035_MSG, value=name)]
        return []
    if len(name) > 253:
        return [FieldError("metadata.name", "Invalid", "must be no more than 253 characters", value=name)]
    if not _DNS1123_SUBDOMAIN.match(name):
        return [FieldError("metadata.name", "Invalid", _SUBDOMAIN_MSG, value=name)]
    return []


def _qualified_key_errors(path: str, key: str) -> list[str]:
    prefix, slash, name = key.rpartition("/")
    problems: list[str] = []
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        problems.append("prefix part " + _SUBDOMAIN_MSG)
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        problems.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an "
            "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        )
    del path
    return problems


def _label_errors(path: str, labels: Mapping[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    for key, value in labels.items():
        for problem in _qualified_key_errors(path, key):
            errors.append(FieldError(path, "Invalid", problem, value=key))
        if not isinstance(value, str) or len(value) > 63:
            errors.append(FieldError(path, "Invalid", "must be no more than 63 characters", value=value))
        elif not _LABEL_VALUE.match(value):
            errors.append(
                FieldError(
                    path,
                    "Invalid",
                    "a valid label must be an empty string or consist of alphanumeric characters, "
                    "'-', '_' or '.', "
                    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
                    "'my_value',  or "
                    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                    value=value,
                )
            )
    return errors


# Where the pod template sits in the kinds that have one (the apiserver validates its labels too).
_POD_TEMPLATE_PATHS = {
    "batch/jobs": ("spec", "template"),
    "batch/cronjobs": ("spec", "jobTemplate", "spec", "template"),
    "apps/deployments": ("spec", "template"),
    "apps/statefulsets": ("spec", "template"),
    "apps/daemonsets": ("spec", "template"),
    "apps/replicasets": ("spec", "template"),
}


def _pod_template_errors(rtype: ResourceType, obj: Mapping[str, Any]) -> list[FieldError]:
    path = _POD_TEMPLATE_PATHS.get(rtype.storage_key)
    if path is None:
        return []
    template: Any = obj
    for step in path:
        template = template.get(step) if isinstance(template, Mapping) else None
    labels = dict(((template or {}).get("metadata") or {}).get("labels") or {})
    field = ".".join(path) + ".labels"
    if rtype.storage_key == "batch/jobs" and not (obj.get("spec") or {}).get("manualSelector"):
        # The Job strategy adds `job-name` (and its batch.kubernetes.io/ form) to the template
        # before validation: a Job name longer than a label value is refused there.
        name = str((obj.get("metadata") or {}).get("name") or "")
        labels["job-name"] = name
    return _label_errors(field, labels)


def validate_metadata(rtype: ResourceType, obj: Mapping[str, Any]) -> list[FieldError]:
    meta = obj.get("metadata") or {}
    errors: list[FieldError] = []
    name = meta.get("name") or ""
    if not name:
        errors.append(FieldError("metadata.name", "Required", "name or generateName is required"))
    else:
        errors.extend(_name_errors(rtype, name))
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        errors.append(FieldError("metadata.labels", "Invalid", "must be a map of strings", value=labels))
        labels = {}
    errors.extend(_label_errors("metadata.labels", labels))
    errors.extend(_pod_template_errors(rtype, obj))
    annotations = meta.get("annotations") or {}
    if isinstance(annotations, Mapping):
        for key, value in annotations.items():
            for problem in _qualified_key_errors("metadata.annotations", key):
                errors.append(FieldError("metadata.annotations", "Invalid", problem, value=key))
            if not isinstance(value, str):
                errors.append(FieldError("metadata.annotations", "Invalid", "must be a string", value=value))
        total = sum(len(k) + len(v) for k, v in annotations.items() if isinstance(v, str))
        if total > 256 * 1024:
            errors.append(FieldError("metadata.annotations", "TooLong", "may not be more than 262144 bytes"))
    return errors
