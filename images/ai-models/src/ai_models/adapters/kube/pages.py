"""One list page read raw (`_preload_content=False`): the items as dicts, the connection released.

Lists are read raw rather than through the typed models: the callers want the objects as the API
server sends them (the domain reads dicts), and deserializing into models only to serialize back
costs time and memory for nothing.
"""

from __future__ import annotations

import json
from typing import Any


def page_items(response: Any) -> list[dict[str, Any]]:
    """The `items` of a raw list response that are objects; the response is released."""
    try:
        page = json.loads(response.data)
    finally:
        response.release_conn()
    items = page.get("items") if isinstance(page, dict) else None
    return [item for item in items or () if isinstance(item, dict)]
