"""The emulated cluster: state plus the apiserver's object semantics, independent of HTTP.

Creates, updates, patches and deletes follow the generic registry: resourceVersion preconditions,
generation bumps on spec changes, status-subresource separation, finalizers and deletionTimestamp,
namespace lifecycle (content removed on namespace deletion), ownerReference garbage collection
(also of an object created for owners that were deleted),
no-op updates that do not write, and CRDs that register and unregister their resources live.
Every operation runs under the store lock, so each is atomic with respect to all others.
"""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from kubeemu import crds, errors
from kubeemu.authn import Authenticator, Identity
from kubeemu.authz import RBACAuthorizer
from kubeemu.bootstrap import bootstrap_objects
from kubeemu.builtin_resources import BUILTIN_RESOURCES
from kubeemu.builtin_schemas import builtin_schemas
from kubeemu.clock import rfc3339
from kubeemu.conversion import to_served, to_storage
from kubeemu.crdvalidation import FieldError
from kubeemu.jobdefaults import JOB_STORAGE, default_job_selector
from kubeemu.jsonutil import jsoncopy
from kubeemu.metavalidation import validate_metadata
from kubeemu.patching import (
    APPLY_PATCH_YAML,
    BUILTIN_PATCH_TYPES,
    CUSTOM_RESOURCE_PATCH_TYPES,
    JSON_PATCH,
    MERGE_PATCH,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)
from kubeemu.podvalidation import validate_pod
from kubeemu.resources import Registry, ResourceType
from kubeemu.selectors import FieldSelector, LabelSelector, field_value
from kubeemu.store import Store
from kubeemu.webhookconfig import (
    MUTATING_STORAGE,
    WEBHOOK_CONFIGURATION_STORAGE,
    default_configuration,
    validate_configuration,
)

CRD_STORAGE = "apiextensions.k8s.io/customresourcedefinitions"
NAMESPACE_STORAGE = "/namespaces"
SECRET_STORAGE = "/secrets"
POD_STORAGE = "/pods"
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# Fields of metadata the server owns: clients cannot set or change them through writes.
_SERVER_META = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
    "managedFields",
)
_INITIAL_STATUS = {
    "/namespaces": {"phase": "Active"},
    "/pods": {"phase": "Pending"},
    "/persistentvolumeclaims": {"phase": "Pending"},
    "/persistentvolumes": {"phase": "Pending"},
}


# Validating admission of a request served over HTTP (kubeemu.validatingpolicy): called with
# (object, old object) once the write is defaulted and validated, under the store lock, so the
# refusal it raises writes nothing. Old object None: a create; object None: a delete.
ValidatingCheck = Callable[[Mapping[str, Any] | None, Mapping[str, Any] | None], None]


@dataclass(frozen=True)
class WriteOptions:
    dry_run: bool = False
    field_validation: str = "Warn"  # Strict | Warn | Ignore (the apiserver's default is Warn)
    duplicates: tuple[str, ...] = ()  # keys repeated in the request JSON
    field_manager: str = ""
    validating: ValidatingCheck | None = None


@dataclass
class WriteResult:
    object: dict[str, Any]
    created: bool = False
    warnings: list[str] = field(default_factory=list)


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _strip_volatile(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object without resourceVersion, to tell a real change from a no-op write."""
    copy = dict(obj)
    meta = dict(_meta(obj))
    meta.pop("resourceVersion", None)
    copy["metadata"] = meta
    return copy


def _fold_string_data(secret: dict[str, Any]) -> dict[str, Any]:
    """A Secret's write-only `stringData` goes into `data` (base64), winning over the same key, and
    is never stored: readers (kubelet, clients) only ever see `data`, as with a real apiserver."""
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = dict(secret.get("data") or {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        secret["data"] = data
    return secret


def _spec_part(rtype: ResourceType, obj: Mapping[str, Any]) -> dict[str, Any]:
    """What counts as "spec" for generation: everything but metadata (and status, if a subresource)."""
    skip = {"metadata", "apiVersion", "kind"} | ({"status"} if rtype.has_status else set())
    return {k: v for k, v in obj.items() if k not in skip}


class Cluster:
    def __init__(
        self,
        *,
        identities: Iterable[Identity] = (),
        superuser: Identity | None = None,
        event_log_size: int = 2000,
        list_snapshots: int = 64,
    ) -> None:
        self.registry = Registry()
        self.store = Store(event_log_size=event_log_size)
        self.superuser = superuser or Identity.superuser()
        self.authn = Authenticator([self.superuser, *identities])
        self.authz = RBACAuthorizer(self.store)
        self._storage_versions: dict[str, str] = {}
        self._snapshots: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._max_snapshots = list_snapshots
        for rtype in BUILTIN_RESOURCES:
            self._register(rtype, storage_version=None)
        for obj in bootstrap_objects():
            self.apply(obj)

    # --- resource types --------------------------------------------------------------------------

    def _register(self, rtype: ResourceType, *, storage_version: str | None) -> None:
        self.registry.add(rtype)
        if storage_version is not None:
            self._storage_versions[rtype.storage_key] = storage_version
        else:
            self._storage_versions.setdefault(rtype.storage_key, rtype.api_version)

    def resource(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.registry.lookup(group, version, plural)

    def resource_for(self, api_version: str, kind: str) -> ResourceType:
        rtype = self.registry.by_kind(api_version, kind)
        if rtype is None:
            raise errors.APIError(
                code=404,
                reason="NotFound",
                message=f'no matches for kind "{kind}" in version "{api_version}"',
            )
        return rtype

    def served(self, rtype: ResourceType, stored: Mapping[str, Any]) -> dict[str, Any]:
        return to_served(rtype, dict(stored))

    # --- reads -----------------------------------------------------------------------------------

    def get(self, rtype: ResourceType, *, namespace: str, name: str) -> dict[str, Any]:
        with self.store.lock:
            stored = self.store.get(rtype.storage_key, namespace if rtype.namespaced else "", name)
            if stored is None:
                raise errors.not_found(group=rtype.group, resource=rtype.plural, name=name)
            return self.served(rtype, stored)

    def check_field_selector(self, rtype: ResourceType, selector: FieldSelector) -> None:
        if not rtype.is_custom:
            return
        allowed = {"metadata.name", "metadata.namespace", *rtype.selectable_fields}
        for requirement in selector.requirements:
            if requirement.path not in allowed:
                raise errors.bad_request(f"field label not supported: {requirement.path}")

    def matches(
        self, rtype: ResourceType, obj: Mapping[str, Any], *, labels: LabelSelector, fields: FieldSelector
    ) -> bool:
        if not labels.matches(_meta(obj).get("labels")):
            return False
        return fields.matches(obj, field_value)

    def list_objects(
        self,
        rtype: ResourceType,
        *,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        limit: int = 0,
        continue_token: str = "",
    ) -> dict[str, Any]:
        self.check_field_selector(rtype, fields)
        with self.store.lock:
            if continue_token:
                snapshot_id, rv, items = self._resume(continue_token)
            else:
                stored, rv_int = self.store.list_objects(
                    rtype.storage_key, namespace if rtype.namespaced else None
                )
                rv = str(rv_int)
                items = [
                    o
                    for o in (self.served(rtype, s) for s in stored)
                    if self.matches(rtype, o, labels=labels, fields=fields)
                ]
                snapshot_id = ""
        meta: dict[str, Any] = {"resourceVersion": rv}
        if limit > 0 and len(items) > limit:
            page, rest = items[:limit], items[limit:]
            token_id = snapshot_id or secrets.token_hex(8)
            with self.store.lock:
                self._snapshots[token_id] = rest
                self._snapshots.move_to_end(token_id)
                while len(self._snapshots) > self._max_snapshots:
                    self._snapshots.popitem(last=False)
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"id": token_id, "rv": rv}).encode()
            ).decode()
            meta["remainingItemCount"] = len(rest)
            items = page
        elif snapshot_id:
            with self.store.lock:
                self._snapshots.pop(snapshot_id, None)
        return {"kind": rtype.list_kind, "apiVersion": rtype.api_version, "metadata": meta, "items": items}

    def _resume(self, token: str) -> tuple[str, str, list[dict[str, Any]]]:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            token_id, rv = str(decoded["id"]), str(decoded["rv"])
        except (ValueError, KeyError, TypeError) as exc:
            raise errors.bad_request(f"continue key is not valid: {exc}") from exc
        items = self._snapshots.get(token_id)
        if items is None:
            raise errors.expired(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter."
            )
        return token_id, rv, items

    # --- creates ---------------------------------------------------------------------------------

    def create(
        self, rtype: ResourceType, body: Any, *, namespace: str = "", options: WriteOptions = WriteOptions()
    ) -> WriteResult:
        with self.store.lock:
            obj = self._creation_candidate(rtype, body, namespace=namespace)
            meta = obj["metadata"]
            namespace = meta.get("namespace", "")
            if meta.get("resourceVersion"):
                raise errors.bad_request("resourceVersion should not be set on objects to be created")
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = self._generate_name(rtype, namespace, meta["generateName"])
            for key in _SERVER_META:
                meta.pop(key, None)
            if rtype.has_status or rtype.storage_key in _INITIAL_STATUS:
                obj.pop("status", None)
                if rtype.storage_key in _INITIAL_STATUS:
                    obj["status"] = dict(_INITIAL_STATUS[rtype.storage_key])
            if rtype.storage_key == NAMESPACE_STORAGE:
                obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj, warnings = self._admit(rtype, obj, old=None, options=options)
            meta = obj["metadata"]
            name = meta["name"]
            if self.store.get(rtype.storage_key, namespace if rtype.namespaced else "", name) is not None:
                raise errors.already_exists(group=rtype.group, resource=rtype.plural, name=name)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = rfc3339()
            meta["generation"] = 1
            if rtype.storage_key == JOB_STORAGE:
                default_job_selector(obj)
            if rtype.storage_key == CRD_STORAGE:
                obj = self._prepare_crd(obj)
            if options.dry_run:
                return WriteResult(obj, created=True, warnings=warnings)
            stored = self._store_object(rtype, obj)
            if rtype.storage_key == CRD_STORAGE:
                self._register_crd(stored)
            served = self.served(rtype, stored)
            self._collect_if_ownerless(rtype, stored)
            return WriteResult(served, created=True, warnings=warnings)

    def creation_candidate(self, rtype: ResourceType, body: Any, *, namespace: str = "") -> dict[str, Any]:
        """The object a create would admit, as mutating admission webhooks see it: type meta and
        namespace filled in, custom resources pruned and defaulted; nothing is written."""
        with self.store.lock:
            obj = self._creation_candidate(rtype, body, namespace=namespace)
            if rtype.schema is not None:
                obj = rtype.schema.default(rtype.schema.prune(obj)[0])
            return obj

    def _creation_candidate(self, rtype: ResourceType, body: Any, *, namespace: str) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be an object")
        obj = jsoncopy(body)
        self._check_type_meta(rtype, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if rtype.namespaced:
            body_namespace = meta.get("namespace")
            if body_namespace and namespace and body_namespace != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            namespace = namespace or body_namespace or ""
            if not namespace:
                raise errors.bad_request(
                    "the server could not find the requested resource: namespace required"
                )
            meta["namespace"] = namespace
            self._require_namespace(namespace, creating=True)
        else:
            meta.pop("namespace", None)
        return obj

    def _generate_name(self, rtype: ResourceType, namespace: str, prefix: str) -> str:
        prefix = prefix[:58]  # the apiserver's SimpleNameGenerator keeps 63 - 5 characters
        for _ in range(16):
            name = prefix + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))
            if self.store.get(rtype.storage_key, namespace if rtype.namespaced else "", name) is None:
                return name
        raise errors.already_exists(group=rtype.group, resource=rtype.plural, name=prefix)

    # --- updates and patches ---------------------------------------------------------------------

    def update(
        self,
        rtype: ResourceType,
        body: Any,
        *,
        namespace: str,
        name: str,
        subresource: str = "",
        options: WriteOptions = WriteOptions(),
    ) -> WriteResult:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be an object")
        with self.store.lock:
            obj = jsoncopy(body)
            self._check_type_meta(rtype, obj)
            meta = obj.setdefault("metadata", {})
            if meta.get("name") and meta["name"] != name:
                raise errors.bad_request(
                    f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
                )
            if rtype.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            current = self.get(rtype, namespace=namespace, name=name)
            rv = meta.get("resourceVersion")
            if rv and str(rv) != _meta(current)["resourceVersion"]:
                raise errors.conflict(
                    group=rtype.group, resource=rtype.plural, name=name, why=errors.STALE_OBJECT
                )
            if not rv and rtype.is_custom:
                raise errors.invalid(
                    group=rtype.group,
                    kind=rtype.kind,
                    name=name,
                    causes=[
                        (
                            "FieldValueInvalid",
                            "metadata.resourceVersion",
                            "Invalid value: 0x0: must be specified for an update",
                        )
                    ],
                )
            return self._write_update(rtype, current, obj, subresource=subresource, options=options)

    def patch(
        self,
        rtype: ResourceType,
        patch_type: str,
        body: Any,
        *,
        namespace: str,
        name: str,
        subresource: str = "",
        options: WriteOptions = WriteOptions(),
    ) -> WriteResult:
        allowed = CUSTOM_RESOURCE_PATCH_TYPES if rtype.is_custom else BUILTIN_PATCH_TYPES
        if patch_type not in allowed:
            raise errors.unsupported_media_type(patch_type, allowed)
        with self.store.lock:
            if patch_type == APPLY_PATCH_YAML:
                return self._server_side_apply(
                    rtype, body, namespace=namespace, name=name, subresource=subresource, options=options
                )
            current = self.get(rtype, namespace=namespace, name=name)
            patched = self._patched(rtype, patch_type, body, current)
            self._check_patched_rv(rtype, current, patched, name)
            return self._write_update(rtype, current, patched, subresource=subresource, options=options)

    def patch_candidate(
        self,
        rtype: ResourceType,
        patch_type: str,
        body: Any,
        *,
        namespace: str,
        name: str,
        options: WriteOptions = WriteOptions(),
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """(current object, patched object) a patch would admit, without writing; the current
        object is None when a server-side apply would create (the patched object is then a creation
        candidate). Mutating admission webhooks see the patched object."""
        allowed = CUSTOM_RESOURCE_PATCH_TYPES if rtype.is_custom else BUILTIN_PATCH_TYPES
        if patch_type not in allowed:
            raise errors.unsupported_media_type(patch_type, allowed)
        with self.store.lock:
            if patch_type == APPLY_PATCH_YAML:
                config = self._apply_configuration(body, options)
                stored = self.store.get(rtype.storage_key, namespace if rtype.namespaced else "", name)
                if stored is None:
                    config.setdefault("metadata", {}).setdefault("name", name)
                    return None, self.creation_candidate(rtype, config, namespace=namespace)
                current = self.served(rtype, stored)
                patched = (
                    merge_patch(current, config)
                    if rtype.is_custom
                    else self._strategic(rtype, current, config)
                )
            else:
                current = self.get(rtype, namespace=namespace, name=name)
                patched = self._patched(rtype, patch_type, body, current)
            self._check_patched_rv(rtype, current, patched, name)
            return current, self._update_candidate(rtype, patched)

    def update_candidate(self, rtype: ResourceType, body: Any) -> dict[str, Any]:
        """The object an update (PUT) would admit, as mutating admission webhooks see it."""
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be an object")
        obj = jsoncopy(body)
        self._check_type_meta(rtype, obj)
        return self._update_candidate(rtype, obj)

    def _update_candidate(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        if rtype.schema is not None:
            return rtype.schema.default(rtype.schema.prune(obj)[0])
        return obj

    def _patched(
        self, rtype: ResourceType, patch_type: str, body: Any, current: dict[str, Any]
    ) -> dict[str, Any]:
        if patch_type == JSON_PATCH:
            return json_patch(current, body)
        if patch_type == MERGE_PATCH:
            if not isinstance(body, dict):
                raise errors.bad_request(
                    "json: cannot unmarshal array into Go value of type map[string]interface {}"
                )
            patched: dict[str, Any] = merge_patch(current, body)
            return patched
        return self._strategic(rtype, current, body)

    def _strategic(self, rtype: ResourceType, current: dict[str, Any], body: Any) -> dict[str, Any]:
        schemas = builtin_schemas()
        return strategic_merge_patch(
            current,
            body,
            schema=schemas.for_kind(rtype.api_version, rtype.kind),
            field_meta=schemas.field_meta,
        )

    def _check_patched_rv(
        self, rtype: ResourceType, current: Mapping[str, Any], patched: Mapping[str, Any], name: str
    ) -> None:
        wanted = _meta(patched).get("resourceVersion")
        if wanted and str(wanted) != _meta(current)["resourceVersion"]:
            raise errors.conflict(
                group=rtype.group, resource=rtype.plural, name=name, why=errors.STALE_OBJECT
            )

    def _server_side_apply(
        self,
        rtype: ResourceType,
        body: Any,
        *,
        namespace: str,
        name: str,
        subresource: str,
        options: WriteOptions,
    ) -> WriteResult:
        """Apply without field ownership: create when missing, else merge the applied configuration."""
        config = self._apply_configuration(body, options)
        stored = self.store.get(rtype.storage_key, namespace if rtype.namespaced else "", name)
        if stored is None:
            config.setdefault("metadata", {}).setdefault("name", name)
            return self.create(rtype, config, namespace=namespace, options=options)
        current = self.served(rtype, stored)
        patched = merge_patch(current, config) if rtype.is_custom else self._strategic(rtype, current, config)
        self._check_patched_rv(rtype, current, patched, name)
        return self._write_update(rtype, current, patched, subresource=subresource, options=options)

    def _apply_configuration(self, body: Any, options: WriteOptions) -> dict[str, Any]:
        if not options.field_manager:
            raise errors.invalid(
                group="meta.k8s.io",
                kind="PatchOptions",
                name="",
                causes=[
                    ("FieldValueRequired", "fieldManager", "Required value: is required for apply patch")
                ],
            )
        config = yaml.safe_load(body) if isinstance(body, (str, bytes)) else body
        if not isinstance(config, dict):
            raise errors.bad_request("apply patch must be an object")
        return config

    def _write_update(
        self,
        rtype: ResourceType,
        current: dict[str, Any],
        new: dict[str, Any],
        *,
        subresource: str,
        options: WriteOptions,
    ) -> WriteResult:
        if subresource and subresource not in rtype.subresources:
            raise errors.path_not_found()
        old_meta = _meta(current)
        if subresource == "status":
            merged = jsoncopy(current)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            new = merged
        else:
            new = jsoncopy(new)
            if rtype.has_status:
                if "status" in current:
                    new["status"] = jsoncopy(current["status"])
                else:
                    new.pop("status", None)
        new["apiVersion"], new["kind"] = rtype.api_version, rtype.kind
        meta = new.setdefault("metadata", {})
        for key in ("name", "namespace", *_SERVER_META):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        name = old_meta["name"]
        if old_meta.get("deletionTimestamp"):
            added = [f for f in meta.get("finalizers") or [] if f not in (old_meta.get("finalizers") or [])]
            if added:
                quoted = ", ".join(json.dumps(f) for f in added)
                raise errors.invalid(
                    group=rtype.group,
                    kind=rtype.kind,
                    name=name,
                    causes=[
                        (
                            "FieldValueForbidden",
                            "metadata.finalizers",
                            "Forbidden: no new finalizers can be added if the object is being "
                            "deleted, found new "
                            f"finalizers []string{{{quoted}}}",
                        )
                    ],
                )
        new, warnings = self._admit(rtype, new, old=current, options=options)
        meta = new["metadata"]
        if _spec_part(rtype, new) != _spec_part(rtype, current):
            meta["generation"] = int(old_meta.get("generation") or 1) + 1
        if rtype.storage_key == CRD_STORAGE:
            new = self._prepare_crd(new)
        if _strip_volatile(new) == _strip_volatile(current):
            return WriteResult(current, warnings=warnings)
        if options.dry_run:
            return WriteResult(new, warnings=warnings)
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not self._blocks_removal(rtype, new)
        ):
            event = self.store.remove(rtype.storage_key, meta.get("namespace", ""), name)
            self._after_removal(rtype, current)
            final = event.obj if event is not None else new
            return WriteResult(self.served(rtype, final), warnings=warnings)
        stored = self._store_object(rtype, new)
        if rtype.storage_key == CRD_STORAGE:
            self._register_crd(stored)
        return WriteResult(self.served(rtype, stored), warnings=warnings)

    # --- admission -------------------------------------------------------------------------------

    def _check_type_meta(self, rtype: ResourceType, obj: dict[str, Any]) -> None:
        api_version = obj.get("apiVersion") or rtype.api_version
        kind = obj.get("kind") or rtype.kind
        if api_version != rtype.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rtype.api_version})"
            )
        if kind != rtype.kind:
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rtype.kind})"
            )
        obj["apiVersion"], obj["kind"] = api_version, kind

    def _admit(
        self, rtype: ResourceType, obj: dict[str, Any], *, old: dict[str, Any] | None, options: WriteOptions
    ) -> tuple[dict[str, Any], list[str]]:
        """Field validation (Strict/Warn/Ignore), CRD pruning/defaulting/validation, metadata checks."""
        unknown: list[str] = []
        field_errors: list[FieldError] = []
        if rtype.storage_key == SECRET_STORAGE:
            obj = _fold_string_data(obj)
        if rtype.schema is not None:
            admission = rtype.schema.admit(obj, old)
            obj, unknown, field_errors = admission.object, admission.pruned, list(admission.errors)
        else:
            schemas = builtin_schemas()
            definition = schemas.for_kind(rtype.api_version, rtype.kind)
            if definition is not None:
                unknown = schemas.unknown_fields(obj, definition)
        problems = [f'unknown field "{path}"' for path in unknown]
        problems += [f'duplicate field "{key}"' for key in options.duplicates]
        warnings: list[str] = []
        if problems and options.field_validation == "Strict":
            raise errors.bad_request("strict decoding error: " + ", ".join(problems))
        if problems and options.field_validation != "Ignore":
            warnings = problems
        field_errors = validate_metadata(rtype, obj) + field_errors
        if rtype.storage_key == POD_STORAGE:
            field_errors.extend(validate_pod(obj, old))
        if rtype.storage_key in WEBHOOK_CONFIGURATION_STORAGE:
            mutating = rtype.storage_key == MUTATING_STORAGE
            obj = default_configuration(obj, mutating=mutating)
            field_errors.extend(validate_configuration(obj, mutating=mutating))
        if rtype.storage_key == CRD_STORAGE:
            field_errors.extend(crds.validate_crd(crds.apply_crd_defaults(obj)))
        if field_errors:
            raise errors.invalid(
                group=rtype.group,
                kind=rtype.kind,
                name=_meta(obj).get("name") or "",
                causes=[(e.reason, e.field, e.body()) for e in field_errors],
            )
        if options.validating is not None:
            options.validating(obj, old)
        return obj, warnings

    # --- deletes ---------------------------------------------------------------------------------

    def delete(
        self,
        rtype: ResourceType,
        *,
        namespace: str,
        name: str,
        options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        validating: ValidatingCheck | None = None,
    ) -> dict[str, Any]:
        """Delete (or start deleting) an object; returns what the apiserver answers with."""
        options = options or {}
        with self.store.lock:
            current = self.get(rtype, namespace=namespace, name=name)
            meta = _meta(current)
            preconditions = options.get("preconditions") or {}
            if preconditions.get("uid") and preconditions["uid"] != meta.get("uid"):
                raise errors.conflict(
                    group=rtype.group,
                    resource=rtype.plural,
                    name=name,
                    why=(
                        f"Precondition failed: UID in precondition: {preconditions['uid']}, "
                        f"UID in object meta: {meta.get('uid')}"
                    ),
                )
            if (
                preconditions.get("resourceVersion")
                and preconditions["resourceVersion"] != meta["resourceVersion"]
            ):
                raise errors.conflict(
                    group=rtype.group,
                    resource=rtype.plural,
                    name=name,
                    why=(
                        "Precondition failed: ResourceVersion in precondition: "
                        f"{preconditions['resourceVersion']}, "
                        f"ResourceVersion in object meta: {meta['resourceVersion']}"
                    ),
                )
            if validating is not None:
                validating(None, current)
            if dry_run:
                return current
            policy = options.get("propagationPolicy") or (
                "Orphan" if options.get("orphanDependents") else "Background"
            )
            if policy == "Orphan":
                self._orphan_dependents(meta.get("uid", ""))
            elif policy == "Foreground":
                self._collect_dependents(meta.get("uid", ""))
            if rtype.storage_key == NAMESPACE_STORAGE:
                return self._delete_namespace(rtype, current)
            if meta.get("finalizers"):
                if not meta.get("deletionTimestamp"):
                    marked = jsoncopy(current)
                    marked["metadata"]["deletionTimestamp"] = rfc3339()
                    marked["metadata"]["deletionGracePeriodSeconds"] = 0
                    current = self.served(rtype, self._store_object(rtype, marked))
                return current
            event = self.store.remove(rtype.storage_key, namespace if rtype.namespaced else "", name)
            self._after_removal(rtype, current)
            final = self.served(rtype, event.obj) if event is not None else current
            if rtype.is_custom or rtype.storage_key == "/pods":
                return final
            details: dict[str, Any] = {"name": name, "kind": rtype.plural, "uid": meta.get("uid")}
            if rtype.group:
                details["group"] = rtype.group
            return {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }

    def delete_collection(
        self,
        rtype: ResourceType,
        *,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        with self.store.lock:
            listed = self.list_objects(rtype, namespace=namespace, labels=labels, fields=fields)
            for item in listed["items"]:
                meta = item["metadata"]
                try:
                    self.delete(
                        rtype, namespace=meta.get("namespace", ""), name=meta["name"], options=options
                    )
                except errors.APIError as exc:
                    if exc.code != 404:
                        raise
            return listed

    def _blocks_removal(self, rtype: ResourceType, obj: Mapping[str, Any]) -> bool:
        if rtype.storage_key != NAMESPACE_STORAGE:
            return False
        return bool(self.store.in_namespace(_meta(obj)["name"]))

    def _delete_namespace(self, rtype: ResourceType, current: dict[str, Any]) -> dict[str, Any]:
        name = current["metadata"]["name"]
        if not current["metadata"].get("deletionTimestamp"):
            marked = jsoncopy(current)
            marked["metadata"]["deletionTimestamp"] = rfc3339()
            marked["metadata"]["deletionGracePeriodSeconds"] = 0
            marked.setdefault("status", {})["phase"] = "Terminating"
            current = self.served(rtype, self._store_object(rtype, marked))
        for storage_key, namespace, obj_name in self.store.in_namespace(name):
            owner = self._type_for_storage(storage_key)
            if owner is not None:
                try:
                    self.delete(owner, namespace=namespace, name=obj_name)
                except errors.APIError as exc:
                    if exc.code != 404:
                        raise
        self._maybe_finish_namespace(name)
        stored = self.store.get(NAMESPACE_STORAGE, "", name)
        return self.served(rtype, stored) if stored is not None else current

    def _maybe_finish_namespace(self, namespace: str) -> None:
        stored = self.store.get(NAMESPACE_STORAGE, "", namespace)
        if stored is None or not _meta(stored).get("deletionTimestamp"):
            return
        if not self.store.in_namespace(namespace):
            self.store.remove(NAMESPACE_STORAGE, "", namespace)

    def _after_removal(self, rtype: ResourceType, removed: Mapping[str, Any]) -> None:
        meta = _meta(removed)
        if rtype.storage_key == CRD_STORAGE:
            self._unregister_crd(removed)
        self._collect_dependents(meta.get("uid", ""))
        if rtype.namespaced and meta.get("namespace"):
            self._maybe_finish_namespace(meta["namespace"])

    def _orphan_dependents(self, owner_uid: str) -> None:
        for storage_key, namespace, name in self.store.dependents(owner_uid):
            stored = self.store.get(storage_key, namespace, name)
            if stored is None:
                continue
            orphaned = jsoncopy(stored)
            refs = [r for r in orphaned["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid]
            if refs:
                orphaned["metadata"]["ownerReferences"] = refs
            else:
                orphaned["metadata"].pop("ownerReferences", None)
            self.store.put(storage_key, orphaned)

    def _collect_dependents(self, owner_uid: str) -> None:
        """Garbage collection: delete the dependents that no other living owner keeps."""
        if not owner_uid:
            return
        for storage_key, namespace, name in self.store.dependents(owner_uid):
            stored = self.store.get(storage_key, namespace, name)
            owner_type = self._type_for_storage(storage_key)
            if stored is None or owner_type is None:
                continue
            others = [
                r.get("uid") for r in _meta(stored).get("ownerReferences") or [] if r.get("uid") != owner_uid
            ]
            if any(self.store.key_of_uid(uid) is not None for uid in others if isinstance(uid, str)):
                continue
            try:
                self.delete(owner_type, namespace=namespace, name=name)
            except errors.APIError as exc:
                if exc.code != 404:
                    raise

    def _collect_if_ownerless(self, rtype: ResourceType, stored: dict[str, Any]) -> None:
        """Garbage collection of an object created with owners that were all deleted (the owner
        went between a controller's read and its write): kube-controller-manager's collector looks
        every owner up by uid and deletes such a dependent; here it goes at once. Owner uids the
        emulator never saw are left alone: tests name made-up owners."""
        uids = [
            str(ref["uid"])
            for ref in _meta(stored).get("ownerReferences") or []
            if isinstance(ref, dict) and isinstance(ref.get("uid"), str) and ref["uid"]
        ]
        if not uids or not all(self.store.was_deleted(uid) for uid in uids):
            return
        meta = _meta(stored)
        try:
            self.delete(rtype, namespace=meta.get("namespace", ""), name=meta["name"])
        except errors.APIError as exc:
            if exc.code != 404:
                raise

    def _type_for_storage(self, storage_key: str) -> ResourceType | None:
        storage_version = self._storage_versions.get(storage_key, "")
        for rtype in self.registry.sharing_storage(storage_key):
            if rtype.api_version == storage_version:
                return rtype
        candidates = self.registry.sharing_storage(storage_key)
        return candidates[0] if candidates else None

    # --- storage and namespaces ------------------------------------------------------------------

    def _store_object(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        stored = to_storage(
            rtype, jsoncopy(obj), storage_api_version=self._storage_versions[rtype.storage_key]
        )
        self.store.put(rtype.storage_key, stored)
        return stored

    def _require_namespace(self, namespace: str, *, creating: bool) -> None:
        stored = self.store.get(NAMESPACE_STORAGE, "", namespace)
        if stored is None:
            raise errors.not_found(group="", resource="namespaces", name=namespace)
        if creating and _meta(stored).get("deletionTimestamp"):
            raise errors.APIError(
                code=403,
                reason="Forbidden",
                message=f"unable to create new content in namespace {namespace} because it is "
                "being terminated",
                details={"name": namespace, "kind": "namespaces"},
                causes=(
                    errors.Cause(
                        reason="NamespaceTerminating",
                        field="metadata.namespace",
                        message=f"namespace {namespace} is being terminated",
                    ),
                ),
            )

    # --- CRDs ------------------------------------------------------------------------------------

    def _prepare_crd(self, obj: dict[str, Any]) -> dict[str, Any]:
        crd = crds.apply_crd_defaults(obj)
        crd["status"] = crds.crd_status(crd, now=_meta(obj).get("creationTimestamp") or rfc3339())
        return crd

    def _register_crd(self, crd: Mapping[str, Any]) -> None:
        crd_dict = dict(crd)
        self.registry.remove_crd(crd_dict["metadata"]["name"])
        storage_version = crds.storage_version(crd_dict)
        for rtype in crds.resource_types(crd_dict):
            self._register(rtype, storage_version=storage_version)

    def _unregister_crd(self, crd: Mapping[str, Any]) -> None:
        name = _meta(crd)["name"]
        gone = self.registry.remove_crd(name)
        for storage_key in {rt.storage_key for rt in gone}:
            for obj in self.store.list_objects(storage_key)[0]:
                meta = _meta(obj)
                self.store.remove(storage_key, meta.get("namespace", ""), meta["name"])

    def restore(
        self, resource_version: int, objects: dict[str, list[dict[str, Any]]], deleted_uids: Iterable[str]
    ) -> None:
        """Load a saved state (`Store.snapshot`, see `kubeemu.persistence`): the objects as they
        were, resourceVersions continuing after the saved one, the saved CRDs' resources served."""
        with self.store.lock:
            self.store.restore(resource_version, objects, deleted_uids)
            for crd in objects.get(CRD_STORAGE, []):
                self._register_crd(crd)

    def load_crds(self, manifests: Iterable[Mapping[str, Any]]) -> None:
        for manifest in manifests:
            self.apply(manifest)

    # --- convenience for test beds ---------------------------------------------------------------

    def apply(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Create the object, or replace it if it exists (as the superuser, bypassing RBAC and, being
        in-process, admission webhooks: `RunningEmulator.apply` writes over the API instead)."""
        rtype = self.resource_for(manifest.get("apiVersion", ""), manifest.get("kind", ""))
        meta = _meta(manifest)
        namespace = meta.get("namespace", "") if rtype.namespaced else ""
        with self.store.lock:
            existing = self.store.get(rtype.storage_key, namespace, meta.get("name", ""))
            if existing is None:
                return self.create(rtype, dict(manifest), namespace=namespace).object
            body = jsoncopy(dict(manifest))
            body.setdefault("metadata", {})["resourceVersion"] = _meta(existing)["resourceVersion"]
            return self.update(rtype, body, namespace=namespace, name=meta["name"]).object
