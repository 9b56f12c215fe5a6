"""HTTP front of the emulator: authentication, authorization, content negotiation, and the
mapping of requests onto `Cluster` operations."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from aiohttp import web

from kubeemu import discovery, errors, protobuf, reviews
from kubeemu.admission import AdmissionAttributes, MutatingAdmission, WriteRequest
from kubeemu.authn import Identity
from kubeemu.authz import Attributes, forbidden_message
from kubeemu.cluster import Cluster, ValidatingCheck, WriteOptions, WriteResult
from kubeemu.jsonutil import dumps, loads_checking_duplicates
from kubeemu.openapi import OpenAPIDocuments
from kubeemu.patching import APPLY_PATCH_YAML, JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH
from kubeemu.podlogs import PodLogSource, serve_log
from kubeemu.request_metrics import RequestCounts
from kubeemu.requestinfo import RequestInfo, parse_request
from kubeemu.resources import ResourceType
from kubeemu.selectors import parse_field_selector, parse_label_selector
from kubeemu.tables import Negotiated, negotiate, partial_metadata, table
from kubeemu.validatingpolicy import ValidatingPolicies
from kubeemu.watch import INITIAL_EVENTS_END, WatchRequest, WatchSubscription, stream

log = logging.getLogger("kubeemu")

DEFAULT_WATCH_TIMEOUT = 1800.0
# Attempts of a webhook-admitted update whose object changed while its webhooks ran (the apiserver
# retries such a patch inside its storage update, calling the webhooks again).
_ADMITTED_UPDATE_ATTEMPTS = 5
_PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH_YAML)


@dataclass
class AppState:
    cluster: Cluster
    openapi: OpenAPIDocuments
    bookmark_interval: float
    admission: MutatingAdmission
    server_address: str = ""
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    watches: set[WatchSubscription] = field(default_factory=set)
    # Where Pods' logs are (pods/{name}/log); None: no Pod has one.
    pod_logs: PodLogSource | None = None
    requests: RequestCounts = field(default_factory=RequestCounts)


STATE: web.AppKey[AppState] = web.AppKey("kubeemu_state", AppState)


def json_response(
    obj: Any, *, status: int = 200, warnings: list[str] | None = None, content_type: str = "application/json"
) -> web.Response:
    headers = {"Content-Type": content_type}
    response = web.Response(body=dumps(obj), status=status, headers=headers)
    for warning in warnings or []:
        response.headers.add("Warning", f"299 - {json.dumps(warning)}")
    return response


@web.middleware
async def error_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    started = time.monotonic()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except errors.APIError as exc:
        status = exc.code
        return json_response(exc.status(), status=exc.code)
    except web.HTTPException as exc:
        status = exc.status
        raise
    except Exception as exc:
        log.exception("internal error serving %s %s", request.method, request.path_qs)
        return json_response(errors.internal(repr(exc)).status(), status=500)
    finally:
        request.app[STATE].requests.count(parse_request(request.method, request.path, request.query), status)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s %s -> %s (%.1f ms)",
                request.method,
                request.path_qs,
                status,
                (time.monotonic() - started) * 1000,
            )


def _authenticate(state: AppState, request: web.Request) -> Identity:
    identity = state.cluster.authn.authenticate(request.headers.get("Authorization"))
    if identity is None:
        raise errors.unauthorized()
    return _impersonate(state, request, identity)


def _impersonate(state: AppState, request: web.Request, identity: Identity) -> Identity:
    """`Impersonate-User`/`-Group` headers (kubectl --as/--as-group), authorized with verb impersonate."""
    user = request.headers.get("Impersonate-User")
    groups = tuple(request.headers.getall("Impersonate-Group", []))
    if not user and not groups:
        return identity
    if not user:
        raise errors.bad_request(f"requested {list(groups)} without impersonating a user")
    checks: list[tuple[str, str, str]] = []
    parts = user.split(":")
    if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"]:
        checks.append(("serviceaccounts", parts[2], parts[3]))
        if not groups:
            groups = ("system:serviceaccounts", f"system:serviceaccounts:{parts[2]}")
    else:
        checks.append(("users", "", user))
    checks.extend(("groups", "", group) for group in groups)
    for resource, namespace, name in checks:
        attrs = Attributes(
            user=identity.name,
            groups=identity.all_groups,
            verb="impersonate",
            namespace=namespace,
            resource=resource,
            name=name,
        )
        if not state.cluster.authz.authorize(attrs).allowed:
            raise errors.forbidden(group="", resource=resource, name=name, message=forbidden_message(attrs))
    return Identity(name=user, token="", groups=groups)


def _authorize(state: AppState, identity: Identity, info: RequestInfo) -> None:
    attrs = Attributes(
        user=identity.name,
        groups=identity.all_groups,
        verb=info.verb,
        resource_request=info.resource_request,
        namespace=info.namespace,
        api_group=info.group,
        api_version=info.version,
        resource=info.resource,
        subresource=info.subresource,
        name=info.name,
        path=info.path,
    )
    if not state.cluster.authz.authorize(attrs).allowed:
        raise errors.forbidden(
            group=info.group,
            resource=info.resource if info.resource_request else "",
            name=info.name,
            message=forbidden_message(attrs),
        )


async def handle(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    info = parse_request(request.method, request.path, request.query)
    identity = _authenticate(state, request)
    _authorize(state, identity, info)
    if not info.resource_request:
        return _non_resource(state, request, info)
    return await _resource(state, request, info, identity)


# --- non-resource endpoints: version, health, discovery, OpenAPI --------------------------------


def _non_resource(state: AppState, request: web.Request, info: RequestInfo) -> web.StreamResponse:
    if info.verb != "get":
        raise errors.method_not_allowed("the server does not allow this method on the requested resource")
    path = "/" + info.path.strip("/")
    registry = state.cluster.registry
    accept = request.headers.get("Accept")
    if path == "/version":
        return json_response(discovery.KUBERNETES_VERSION)
    if path in ("/healthz", "/livez", "/readyz"):
        return web.Response(text="ok", content_type="text/plain")
    if path == "/metrics":
        return web.Response(body=state.requests.exposition(), content_type="text/plain")
    if path in ("/api", "/apis"):
        if discovery.wants_aggregated(accept):
            return json_response(
                discovery.aggregated(registry, legacy=path == "/api"), content_type=discovery.AGGREGATED_V2
            )
        if path == "/api":
            return json_response(discovery.api_versions(state.server_address))
        return json_response(discovery.api_group_list(registry, state.server_address))
    parts = path.strip("/").split("/")
    if parts[0] == "apis" and len(parts) == 2:
        doc = discovery.api_group(registry, parts[1], state.server_address)
        if doc is not None:
            return json_response(doc)
    if (parts[0] == "api" and len(parts) == 2) or (parts[0] == "apis" and len(parts) == 3):
        group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
        resource_list = discovery.api_resource_list(registry, group, version)
        if resource_list is not None:
            return json_response(resource_list)
    if path == "/openapi/v3":
        return json_response(state.openapi.index())
    if path.startswith("/openapi/v3/"):
        body = state.openapi.document(path[len("/openapi/v3/") :])
        if body is not None:
            return web.Response(body=body, headers={"Content-Type": "application/json"})
    raise errors.path_not_found()


# --- resource endpoints ------------------------------------------------------------------------


def _field_validation(request: web.Request) -> str:
    value = request.query.get("fieldValidation", "") or "Warn"
    if value not in ("Strict", "Warn", "Ignore"):
        raise errors.bad_request(f'fieldValidation "{value}" is invalid: must be one of Ignore, Warn, Strict')
    return value


async def _read_body(request: web.Request) -> tuple[Any, tuple[str, ...]]:
    raw = await request.read()
    content_type = request.content_type or "application/json"
    if content_type == "application/vnd.kubernetes.protobuf":
        try:
            return protobuf.decode(raw), ()
        except protobuf.ProtobufError as exc:
            raise errors.APIError(code=415, reason="UnsupportedMediaType", message=str(exc)) from exc
    if content_type in ("application/yaml", "application/apply-patch+yaml", "text/yaml"):
        try:
            return yaml.safe_load(raw) if raw else None, ()
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"error converting YAML to JSON: {exc}") from exc
    if not raw:
        return None, ()
    try:
        value, duplicates = loads_checking_duplicates(raw)
    except ValueError as exc:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc
    return value, tuple(duplicates)


def _write_options(
    request: web.Request, duplicates: tuple[str, ...], validating: ValidatingCheck
) -> WriteOptions:
    return WriteOptions(
        dry_run="All" in request.query.getall("dryRun", []),
        field_validation=_field_validation(request),
        duplicates=duplicates,
        field_manager=request.query.get("fieldManager", ""),
        validating=validating,
    )


def _validating(
    state: AppState, request: web.Request, rtype: ResourceType, info: RequestInfo, identity: Identity
) -> ValidatingCheck:
    """The validating policies' check of this request, for the write to call once validated."""
    policies = ValidatingPolicies(state.cluster.store)
    dry_run = "All" in request.query.getall("dryRun", [])

    def check(obj: Mapping[str, Any] | None, old: Mapping[str, Any] | None) -> None:
        operation = "DELETE" if obj is None else "CREATE" if old is None else "UPDATE"
        meta = (obj if obj is not None else old or {}).get("metadata") or {}
        policies.check(
            AdmissionAttributes(
                operation=operation,
                rtype=rtype,
                namespace=str(meta.get("namespace") or "") if rtype.namespaced else "",
                name=str(meta.get("name") or ""),
                subresource=info.subresource,
                user=identity,
                dry_run=dry_run,
            ),
            obj,
            old,
        )

    return check


def _render_one(
    obj: Mapping[str, Any],
    rtype: ResourceType,
    negotiated: Negotiated,
    request: web.Request,
    *,
    with_headers: bool = True,
) -> Any:
    if negotiated.kind == "Table":
        return table(
            rtype,
            [obj],
            list_meta={"resourceVersion": obj["metadata"].get("resourceVersion", "")},
            include_object=request.query.get("includeObject", "Metadata"),
            version=negotiated.version,
            with_headers=with_headers,
        )
    if negotiated.kind.startswith("PartialObjectMetadata"):
        return partial_metadata(obj, negotiated.version)
    return obj


async def _resource(
    state: AppState, request: web.Request, info: RequestInfo, identity: Identity
) -> web.StreamResponse:
    cluster = state.cluster
    rtype = cluster.resource(info.group, info.version, info.resource)
    if rtype is None or (info.namespace and not rtype.namespaced and info.resource != "namespaces"):
        raise errors.path_not_found()
    if len(info.parts) > 3 or (info.subresource and info.subresource not in rtype.subresources):
        raise errors.path_not_found()
    namespace = info.namespace if rtype.namespaced else ""
    name = info.parts[1] if len(info.parts) > 1 else ""
    if info.subresource == "log" and info.verb == "get":
        pod = cluster.get(rtype, namespace=namespace, name=name)

        def read_pod() -> dict[str, Any] | None:
            try:
                return cluster.get(rtype, namespace=namespace, name=name)
            except errors.APIError:
                return None

        return await serve_log(
            request, pod=pod, source=state.pod_logs, read_pod=read_pod, stopping=state.stopping
        )
    if rtype.virtual or info.subresource == "token":
        return await _review(state, request, info, rtype, identity, namespace=namespace, name=name)
    negotiated = negotiate(request.headers.get("Accept"))
    verb = info.verb
    if verb == "get":
        obj = cluster.get(rtype, namespace=namespace, name=name)
        return json_response(_render_one(obj, rtype, negotiated, request))
    if verb in ("list", "watch", "deletecollection"):
        labels = parse_label_selector(request.query.get("labelSelector"))
        fields = parse_field_selector(request.query.get("fieldSelector"))
        cluster.check_field_selector(rtype, fields)
        scope = namespace or None
        if verb == "watch":
            return await _watch(
                state,
                request,
                rtype=rtype,
                namespace=scope,
                labels=labels,
                fields=fields,
                negotiated=negotiated,
            )
        if verb == "deletecollection":
            body, _ = await _read_body(request)
            return json_response(
                cluster.delete_collection(
                    rtype,
                    namespace=scope,
                    labels=labels,
                    fields=fields,
                    options=body if isinstance(body, dict) else None,
                )
            )
        try:
            limit = int(request.query.get("limit") or 0)
        except ValueError as exc:
            raise errors.bad_request("limit must be an integer") from exc
        listed = cluster.list_objects(
            rtype,
            namespace=scope,
            labels=labels,
            fields=fields,
            limit=limit,
            continue_token=request.query.get("continue", ""),
        )
        if negotiated.kind == "Table":
            return json_response(
                table(
                    rtype,
                    listed["items"],
                    list_meta=listed["metadata"],
                    include_object=request.query.get("includeObject", "Metadata"),
                    version=negotiated.version,
                )
            )
        if negotiated.kind.startswith("PartialObjectMetadata"):
            return json_response(
                {
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": f"meta.k8s.io/{negotiated.version}",
                    "metadata": listed["metadata"],
                    "items": [partial_metadata(o, negotiated.version) for o in listed["items"]],
                }
            )
        return json_response(listed)
    if verb == "create":
        if name:
            raise errors.method_not_allowed("the server does not allow this method on the requested resource")
        body, duplicates = await _read_body(request)
        options = _write_options(request, duplicates, _validating(state, request, rtype, info, identity))
        if state.admission.configured():
            result = await _admitted_create(
                state, rtype, body, namespace=namespace, options=options, identity=identity
            )
        else:
            result = cluster.create(rtype, body, namespace=namespace, options=options)
        return json_response(result.object, status=201, warnings=result.warnings)
    if verb == "update":
        body, duplicates = await _read_body(request)
        options = _write_options(request, duplicates, _validating(state, request, rtype, info, identity))
        if state.admission.configured():
            result = await _admitted_update(
                state,
                rtype,
                namespace=namespace,
                name=name,
                subresource=info.subresource,
                options=options,
                identity=identity,
                candidate=lambda: (
                    cluster.get(rtype, namespace=namespace, name=name),
                    cluster.update_candidate(rtype, body),
                ),
                client_rv=_requested_rv(body),
                options_kind="UpdateOptions",
            )
        else:
            result = cluster.update(
                rtype, body, namespace=namespace, name=name, subresource=info.subresource, options=options
            )
        return json_response(_render_one(result.object, rtype, negotiated, request), warnings=result.warnings)
    if verb == "patch":
        patch_type = request.content_type
        if patch_type not in _PATCH_TYPES:
            allowed = [t for t in _PATCH_TYPES if t != STRATEGIC_MERGE_PATCH or not rtype.is_custom]
            raise errors.unsupported_media_type(patch_type, allowed)
        raw = await request.read()
        patch: Any = raw
        repeated: tuple[str, ...] = ()
        if patch_type != APPLY_PATCH_YAML:
            try:
                patch, dup_list = loads_checking_duplicates(raw)
            except ValueError as exc:
                raise errors.bad_request(f"error decoding patch: {exc}") from exc
            repeated = tuple(dup_list)
        options = _write_options(request, repeated, _validating(state, request, rtype, info, identity))
        if state.admission.configured():
            result = await _admitted_patch(
                state,
                rtype,
                patch_type,
                patch,
                namespace=namespace,
                name=name,
                subresource=info.subresource,
                options=options,
                identity=identity,
            )
        else:
            result = cluster.patch(
                rtype,
                patch_type,
                patch,
                namespace=namespace,
                name=name,
                subresource=info.subresource,
                options=options,
            )
        status = 201 if result.created else 200
        return json_response(
            _render_one(result.object, rtype, negotiated, request), status=status, warnings=result.warnings
        )
    if verb == "delete":
        body, _ = await _read_body(request)
        delete_options = dict(body) if isinstance(body, dict) else {}
        if "propagationPolicy" in request.query:
            delete_options["propagationPolicy"] = request.query["propagationPolicy"]
        dry_run = "All" in request.query.getall("dryRun", []) or "All" in (delete_options.get("dryRun") or [])
        return json_response(
            cluster.delete(
                rtype,
                namespace=namespace,
                name=name,
                options=delete_options,
                dry_run=dry_run,
                validating=_validating(state, request, rtype, info, identity),
            )
        )
    raise errors.method_not_allowed("the server does not allow this method on the requested resource")


# --- writes through mutating admission webhooks -------------------------------------------------


def _requested_rv(body: Any) -> str:
    meta = body.get("metadata") if isinstance(body, dict) else None
    return str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""


def _write_request(
    rtype: ResourceType,
    operation: str,
    *,
    namespace: str,
    name: str,
    subresource: str,
    options: WriteOptions,
    identity: Identity,
    options_kind: str,
) -> WriteRequest:
    return WriteRequest(
        operation=operation,
        rtype=rtype,
        namespace=namespace,
        name=name,
        subresource=subresource,
        user=identity,
        dry_run=options.dry_run,
        options_kind=options_kind,
        field_manager=options.field_manager,
    )


async def _admitted_create(
    state: AppState,
    rtype: ResourceType,
    body: Any,
    *,
    namespace: str,
    options: WriteOptions,
    identity: Identity,
    options_kind: str = "CreateOptions",
) -> WriteResult:
    cluster = state.cluster
    candidate = cluster.creation_candidate(rtype, body, namespace=namespace)
    meta = candidate.get("metadata") or {}
    admitted = await state.admission.admit(
        _write_request(
            rtype,
            "CREATE",
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            subresource="",
            options=options,
            identity=identity,
            options_kind=options_kind,
        ),
        candidate,
        None,
    )
    result = cluster.create(rtype, admitted.object, namespace=namespace, options=options)
    result.warnings = admitted.warnings + result.warnings
    return result


async def _admitted_update(
    state: AppState,
    rtype: ResourceType,
    *,
    namespace: str,
    name: str,
    subresource: str,
    options: WriteOptions,
    identity: Identity,
    candidate: Callable[[], tuple[dict[str, Any] | None, dict[str, Any]]],
    client_rv: str,
    options_kind: str,
) -> WriteResult:
    """Webhooks see (new, current) outside the store lock; the write is then pinned to the
    resourceVersion they saw, and redone from the start when the object changed meanwhile, unless
    the client asked for a resourceVersion of its own (then the conflict is the client's)."""
    cluster = state.cluster
    for attempt in range(_ADMITTED_UPDATE_ATTEMPTS):
        current, new = candidate()
        if current is None:  # server-side apply of a missing object: a create
            return await _admitted_create(
                state,
                rtype,
                new,
                namespace=namespace,
                options=options,
                identity=identity,
                options_kind=options_kind,
            )
        admitted = await state.admission.admit(
            _write_request(
                rtype,
                "UPDATE",
                namespace=namespace,
                name=name,
                subresource=subresource,
                options=options,
                identity=identity,
                options_kind=options_kind,
            ),
            new,
            current,
        )
        seen_rv = str(current["metadata"]["resourceVersion"])
        admitted.object.setdefault("metadata", {})["resourceVersion"] = client_rv or seen_rv
        try:
            result = cluster.update(
                rtype,
                admitted.object,
                namespace=namespace,
                name=name,
                subresource=subresource,
                options=options,
            )
        except errors.APIError as exc:
            last = attempt + 1 == _ADMITTED_UPDATE_ATTEMPTS
            if exc.code != 409 or exc.reason != "Conflict" or client_rv or last:
                raise
            continue
        result.warnings = admitted.warnings + result.warnings
        return result
    raise AssertionError("unreachable")


async def _admitted_patch(
    state: AppState,
    rtype: ResourceType,
    patch_type: str,
    patch: Any,
    *,
    namespace: str,
    name: str,
    subresource: str,
    options: WriteOptions,
    identity: Identity,
) -> WriteResult:
    cluster = state.cluster
    return await _admitted_update(
        state,
        rtype,
        namespace=namespace,
        name=name,
        subresource=subresource,
        options=options,
        identity=identity,
        candidate=lambda: cluster.patch_candidate(
            rtype, patch_type, patch, namespace=namespace, name=name, options=options
        ),
        client_rv="",
        options_kind="PatchOptions",
    )


async def _review(
    state: AppState,
    request: web.Request,
    info: RequestInfo,
    rtype: ResourceType,
    identity: Identity,
    *,
    namespace: str,
    name: str,
) -> web.StreamResponse:
    if info.verb != "create":
        raise errors.method_not_allowed("the server does not allow this method on the requested resource")
    body, _ = await _read_body(request)
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request must be an object")
    cluster = state.cluster
    if info.subresource == "token":
        cluster.get(rtype, namespace=namespace, name=name)  # 404 unless the ServiceAccount exists
        return json_response(
            reviews.token_request(
                cluster.authn,
                namespace=namespace,
                service_account=name,
                body=body,
                bound_pod=_bound_pod(cluster, namespace, body),
            ),
            status=201,
        )
    answers: dict[str, Callable[[], dict[str, Any]]] = {
        "tokenreviews": lambda: reviews.token_review(cluster.authn, body),
        "subjectaccessreviews": lambda: reviews.subject_access_review(cluster.authz, body),
        "localsubjectaccessreviews": lambda: reviews.subject_access_review(
            cluster.authz, body, namespace=namespace
        ),
        "selfsubjectaccessreviews": lambda: reviews.self_subject_access_review(cluster.authz, identity, body),
        "selfsubjectrulesreviews": lambda: reviews.self_subject_rules_review(cluster.authz, identity, body),
        "selfsubjectreviews": lambda: reviews.self_subject_review(identity, body),
    }
    answer = answers[rtype.plural]()
    answer["apiVersion"], answer["kind"] = rtype.api_version, rtype.kind
    return json_response(answer, status=201)


def _bound_pod(cluster: Cluster, namespace: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Pod a TokenRequest binds its token to (404 unless it exists, 409 on another uid)."""
    ref = (body.get("spec") or {}).get("boundObjectRef")
    if not isinstance(ref, Mapping) or ref.get("kind") != "Pod":
        return None
    pods = cluster.resource("", "v1", "pods")
    assert pods is not None
    pod = cluster.get(pods, namespace=namespace, name=str(ref.get("name") or ""))
    uid = str(ref.get("uid") or "")
    if uid and uid != (pod.get("metadata") or {}).get("uid"):
        raise errors.conflict(
            group="",
            resource="pods",
            name=str(ref.get("name")),
            why=f"the UID in the bound object reference ({uid}) does not match the UID in record",
        )
    return pod


def _watch_request(
    request: web.Request, rtype: ResourceType, namespace: str | None, bookmark_interval: float
) -> WatchRequest:
    query = request.query
    send_initial = query.get("sendInitialEvents", "").lower() == "true"
    rv_text = query.get("resourceVersion", "")
    since: int | None = None
    if rv_text not in ("", "0") and not send_initial:
        try:
            since = int(rv_text)
        except ValueError as exc:
            raise errors.bad_request(
                f'resourceVersion: Invalid value: "{rv_text}": must be an integer'
            ) from exc
    try:
        timeout = float(query.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT)
    except ValueError as exc:
        raise errors.bad_request("timeoutSeconds must be a number") from exc
    return WatchRequest(
        storage_key=rtype.storage_key,
        namespace=namespace,
        since=since,
        send_initial_events=send_initial,
        allow_bookmarks=query.get("allowWatchBookmarks", "").lower() == "true",
        timeout=timeout,
        bookmark_interval=bookmark_interval,
    )


async def _watch(
    state: AppState,
    request: web.Request,
    *,
    rtype: ResourceType,
    namespace: str | None,
    labels: Any,
    fields: Any,
    negotiated: Negotiated,
) -> web.StreamResponse:
    cluster = state.cluster
    converts = rtype.storage_key != f"{rtype.group}/{rtype.plural}"

    def matches(stored: Mapping[str, Any]) -> bool:
        obj = cluster.served(rtype, stored) if converts else stored
        return cluster.matches(rtype, obj, labels=labels, fields=fields)

    first_table = [True]

    def render(event_type: str, stored: Mapping[str, Any]) -> Any:
        obj = cluster.served(rtype, stored)
        if negotiated.kind == "Table":
            out = _render_one(obj, rtype, negotiated, request, with_headers=first_table[0])
            first_table[0] = False
            return out
        return _render_one(obj, rtype, negotiated, request)

    def bookmark(rv: int, end_of_initial: bool) -> Mapping[str, Any]:
        meta: dict[str, Any] = {"resourceVersion": str(rv), "creationTimestamp": None}
        if end_of_initial:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}

    return await stream(
        request,
        store=cluster.store,
        watch=_watch_request(request, rtype, namespace, state.bookmark_interval),
        matches=matches,
        render=render,
        bookmark=bookmark,
        stopping=state.stopping,
        active=state.watches,
    )
