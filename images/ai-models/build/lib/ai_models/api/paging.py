"""Keyset page tokens: where the previous page ended, bound to the search that produced it.

A token is base64url (no padding) of the JSON `[version, fingerprint, sortKey, source, id]`. The
fingerprint is a hash of everything that decides the result order and membership (text, filters,
sort); `pageSize` is left out, so a client may change it between pages. A token presented with a
different search is refused rather than silently returning a page of some other result set.
Tokens are not secret and carry no authority: they only say where to continue.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
from typing import Any, Final

from ai_models.api.models import SearchQuery
from ai_models.api.problems import ApiProblem, invalid_page_token

TOKEN_VERSION: Final = 1


@dataclasses.dataclass(frozen=True)
class Cursor:
    """The last entry of a page, in the index's sort order."""

    key: int
    source: str
    id: str


def fingerprint(query: SearchQuery, *, text_terms: tuple[str, ...]) -> str:
    """Identifies the result set of `query`; `text_terms` is `q` as the index matches it."""
    facts = {
        "q": list(text_terms),
        "filters": query.model_dump(mode="json", exclude={"q", "page_size", "page_token"}, exclude_none=True),
    }
    canonical = json.dumps(facts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def encode_token(cursor: Cursor, *, query_fingerprint: str) -> str:
    document = [TOKEN_VERSION, query_fingerprint, cursor.key, cursor.source, cursor.id]
    raw = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _refuse(detail: str) -> ApiProblem:
    return invalid_page_token(
        f"pageToken {detail}; pass the nextPageToken of the previous page with the same q, filters "
        "and sort, or leave pageToken out to start from the first page"
    )


def decode_token(token: str, *, query_fingerprint: str) -> Cursor:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        document: Any = json.loads(raw)
    except (binascii.Error, ValueError) as error:
        raise _refuse("is not a page token of this api") from error
    if not (
        isinstance(document, list)
        and len(document) == 5
        and document[0] == TOKEN_VERSION
        and isinstance(document[1], str)
        and type(document[2]) is int
        and -(2**63) <= document[2] < 2**63
        and isinstance(document[3], str)
        and isinstance(document[4], str)
    ):
        raise _refuse("is not a page token of this api")
    if document[1] != query_fingerprint:
        raise _refuse("was issued for a different search")
    return Cursor(key=document[2], source=document[3], id=document[4])
