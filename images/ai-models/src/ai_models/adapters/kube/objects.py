"""The one object client: get, list, create, replace, patch and delete any kind, as plain dicts.

`Objects(api_client, resource)` calls the API server's REST paths for the kind a `Resource` names
(core kinds under /api/v1, every other group under /apis/<group>/<version>), so each kind is
reached the same way, with one timeout policy, one NotFound rule and one error: a failure raises
`KubeError` (never the client library's exception), whose string never carries the server's text.
Objects come back as the API server's JSON, never as generated models (the callers read a few
fields; building models costs more than the rest of the work). Watching is the `Informer`'s job,
which streams any `Resource` the same way (`resources.collection_lister`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote

import urllib3
from kubernetes.client.exceptions import ApiException

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.resources import Resource

# Connect and read timeouts of every call: long enough for a loaded API server's list page,
# short enough that a dead one fails the call instead of hanging it.
REQUEST_TIMEOUT: Final = (3.0, 30.0)
PAGE_SIZE: Final = 500
MERGE_PATCH: Final = "application/merge-patch+json"
# Built-in kinds only: lists with a merge key (containers, volumes) merge instead of being replaced.
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
_TRANSPORT_FAILURES: Final = (urllib3.exceptions.HTTPError, OSError)


class Objects:
    def __init__(
        self, api_client: Any, resource: Resource, *, timeout: tuple[float, float] = REQUEST_TIMEOUT
    ) -> None:
        self._client = api_client
        self.resource = resource
        self._timeout = timeout

    def get(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when there is none of that name."""
        try:
            found = self._request("get", "GET", name=name, namespace=namespace)
        except KubeError as error:
            if error.not_found:
                return None
            raise
        return self._with_kind(found)

    def list_page(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> dict[str, Any]:
        """One page of the collection (every namespace when `namespace` is None): the List document."""
        query: list[tuple[str, str]] = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if limit:
            query.append(("limit", str(limit)))
        if continue_token:
            query.append(("continue", continue_token))
        page = self._request("list", "GET", namespace=namespace, query=query)
        return page if isinstance(page, dict) else {}

    def list_all(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = PAGE_SIZE,
    ) -> Iterator[dict[str, Any]]:
        """Every object of the collection, page by page, each with its `kind` set. A failure on any
        page raises: a partial list must never pass for the whole."""
        token: str | None = None
        while True:
            page = self.list_page(
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=page_size,
                continue_token=token,
            )
            for item in page.get("items") or ():
                if isinstance(item, dict):
                    yield self._with_kind(item)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    def create(self, body: Mapping[str, Any], *, exists_ok: bool = False) -> dict[str, Any] | None:
        """Create the object `body` describes; the object as stored. With `exists_ok`, one of that
        name already there is not an error: None is returned and it is left as it is."""
        meta = body.get("metadata") or {}
        try:
            created = self._request(
                "create", "POST", namespace=meta.get("namespace"), body=dict(body), subject=meta.get("name")
            )
        except KubeError as error:
            if exists_ok and error.conflict:
                return None
            raise
        return self._with_kind(created)

    def replace(self, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        replaced = self._request(
            "update",
            "PUT",
            name=str(meta.get("name") or ""),
            namespace=meta.get("namespace"),
            body=dict(body),
        )
        return self._with_kind(replaced)

    def patch(
        self,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        content_type: str = MERGE_PATCH,
        missing_ok: bool = False,
    ) -> dict[str, Any] | None:
        """Patch the object (a merge patch unless `content_type` says otherwise; `subresource`
        "status" patches its status). With `missing_ok`, an object gone meanwhile returns None."""
        try:
            patched = self._request(
                "patch",
                "PATCH",
                name=name,
                namespace=namespace,
                subresource=subresource,
                body=patch if isinstance(patch, Mapping) else list(patch),
                content_type=content_type,
            )
        except KubeError as error:
            if missing_ok and error.not_found:
                return None
            raise
        return self._with_kind(patched)

    def delete(
        self,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation: str | None = None,
    ) -> bool:
        """Delete the object; False when it is gone already or (with `uid` or `resource_version`)
        is no longer the object those preconditions name."""
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        preconditions = {
            key: value for key, value in (("uid", uid), ("resourceVersion", resource_version)) if value
        }
        if preconditions:
            options["preconditions"] = preconditions
        if propagation:
            options["propagationPolicy"] = propagation
        try:
            self._request("delete", "DELETE", name=name, namespace=namespace, body=options)
        except KubeError as error:
            if error.not_found or (preconditions and error.conflict):
                return False
            raise
        return True

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path of the collection (in `namespace`), of one object, or of its subresource."""
        resource = self.resource
        if namespace and not resource.namespaced:
            raise ValueError(f"{resource} is cluster-scoped; it has no namespace {namespace!r}")
        if name is not None and resource.namespaced and not namespace:
            raise ValueError(f"{resource} is namespaced: name the namespace of {name!r}")
        path = f"/apis/{resource.group}/{resource.version}" if resource.group else f"/api/{resource.version}"
        if namespace:
            path += f"/namespaces/{quote(namespace, safe='')}"
        path += f"/{resource.plural}"
        if name is not None:
            if not name:
                raise ValueError(f"a {resource.kind} without a name cannot be addressed")
            path += f"/{quote(name, safe='')}"
        if subresource:
            path += f"/{subresource}"
        return path

    def _with_kind(self, found: Any) -> dict[str, Any]:
        if not isinstance(found, dict):
            raise KubeError(
                verb="read", kind=self.resource.kind, name="", namespace="", status=0, message="NotAnObject"
            )
        found.setdefault("kind", self.resource.kind)
        return found

    def _request(
        self,
        verb: str,
        method: str,
        *,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        subject: str | None = None,
    ) -> Any:
        subject_name = str(name or subject or "")
        subject_namespace = str(namespace or "")
        kind = self.resource.kind
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self._client.param_serialize(
            method=method,
            resource_path=self.path(namespace, name, subresource),
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self._client.call_api(*request, _request_timeout=self._timeout)
            try:
                data = response.read()
            finally:
                response.response.release_conn()
        except ApiException as error:  # the client's own refusals (TLS failures, unusable bodies)
            raise KubeError.answered(
                verb, kind, subject_name, subject_namespace, status=error.status or 0, body=_raw(error.body)
            ) from error
        except _TRANSPORT_FAILURES as error:
            raise KubeError.unanswered(verb, kind, subject_name, subject_namespace, error) from error
        if not 200 <= response.status <= 299:
            raise KubeError.answered(
                verb, kind, subject_name, subject_namespace, status=response.status, body=data or b""
            )
        if not data:
            return {}
        try:
            return json.loads(data)
        except ValueError as error:
            raise KubeError.unanswered(verb, kind, subject_name, subject_namespace, error) from error


def _raw(body: Any) -> bytes:
    return body if isinstance(body, bytes) else str(body or "").encode()
