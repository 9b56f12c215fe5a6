"""Download verdicts for one ledger snapshot: the domain's `download_verdict`, memoised by size.

For a given ledger and budget the verdict depends only on the weights size, so each distinct size
is computed once per snapshot. The same book answers the `verdict` search filter (registered as a
SQLite function) and the `downloadVerdict` of every served entry, so the filter and the entries
can never disagree, and neither can disagree with the reservation the module makes later.
"""

from __future__ import annotations

import json
import threading
from typing import Final

from ai_models.domain.storage.ledger import Ledger
from ai_models.domain.storage.verdict import DownloadVerdict, download_verdict

# A catalog has far fewer distinct sizes than this; the bound only caps a pathological one.
MAX_MEMOISED_SIZES: Final = 200_000


class VerdictBook:
    def __init__(self, *, ledger: Ledger | None, capacity_bytes: int | None) -> None:
        self.ledger = ledger
        self.capacity_bytes = capacity_bytes
        self._verdicts: dict[int | None, tuple[DownloadVerdict, str]] = {}
        # The filter calls `verdict_name` once per scanned row: a plain dict of names keeps that
        # call as cheap as a Python callback from SQLite can be.
        self._names: dict[int | None, str] = {}
        self._lock = threading.Lock()

    def _memoised(self, weights_bytes: int | None) -> tuple[DownloadVerdict, str]:
        found = self._verdicts.get(weights_bytes)
        if found is not None:
            return found
        verdict = download_verdict(weights_bytes, ledger=self.ledger, capacity_bytes=self.capacity_bytes)
        document: dict[str, object] = {"verdict": verdict.verdict.value, "reason": verdict.reason.value}
        if verdict.required_bytes is not None:
            document["requiredBytes"] = verdict.required_bytes
        found = (verdict, json.dumps(document, separators=(",", ":")))
        with self._lock:
            if len(self._verdicts) >= MAX_MEMOISED_SIZES:
                self._verdicts.clear()
                self._names.clear()
            self._verdicts[weights_bytes] = found
            self._names[weights_bytes] = verdict.verdict.value
        return found

    def verdict(self, weights_bytes: int | None) -> DownloadVerdict:
        return self._memoised(weights_bytes)[0]

    def verdict_name(self, weights_bytes: int | None) -> str:
        """The verdict as the contract spells it; the SQLite function behind the `verdict` filter."""
        name = self._names.get(weights_bytes)
        return name if name is not None else self._memoised(weights_bytes)[0].verdict.value

    def verdict_json(self, weights_bytes: int | None) -> str:
        """The entry's `downloadVerdict` object as compact JSON."""
        return self._memoised(weights_bytes)[1]
