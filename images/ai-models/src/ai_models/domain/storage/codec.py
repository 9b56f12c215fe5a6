"""The ledger's stored form: JSON in the Secret `ai-models-storage-accounting`, key `ledger.json`."""

from __future__ import annotations

import datetime
import json
from typing import Any

from ai_models.domain.conditions import parse_timestamp, timestamp
from ai_models.domain.storage.ledger import Absence, EntryState, Ledger, LedgerEntry, Owner, Scope
from ai_models.names import STORAGE_ACCOUNTING_SECRET

LEDGER_SECRET_NAME = STORAGE_ACCOUNTING_SECRET
LEDGER_SECRET_KEY = "ledger.json"


class LedgerFormatError(ValueError):
    """The stored ledger cannot be read; callers treat it as usage unknown."""


def ledger_to_json(ledger: Ledger) -> bytes:
    document: dict[str, Any] = {
        "confirmed": ledger.confirmed,
        "entries": [
            {
                "owner": {
                    "kind": entry.owner.kind,
                    "namespace": entry.owner.namespace,
                    "name": entry.owner.name,
                    "uid": entry.owner.uid,
                },
                "scope": entry.scope.value,
                "sizeBytes": entry.size_bytes,
                "state": entry.state.value,
            }
            for entry in ledger.entries
        ],
    }
    if ledger.absences:
        document["absences"] = [
            {"prefix": item.prefix, "uid": item.uid, "since": timestamp(item.since)}
            for item in ledger.absences
        ]
    return json.dumps(document, sort_keys=True).encode()


def ledger_from_json(data: bytes) -> Ledger | None:
    """The stored ledger, or None when it is empty (an emptied ledger means usage unknown)."""
    if not data.strip():
        return None
    try:
        document: dict[str, Any] = json.loads(data)
        entries = tuple(
            LedgerEntry(
                owner=Owner(**item["owner"]),
                scope=Scope(item["scope"]),
                size_bytes=int(item["sizeBytes"]),
                state=EntryState(item["state"]),
            )
            for item in document["entries"]
        )
        absences = tuple(
            Absence(prefix=str(item["prefix"]), uid=str(item["uid"]), since=_parse_time(str(item["since"])))
            for item in document.get("absences") or ()
        )
        return Ledger(entries=entries, confirmed=bool(document["confirmed"]), absences=absences)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise LedgerFormatError(
            f"ledger.json of Secret {LEDGER_SECRET_NAME} is unreadable: {error}"
        ) from error


def _parse_time(value: str) -> datetime.datetime:
    parsed = parse_timestamp(value)
    if parsed is None:
        raise ValueError(f"{value!r} is not an RFC 3339 timestamp")
    return parsed
