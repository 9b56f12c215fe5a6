"""Mutating admission webhooks, called as kube-apiserver calls them (k8s.io/apiserver's mutating
dispatcher), for every CREATE and UPDATE (PUT, PATCH, server-side apply) served over HTTP.

Per write: every MutatingWebhookConfiguration, in name order, each webhook in listed order; a
webhook is called when its namespaceSelector, objectSelector, rules (matchPolicy Equivalent
also tries the other served versions of the same resource) and matchConditions (CEL) all match.
It receives an AdmissionReview (`admission.k8s.io/v1`, or v1beta1 if that is all it lists) over
HTTPS, POSTed to `clientConfig.url`, or to `https://<service>.<namespace>.svc:<port><path>`,
which the emulator connects to 127.0.0.1:<routed port> (`route_service`) while verifying the
certificate for that service host name against `caBundle`. Its JSONPatch is applied before the
next webhook runs; `allowed: false` refuses the write with the webhook's message and code. A
failed call (unreachable, no route, past `timeoutSeconds`, an invalid response) refuses the write
with the apiserver's InternalError text under `failurePolicy: Fail` and is skipped under
`Ignore`. Everything mutating webhooks do happens before schema validation and storage.

Not emulated: `reinvocationPolicy: IfNeeded` (a webhook is never called a second time), DELETE and
CONNECT requests, writes made in-process through `Cluster` (the test bed's controllers), validating
webhooks, and audit annotations. Writes to webhook configurations themselves are never sent to
webhooks, as on the apiserver. With no MutatingWebhookConfiguration stored a write costs one
dictionary lookup here.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import ssl
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import jsonpatch

from kubeemu import errors
from kubeemu.authn import Identity
from kubeemu.cluster import NAMESPACE_STORAGE, Cluster
from kubeemu.conversion import to_served, to_storage
from kubeemu.jsonutil import jsoncopy
from kubeemu.resources import ResourceType
from kubeemu.webhookconfig import MUTATING_STORAGE, WEBHOOK_CONFIGURATION_STORAGE, Webhook, webhooks_of

log = logging.getLogger("kubeemu")

REVIEW_GROUP = "admission.k8s.io"
_MAX_RESPONSE_BYTES = 3 * 1024 * 1024


@dataclass(frozen=True)
class AdmissionAttributes:
    """One request as admission.Attributes describes it (what webhooks and policies are asked)."""

    operation: str  # CREATE | UPDATE | DELETE
    rtype: ResourceType
    namespace: str
    name: str
    subresource: str
    user: Identity
    dry_run: bool


@dataclass(frozen=True)
class WriteRequest(AdmissionAttributes):
    """What a write (CREATE or UPDATE) asks for, with the options a webhook is shown."""

    options_kind: str  # CreateOptions | UpdateOptions | PatchOptions
    field_manager: str = ""


@dataclass
class Admitted:
    object: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


class CallFailure(Exception):
    """A webhook could not be called or answered unusably (the failurePolicy decides)."""


class MutatingAdmission:
    """The mutating-webhook dispatcher of one emulator, with its Service routes."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._routes: dict[tuple[str, str], tuple[str, int]] = {}
        self._compiled: dict[str, tuple[str, list[Webhook]]] = {}
        self._contexts: dict[str, ssl.SSLContext] = {}

    # --- configuration ---------------------------------------------------------------------------

    def route_service(self, namespace: str, name: str, port: int, *, host: str = "127.0.0.1") -> None:
        """Webhook calls to Service `namespace/name` (any service port) go to host:port."""
        self._routes[(namespace, name)] = (host, port)

    def unroute_service(self, namespace: str, name: str) -> None:
        self._routes.pop((namespace, name), None)

    def configured(self) -> bool:
        """True when some MutatingWebhookConfiguration is stored (else admission costs nothing)."""
        return self.cluster.store.count(MUTATING_STORAGE) > 0

    def _webhooks(self) -> list[Webhook]:
        configs, _ = self.cluster.store.list_objects(MUTATING_STORAGE)
        out: list[Webhook] = []
        seen: set[str] = set()
        for config in configs:  # sorted by name, as the apiserver orders configurations
            meta = config.get("metadata") or {}
            name, rv = str(meta.get("name")), str(meta.get("resourceVersion"))
            seen.add(name)
            cached = self._compiled.get(name)
            if cached is None or cached[0] != rv:
                cached = (rv, webhooks_of(config))
                self._compiled[name] = cached
            out.extend(cached[1])
        for gone in set(self._compiled) - seen:
            del self._compiled[gone]
        return out

    # --- admission -------------------------------------------------------------------------------

    async def admit(self, request: WriteRequest, obj: dict[str, Any], old: dict[str, Any] | None) -> Admitted:
        """The object after every matching webhook; raises the APIError that refuses the write."""
        admitted = Admitted(jsoncopy(obj))
        if request.rtype.storage_key in WEBHOOK_CONFIGURATION_STORAGE or not self.configured():
            return admitted
        namespace_labels = self._namespace_labels(request, obj)
        for hook in self._webhooks():
            if not hook.matches_namespace(namespace_labels):
                continue
            if not hook.matches_object(admitted.object, old):
                continue
            served = self._matching_version(hook, request)
            if served is None:
                continue
            await self._call(hook, request, served, admitted, old)
        return admitted

    def _namespace_labels(self, request: WriteRequest, obj: Mapping[str, Any]) -> Mapping[str, str] | None:
        if request.rtype.storage_key == NAMESPACE_STORAGE:
            return _labels(obj)
        if not request.rtype.namespaced:
            return None
        stored = self.cluster.store.get(NAMESPACE_STORAGE, "", request.namespace)
        return _labels(stored) if stored is not None else {}

    def _matching_version(self, hook: Webhook, request: WriteRequest) -> ResourceType | None:
        """The version of the resource the webhook's rules name: the request's own, else (matchPolicy
        Equivalent) another served version of the same stored resource."""
        rtype = request.rtype
        candidates = [rtype]
        if hook.match_policy == "Equivalent":
            candidates += [
                other
                for other in self.cluster.registry.sharing_storage(rtype.storage_key)
                if other.api_version != rtype.api_version
            ]
        for candidate in candidates:
            if hook.matches_rules(
                operation=request.operation,
                group=candidate.group,
                version=candidate.version,
                resource=candidate.plural,
                subresource=request.subresource,
                namespace=request.namespace,
            ):
                return candidate
        return None

    async def _call(
        self,
        hook: Webhook,
        request: WriteRequest,
        served: ResourceType,
        admitted: Admitted,
        old: dict[str, Any] | None,
    ) -> None:
        rtype = request.rtype
        obj = _convert(rtype, served, admitted.object)
        old_obj = _convert(rtype, served, old) if old is not None else None
        review = _review_request(hook, request, served, obj, old_obj)
        holds, problem = hook.match_conditions_hold(
            {"object": obj, "oldObject": old_obj, "request": review["request"]}
        )
        if problem:
            self._failed(hook, f"failed to evaluate match conditions: {problem}")
            return
        if not holds:
            return
        try:
            answer = await self._post(hook, review)
            patched = _apply_response(hook, review, answer, obj)
        except CallFailure as exc:
            self._failed(hook, str(exc))
            return
        admitted.warnings.extend(str(w) for w in answer["response"].get("warnings") or [])
        if patched is not None:
            admitted.object = _convert(served, rtype, patched)

    def _failed(self, hook: Webhook, reason: str) -> None:
        text = f'failed calling webhook "{hook.name}": {reason}'
        if hook.fails_closed:
            raise errors.internal(text)
        log.warning("Failed calling webhook, failing open %s: %s", hook.name, reason)

    # --- HTTPS -----------------------------------------------------------------------------------

    def _target(self, hook: Webhook) -> tuple[str, str, str | None, str | None]:
        """(URL as the apiserver names it, URL connected to, TLS server name, Host header)."""
        client = hook.client_config
        query = f"?timeout={hook.timeout_seconds}s"
        if client.get("url"):
            url = str(client["url"]) + query
            return url, url, None, None
        service = client.get("service") or {}
        namespace, name = str(service.get("namespace")), str(service.get("name"))
        port = int(service.get("port") or 443)
        host = f"{name}.{namespace}.svc"
        path = str(service.get("path") or "")
        url = f"https://{host}:{port}{path}{query}"
        route = self._routes.get((namespace, name))
        if route is None:
            raise CallFailure(
                f'failed to call webhook: Post "{url}": service "{namespace}/{name}" has no route in the '
                f"emulator (register its port with route_service({namespace!r}, {name!r}, port))"
            )
        return url, f"https://{route[0]}:{route[1]}{path}{query}", host, f"{host}:{port}"

    def _ssl_context(self, hook: Webhook) -> ssl.SSLContext:
        key = hook.ca_pem
        context = self._contexts.get(key)
        if context is None:
            try:
                context = ssl.create_default_context(cadata=key) if key else ssl.create_default_context()
            except (ssl.SSLError, ValueError) as exc:
                raise CallFailure(f"failed to call webhook: caBundle is not usable: {exc}") from exc
            self._contexts[key] = context
        return context

    async def _post(self, hook: Webhook, review: dict[str, Any]) -> dict[str, Any]:
        url, target, server_name, host_header = self._target(hook)
        timeout = aiohttp.ClientTimeout(total=hook.timeout_seconds)
        body = json.dumps(review).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if host_header is not None:
            headers["Host"] = host_header
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(
                    target,
                    data=body,
                    headers=headers,
                    ssl=self._ssl_context(hook),
                    server_hostname=server_name,
                ) as response,
            ):
                raw = await response.content.read(_MAX_RESPONSE_BYTES + 1)
                status = response.status
        except TimeoutError as exc:
            raise CallFailure(f'failed to call webhook: Post "{url}": context deadline exceeded') from exc
        except (aiohttp.ClientError, OSError, ssl.SSLError) as exc:
            raise CallFailure(f'failed to call webhook: Post "{url}": {_client_error(exc)}') from exc
        if status != 200:
            raise CallFailure(
                f"failed to call webhook: the server responded with the status code {status} "
                "but did not return more information"
            )
        if len(raw) > _MAX_RESPONSE_BYTES:
            raise CallFailure("failed to call webhook: the response is larger than 3 MiB")
        try:
            decoded = json.loads(raw)
        except ValueError as exc:
            raise CallFailure(f"received invalid webhook response: {exc}") from exc
        if not isinstance(decoded, dict):
            raise CallFailure("received invalid webhook response: not an AdmissionReview object")
        return decoded


def _client_error(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"tls: failed to verify certificate: {exc.certificate_error}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"dial tcp {exc.host}:{exc.port}: connect: {exc.os_error.strerror or exc.os_error}"
    return str(exc) or type(exc).__name__


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def _convert(source: ResourceType, target: ResourceType, obj: Mapping[str, Any]) -> dict[str, Any]:
    if source.api_version == target.api_version and source.kind == target.kind:
        return jsoncopy(dict(obj))
    stored = to_storage(source, jsoncopy(dict(obj)), storage_api_version=target.api_version)
    return to_served(target, stored)


def _options(request: WriteRequest) -> dict[str, Any]:
    options: dict[str, Any] = {"kind": request.options_kind, "apiVersion": "meta.k8s.io/v1"}
    if request.dry_run:
        options["dryRun"] = ["All"]
    if request.field_manager:
        options["fieldManager"] = request.field_manager
    return options


def _review_request(
    hook: Webhook,
    request: WriteRequest,
    served: ResourceType,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
) -> dict[str, Any]:
    rtype = request.rtype
    body: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": served.group, "version": served.version, "kind": served.kind},
        "resource": {"group": served.group, "version": served.version, "resource": served.plural},
        "requestKind": {"group": rtype.group, "version": rtype.version, "kind": rtype.kind},
        "requestResource": {"group": rtype.group, "version": rtype.version, "resource": rtype.plural},
        "operation": request.operation,
        "userInfo": {"username": request.user.name, "groups": list(request.user.all_groups)},
        "object": obj,
        "oldObject": old,
        "dryRun": request.dry_run,
        "options": _options(request),
    }
    if request.user.uid:
        body["userInfo"]["uid"] = request.user.uid
    if request.subresource:
        body["subResource"] = request.subresource
        body["requestSubResource"] = request.subresource
    name = request.name or str((obj.get("metadata") or {}).get("name") or "")
    if name:
        body["name"] = name
    if request.namespace:
        body["namespace"] = request.namespace
    elif rtype.storage_key == NAMESPACE_STORAGE and name:
        body["namespace"] = name  # a Namespace's own requests carry its name, as on the apiserver
    return {"apiVersion": f"{REVIEW_GROUP}/{hook.review_version}", "kind": "AdmissionReview", "request": body}


def _apply_response(
    hook: Webhook, review: Mapping[str, Any], answer: Mapping[str, Any], obj: dict[str, Any]
) -> dict[str, Any] | None:
    """The patched object (None: unchanged); raises the refusal, or CallFailure for a bad answer."""
    if answer.get("apiVersion") != review["apiVersion"] or answer.get("kind") != "AdmissionReview":
        raise CallFailure(
            f"received invalid webhook response: expected webhook response of {review['apiVersion']}, "
            f"Kind=AdmissionReview, got {answer.get('apiVersion')}, Kind={answer.get('kind')}"
        )
    response = answer.get("response")
    if not isinstance(response, Mapping):
        raise CallFailure("received invalid webhook response: webhook response was absent")
    expected_uid = review["request"]["uid"]
    if response.get("uid") != expected_uid:
        raise CallFailure(
            f"received invalid webhook response: expected response.uid={expected_uid!r}, "
            f"got {response.get('uid')!r}".replace("'", '"')
        )
    if response.get("allowed") is not True:
        raise _rejection(hook, response.get("status"))
    patch_text = response.get("patch")
    patch_type = response.get("patchType")
    if not patch_text:
        if patch_type:
            raise CallFailure(
                "received invalid webhook response: "
                "webhook returned response.patchType but not response.patch"
            )
        return None
    if not patch_type:
        raise CallFailure(
            "received invalid webhook response: webhook returned response.patch but not response.patchType"
        )
    if patch_type != "JSONPatch":
        raise CallFailure(f'unsupported patch type "{patch_type}"')
    try:
        operations = json.loads(base64.b64decode(str(patch_text), validate=True))
        patched = jsonpatch.JsonPatch(operations).apply(obj)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise errors.internal(f'webhook "{hook.name}" returned a patch that does not decode: {exc}') from exc
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, IndexError) as exc:
        raise errors.internal(f'webhook "{hook.name}" returned a patch that does not apply: {exc}') from exc
    if not isinstance(patched, dict):
        raise errors.internal(f'webhook "{hook.name}" returned a patch whose result is not an object')
    return patched


def _rejection(hook: Webhook, status: Any) -> errors.APIError:
    """webhookutil.ToStatusErr: the webhook's Status, with a code >= 400 and the denial prefix."""
    status = status if isinstance(status, Mapping) else {}
    denied = f'admission webhook "{hook.name}" denied the request'
    message, reason = str(status.get("message") or ""), str(status.get("reason") or "")
    if message:
        text = f"{denied}: {message}"
    elif reason:
        text = f"{denied}: {reason}"
    else:
        text = f"{denied} without explanation"
    code = status.get("code")
    code = code if isinstance(code, int) and code >= 400 else 400
    details = status.get("details")
    return errors.APIError(
        code=code,
        reason=reason,
        message=text,
        details=dict(details) if isinstance(details, Mapping) else None,
    )
