"""The store a process uses, from `AI_MODELS_STORE_URL` and the `AI_MODELS_S3_*` settings."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from ai_models.adapters.objectstore.base import ObjectStore
from ai_models.adapters.objectstore.local import DirectoryStore
from ai_models.adapters.objectstore.s3 import S3Store
from ai_models.settings import Settings

ACCEPTED_FORMS = "s3://<bucket>, file:///<absolute directory> or an absolute directory path"


def open_store(settings: Settings) -> ObjectStore:
    """Build the store `settings.store_url` names; a malformed URL raises ValueError saying why.

    Nothing is contacted here; call `check()` for that.
    """
    url = settings.store_url
    if not url:
        raise _invalid(url, "it is not set")
    if url.startswith("s3://"):
        return _s3_store(url, settings)
    if url.startswith("file:"):
        return DirectoryStore(_file_url_path(url))
    if url.startswith("/"):
        return DirectoryStore(Path(url))
    raise _invalid(url, "unknown form")


def _s3_store(url: str, settings: Settings) -> S3Store:
    bucket = url.removeprefix("s3://").removesuffix("/")
    if not bucket or "/" in bucket:
        # One bucket serves one cluster and the layout starts at its root: no key prefix here.
        raise _invalid(url, "expected exactly a bucket name after s3://, without a path")
    verify: bool | str = True
    if settings.s3_insecure:
        verify = False
    elif settings.s3_ca_file:
        if not Path(settings.s3_ca_file).is_file():
            raise ValueError(
                f"{Settings.variable('s3_ca_file')} names {settings.s3_ca_file!r}, "
                "which is not a readable file"
            )
        verify = settings.s3_ca_file
    return S3Store(
        bucket,
        endpoint_url=settings.s3_endpoint or None,
        region=settings.s3_region,
        path_style=settings.s3_use_path_style,
        verify=verify,
    )


def _file_url_path(url: str) -> Path:
    parts = urllib.parse.urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise _invalid(url, f"a file URL names no host, got {parts.netloc!r}")
    if parts.query or parts.fragment:
        raise _invalid(url, "a file URL has no query or fragment")
    path = urllib.parse.unquote(parts.path)
    if not path.startswith("/"):
        raise _invalid(url, "the directory must be absolute (file:///path)")
    return Path(path)


def _invalid(url: str | None, reason: str) -> ValueError:
    return ValueError(
        f"{Settings.variable('store_url')}={url!r} is not a usable object store ({reason}); "
        f"use {ACCEPTED_FORMS}"
    )
