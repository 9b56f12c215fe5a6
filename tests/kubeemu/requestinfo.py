"""URL + method → what the request is about, the way the apiserver's RequestInfoFactory reads it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_NAMESPACE_SUBRESOURCES = {"status", "finalize"}


@dataclass(frozen=True)
class RequestInfo:
    path: str
    verb: str
    resource_request: bool
    api_prefix: str = ""  # "api" | "apis"
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    name: str = ""
    subresource: str = ""
    parts: tuple[str, ...] = ()


_HTTP_VERBS = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


def _is_true(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


def parse_request(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    raw_verb = method.upper()
    non_resource = RequestInfo(
        path=path, verb=_HTTP_VERBS.get(raw_verb, raw_verb.lower()), resource_request=False
    )
    parts = [p for p in path.strip("/").split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return non_resource
    prefix = parts[0]
    rest = parts[1:]
    if prefix == "api":
        if len(rest) < 1:
            return non_resource
        group, version, rest = "", rest[0], rest[1:]
    else:
        if len(rest) < 2:
            return non_resource
        group, version, rest = rest[0], rest[1], rest[2:]
    if not rest:
        return non_resource
    watch_prefix = False
    if rest[0] == "watch":
        watch_prefix = True
        rest = rest[1:]
    namespace = ""
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if len(rest) > 3:
        subresource = ""
    if raw_verb in ("GET", "HEAD"):
        if watch_prefix or _is_true(query.get("watch")):
            verb = "watch"
        elif name:
            verb = "get"
        else:
            verb = "list"
    elif raw_verb == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _HTTP_VERBS.get(raw_verb, raw_verb.lower())
    if verb in ("list", "watch") and not name:
        # A metadata.name field selector narrows the request to one object, as the apiserver notes.
        for requirement in (query.get("fieldSelector") or "").split(","):
            key, sep, value = requirement.partition("=")
            if key.strip() == "metadata.name" and sep and not value.startswith("="):
                name = value
            elif key.strip() == "metadata.name" and value.startswith("="):
                name = value[1:]
    return RequestInfo(
        path=path,
        verb=verb,
        resource_request=True,
        api_prefix=prefix,
        group=group,
        version=version,
        namespace=namespace,
        resource=resource,
        name=name,
        subresource=subresource,
        parts=tuple(rest),
    )
