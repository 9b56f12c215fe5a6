"""The object store: where artifacts and the catalog live.

One protocol, `ObjectStore`, two backends: `S3Store` (one bucket per cluster) and
`DirectoryStore` (the local stack). Processes call `open_store(settings)` and code against the
protocol; both backends pass the same contract tests. Calls are synchronous and thread-safe;
async code uses `asyncio.to_thread`.

    store = open_store(Settings())
    store.check()
    store.put_bytes("catalog/hf/manifest.json", payload)
"""

from ai_models.adapters.objectstore.base import (
    ByteSource,
    ObjectInfo,
    ObjectNotFound,
    ObjectStore,
    ObjectStoreError,
)
from ai_models.adapters.objectstore.factory import ACCEPTED_FORMS, open_store
from ai_models.adapters.objectstore.keys import InvalidKey, validate_key, validate_prefix
from ai_models.adapters.objectstore.local import DirectoryStore
from ai_models.adapters.objectstore.s3 import S3Store
from ai_models.adapters.objectstore.streams import SizeMismatch

__all__ = [
    "ACCEPTED_FORMS",
    "ByteSource",
    "DirectoryStore",
    "InvalidKey",
    "ObjectInfo",
    "ObjectNotFound",
    "ObjectStore",
    "ObjectStoreError",
    "S3Store",
    "SizeMismatch",
    "open_store",
    "validate_key",
    "validate_prefix",
]
