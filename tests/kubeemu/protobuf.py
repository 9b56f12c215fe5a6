"""Decoding the protobuf request bodies kubectl sends for typed built-ins.

kubectl's typed clients (`create configmap|secret|namespace|serviceaccount|role|rolebinding|
clusterrole|clusterrolebinding|token`, `auth can-i`) POST `application/vnd.kubernetes.protobuf`
and do not fall back to JSON on 415, so the emulator decodes those messages. Field numbers come from
the k8s.io/api generated.proto files. Responses are always JSON (clients accept it). Other kinds
are refused with 415.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

MAGIC = b"k8s\x00"

# message name -> {field number: (json name, type, repeated)}; types: s(tring), b(ytes), bool, i(nt),
# ("map", value type) or another message name.
_F = tuple[str, Any, bool]
_MESSAGES: dict[str, dict[int, _F]] = {
    "Unknown": {1: ("typeMeta", "TypeMeta", False), 2: ("raw", "b", False)},
    "TypeMeta": {1: ("apiVersion", "s", False), 2: ("kind", "s", False)},
    "Time": {1: ("seconds", "i", False), 2: ("nanos", "i", False)},
    "ObjectMeta": {
        1: ("name", "s", False),
        2: ("generateName", "s", False),
        3: ("namespace", "s", False),
        5: ("uid", "s", False),
        6: ("resourceVersion", "s", False),
        7: ("generation", "i", False),
        8: ("creationTimestamp", "Time", False),
        9: ("deletionTimestamp", "Time", False),
        10: ("deletionGracePeriodSeconds", "i", False),
        11: ("labels", ("map", "s"), False),
        12: ("annotations", ("map", "s"), False),
        13: ("ownerReferences", "OwnerReference", True),
        14: ("finalizers", "s", True),
    },
    "OwnerReference": {
        1: ("kind", "s", False),
        3: ("name", "s", False),
        4: ("uid", "s", False),
        5: ("apiVersion", "s", False),
        6: ("controller", "bool", False),
        7: ("blockOwnerDeletion", "bool", False),
    },
    "ConfigMap": {
        1: ("metadata", "ObjectMeta", False),
        2: ("data", ("map", "s"), False),
        3: ("binaryData", ("map", "b"), False),
        4: ("immutable", "bool", False),
    },
    "Secret": {
        1: ("metadata", "ObjectMeta", False),
        2: ("data", ("map", "b"), False),
        3: ("type", "s", False),
        4: ("stringData", ("map", "s"), False),
        5: ("immutable", "bool", False),
    },
    "Namespace": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "NamespaceSpec", False)},
    "NamespaceSpec": {1: ("finalizers", "s", True)},
    "ServiceAccount": {
        1: ("metadata", "ObjectMeta", False),
        2: ("secrets", "ObjectReference", True),
        3: ("imagePullSecrets", "LocalObjectReference", True),
        4: ("automountServiceAccountToken", "bool", False),
    },
    "ObjectReference": {
        1: ("kind", "s", False),
        2: ("namespace", "s", False),
        3: ("name", "s", False),
        4: ("uid", "s", False),
        5: ("apiVersion", "s", False),
        6: ("resourceVersion", "s", False),
        7: ("fieldPath", "s", False),
    },
    "LocalObjectReference": {1: ("name", "s", False)},
    "Role": {1: ("metadata", "ObjectMeta", False), 2: ("rules", "PolicyRule", True)},
    "ClusterRole": {
        1: ("metadata", "ObjectMeta", False),
        2: ("rules", "PolicyRule", True),
        3: ("aggregationRule", "AggregationRule", False),
    },
    "AggregationRule": {1: ("clusterRoleSelectors", "LabelSelector", True)},
    "LabelSelector": {
        1: ("matchLabels", ("map", "s"), False),
        2: ("matchExpressions", "LabelSelectorRequirement", True),
    },
    "LabelSelectorRequirement": {
        1: ("key", "s", False),
        2: ("operator", "s", False),
        3: ("values", "s", True),
    },
    "PolicyRule": {
        1: ("verbs", "s", True),
        2: ("apiGroups", "s", True),
        3: ("resources", "s", True),
        4: ("resourceNames", "s", True),
        5: ("nonResourceURLs", "s", True),
    },
    "RoleBinding": {
        1: ("metadata", "ObjectMeta", False),
        2: ("subjects", "Subject", True),
        3: ("roleRef", "RoleRef", False),
    },
    "Subject": {
        1: ("kind", "s", False),
        2: ("apiGroup", "s", False),
        3: ("name", "s", False),
        4: ("namespace", "s", False),
    },
    "RoleRef": {1: ("apiGroup", "s", False), 2: ("kind", "s", False), 3: ("name", "s", False)},
    "SelfSubjectAccessReview": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "SSARSpec", False)},
    "SSARSpec": {
        1: ("resourceAttributes", "ResourceAttributes", False),
        2: ("nonResourceAttributes", "NonResourceAttributes", False),
    },
    "SubjectAccessReview": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "SARSpec", False)},
    "SARSpec": {
        1: ("resourceAttributes", "ResourceAttributes", False),
        2: ("nonResourceAttributes", "NonResourceAttributes", False),
        3: ("user", "s", False),
        4: ("groups", "s", True),
        6: ("uid", "s", False),
    },
    "ResourceAttributes": {
        1: ("namespace", "s", False),
        2: ("verb", "s", False),
        3: ("group", "s", False),
        4: ("version", "s", False),
        5: ("resource", "s", False),
        6: ("subresource", "s", False),
        7: ("name", "s", False),
    },
    "NonResourceAttributes": {1: ("path", "s", False), 2: ("verb", "s", False)},
    "SelfSubjectRulesReview": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "SSRRSpec", False)},
    "SSRRSpec": {1: ("namespace", "s", False)},
    "TokenRequest": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "TokenRequestSpec", False)},
    "TokenRequestSpec": {
        1: ("audiences", "s", True),
        3: ("boundObjectRef", "BoundObjectReference", False),
        4: ("expirationSeconds", "i", False),
    },
    "BoundObjectReference": {
        1: ("kind", "s", False),
        2: ("apiVersion", "s", False),
        3: ("name", "s", False),
        4: ("uid", "s", False),
    },
    "TokenReview": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "TokenReviewSpec", False)},
    "TokenReviewSpec": {1: ("token", "s", False), 2: ("audiences", "s", True)},
    "SelfSubjectReview": {1: ("metadata", "ObjectMeta", False)},
}
_TOP_LEVEL = {
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Namespace"),
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SubjectAccessReview"),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"),
    ("authentication.k8s.io/v1", "TokenRequest"),
    ("authentication.k8s.io/v1", "TokenReview"),
    ("authentication.k8s.io/v1", "SelfSubjectReview"),
}
_ALIASES = {"ClusterRoleBinding": "RoleBinding", "LocalSubjectAccessReview": "SubjectAccessReview"}


class ProtobufError(ValueError):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _scalar(kind: str, value: Any) -> Any:
    if kind == "s":
        return bytes(value).decode()
    if kind == "b":
        return base64.b64encode(bytes(value)).decode()
    if kind == "bool":
        return bool(value)
    if kind == "i":
        return value - (1 << 64) if value >= 1 << 63 else value
    raise ProtobufError(kind)


def _message(name: str, data: bytes) -> Any:
    spec = _MESSAGES[name]
    out: dict[str, Any] = {}
    for number, _, value in _fields(data):
        if number not in spec:
            continue
        json_name, kind, repeated = spec[number]
        if isinstance(kind, tuple):
            entry = {n: v for n, _, v in _fields(value)}
            key = bytes(entry.get(1, b"")).decode()
            out.setdefault(json_name, {})[key] = _scalar(kind[1], entry.get(2, b""))
            continue
        decoded = _message(kind, value) if kind in _MESSAGES else _scalar(kind, value)
        if repeated:
            out.setdefault(json_name, []).append(decoded)
        else:
            out[json_name] = decoded
    if name == "Time":
        seconds = out.get("seconds", 0)
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if seconds else None
    return {k: v for k, v in out.items() if v not in ("", None, {}, [])}


def decode(body: bytes) -> dict[str, Any]:
    """A Kubernetes protobuf envelope → the object as JSON would carry it."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing k8s protobuf magic")
    unknown = _message("Unknown", body[len(MAGIC) :])
    type_meta = unknown.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    if (api_version, kind) not in _TOP_LEVEL:
        raise ProtobufError(
            f"protobuf encoding of {api_version}/{kind} is not supported by the emulator; use JSON"
        )
    raw = base64.b64decode(unknown.get("raw", ""))
    obj: dict[str, Any] = _message(_ALIASES.get(kind, kind), raw)
    obj["apiVersion"], obj["kind"] = api_version, kind
    obj.setdefault("metadata", {})
    return obj
