"""What `spec.source` asks for, parsed and checked before anything is fetched (pure).

The CRD's CEL rules already accept only well-formed URLs and one source kind; this module is the
controller's own check (objects may predate a rule, and the emulator-free unit tests need it) and
turns the spec into the reference the publication works with.
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from ai_models.names import ModelKind, SourceType

DEFAULT_REVISION = "main"
HUGGING_FACE_HOSTS = frozenset({"huggingface.co", "www.huggingface.co", "hf.co", "www.hf.co"})
_SEGMENT = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,95}$")
_REVISION = re.compile(r"^[-A-Za-z0-9_./]{1,255}$")
# Paths on the Hub that are not model repositories.
_NOT_MODELS = frozenset({"datasets", "spaces", "api", "docs", "collections", "organizations", "papers"})
TOKEN_KEYS = ("token", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


@dataclasses.dataclass(frozen=True)
class HuggingFaceSource:
    repository: str
    revision: str
    secret_name: str | None = None
    secret_namespace: str | None = None


@dataclasses.dataclass(frozen=True)
class UploadSource:
    pass


@dataclasses.dataclass(frozen=True)
class CatalogSource:
    source_name: str
    entry_name: str


@dataclasses.dataclass(frozen=True)
class InvalidSource:
    message: str


ParsedSource = HuggingFaceSource | UploadSource | CatalogSource | InvalidSource


def parse_url(url: str) -> tuple[str, str] | str:
    """(repository, revision) of a Hugging Face model URL, or why it is not one.

    Accepts what the CRD's rule on `spec.source.url` accepts, less the Hub paths that are not
    model repositories: the URL exactly as written (no port, user, fragment or other query).
    """
    parsed = urllib.parse.urlsplit(url)
    if not url.startswith("https://") or parsed.netloc not in HUGGING_FACE_HOSTS:
        return f"{url!r} is not a Hugging Face URL; expected https://huggingface.co/<org>/<model>[?revision=<rev>]"
    parts = parsed.path.removeprefix("/").removesuffix("/").split("/")
    if len(parts) != 2 or parts[0] in _NOT_MODELS or not all(_SEGMENT.fullmatch(part) for part in parts):
        return (
            f"{url!r} does not name a model repository; expected https://huggingface.co/<org>/<model>"
            "[?revision=<rev>] (datasets and spaces cannot be published)"
        )
    name, _, revision = parsed.query.partition("=")
    # `urlsplit` forgives what the CRD does not (a bare "?" or "#", tabs and newlines it drops): the
    # URL must be exactly what its parts say. The revision is taken as written, never decoded.
    exact = urllib.parse.urlunsplit(parsed) == url and not parsed.fragment
    if name == "revision" and (problem := revision_problem(revision)) is not None:
        return f"{url!r} has a revision that {problem}: name a branch, tag or commit in ?revision="
    if not exact or (parsed.query and (name != "revision" or not _REVISION.fullmatch(revision))):
        return (
            f"{url!r} has an unsupported query or fragment; "
            "only ?revision=<branch, tag or commit> is accepted"
        )
    return f"{parts[0]}/{parts[1]}", revision if parsed.query else DEFAULT_REVISION


def revision_problem(revision: str) -> str | None:
    """Why `revision` cannot be put into a Hub URL as one path segment, or None.

    An HTTP client removes `.` and `..` segments from a path before sending it (RFC 3986), so
    `/revision/..` would ask for the repository's default branch instead of a revision;
    percent-encoding would be decoded by the Hub into the same traversal. A branch, tag or commit
    name never needs any of these (git refuses them in ref names too).
    """
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in revision):
        return "contains a control character"
    if "%" in revision:
        return "is percent-encoded (such as %2e or %2F)"
    if any(segment in (".", "..") for segment in revision.split("/")):
        return "is or contains a `.` or `..` path segment"
    return None


def parse_source(kind: str, namespace: str, source: Mapping[str, Any] | None) -> ParsedSource:
    source = source or {}
    given = [key for key in ("url", "upload", "catalog") if source.get(key) is not None]
    if len(given) != 1:
        return InvalidSource(
            "exactly one of spec.source.url, spec.source.upload or spec.source.catalog must be set"
        )
    if given == ["upload"]:
        return UploadSource()
    if given == ["catalog"]:
        catalog = source["catalog"] or {}
        if not catalog.get("sourceName") or not catalog.get("name"):
            return InvalidSource("spec.source.catalog needs sourceName and name")
        return CatalogSource(source_name=str(catalog["sourceName"]), entry_name=str(catalog["name"]))
    parsed = parse_url(str(source["url"]))
    if isinstance(parsed, str):
        return InvalidSource(parsed)
    repository, revision = parsed
    secret = source.get("authSecretRef") or None
    if secret is None:
        return HuggingFaceSource(repository, revision)
    if kind == ModelKind.CLUSTER_MODEL:
        return InvalidSource("spec.source.authSecretRef is not supported for ClusterModel")
    secret_namespace = secret.get("namespace") or namespace
    if secret_namespace != namespace:
        # The module must never read another namespace's Secret on a user's behalf.
        return InvalidSource(
            f"spec.source.authSecretRef.namespace {secret_namespace!r} must be the Model's own namespace "
            f"{namespace!r} (or be left out)"
        )
    return HuggingFaceSource(
        repository, revision, secret_name=str(secret["name"]), secret_namespace=namespace
    )


def token_from_secret_data(data: Mapping[str, str]) -> str | None:
    """The token among the accepted keys (already base64-decoded values), first key wins."""
    for key in TOKEN_KEYS:
        value = data.get(key)
        if value and value.strip():
            return value.strip()
    return None


def catalog_source_of(obj: Mapping[str, Any]) -> str | None:
    """The ModelCatalogSource a Model or ClusterModel publishes from (`spec.source.catalog.sourceName`),
    or None: the key under which the controller finds an object's dependants when a source changes."""
    catalog = ((obj.get("spec") or {}).get("source") or {}).get("catalog")
    name = catalog.get("sourceName") if isinstance(catalog, Mapping) else None
    return name if isinstance(name, str) and name else None


_SPEC_SOURCE_TYPES = {
    "url": SourceType.HUGGING_FACE,
    "upload": SourceType.UPLOAD,
    "catalog": SourceType.CATALOG,
}


def spec_source_type(obj: Mapping[str, Any]) -> SourceType | None:
    """`status.source.resolvedType` as the spec already says it (the one source kind set), so a
    Model shows its SOURCE from its first status, a failed one included; None while the spec sets
    no kind or more than one (the failure message says so)."""
    source = (obj.get("spec") or {}).get("source") or {}
    given = [kind for key, kind in _SPEC_SOURCE_TYPES.items() if source.get(key) is not None]
    return given[0] if len(given) == 1 else None
