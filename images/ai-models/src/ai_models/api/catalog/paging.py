"""Keyset page tokens: where the previous page ended, bound to the search that produced it.

A token is base64url (no padding) of the JSON `[version, fingerprint, sortKey, source, id]`. The
fingerprint is a hash of everything that decides the result order and membership (text, filters,
sort); `pageSize` is left out, so a client may change it between pages. A token presented with a
different search is refused rather than silently returning a page of some other result set.
Tokens are not secret and carry no authority: they only say where to continue.

A token is client input: it is bounded in length before it is decoded, and its JSON is parsed only
when it is flat (one array, no object), so no nesting reaches the recursive JSON parser; whatever
else is wrong with it is the one `invalid-page-token` problem.
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
# The contract's maxLength of pageToken; issued tokens are far shorter.
MAX_TOKEN_CHARS: Final = 2048


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


def _nesting(raw: bytes) -> int:
    """How deep arrays and objects nest in `raw` read as JSON (brackets inside strings do not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth -= 1
    return deepest


def decode_token(token: str, *, query_fingerprint: str) -> Cursor:
    """The cursor `token` holds; an `invalid-page-token` problem for anything else, whatever it is."""
    if len(token) > MAX_TOKEN_CHARS:
        raise _refuse(f"is longer than any page token this api issues ({MAX_TOKEN_CHARS} characters)")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError) as error:
        raise _refuse("is not a page token of this api") from error
    # An issued token is one flat array: anything nested is refused here, before a parser that
    # recurses could see it.
    if _nesting(raw) > 1:
        raise _refuse("is not a page token of this api")
    try:
        document: Any = json.loads(raw)
    except (ValueError, RecursionError) as error:
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
