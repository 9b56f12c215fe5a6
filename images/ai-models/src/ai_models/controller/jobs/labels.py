"""Label values derived from object names: a Job's labels name its owner, whose name may be
longer than a label value can be."""

from __future__ import annotations

import hashlib
import re
from typing import Final

# What the API server accepts as a label value (and a Job name must be one: its Pods carry it in
# the `job-name` label).
LABEL_VALUE_MAX: Final = 63
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NAME_HASH_CHARACTERS: Final = 12


def label_value(text: str) -> str:
    """`text` when it is a valid label value, else its first characters, `-` and a hash of all of it.

    Object names go to 253 characters, label values to 63; the derived value stays readable in
    `kubectl get -L` and differs for names that share their first 50 characters.
    """
    if len(text) <= LABEL_VALUE_MAX and _LABEL_VALUE.match(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:_NAME_HASH_CHARACTERS]
    head = re.sub(r"[^A-Za-z0-9]+$", "", re.sub(r"[^-A-Za-z0-9_.]", "", text)[: LABEL_VALUE_MAX - 13])
    head = re.sub(r"^[^A-Za-z0-9]+", "", head)
    return f"{head}-{digest}" if head else digest
