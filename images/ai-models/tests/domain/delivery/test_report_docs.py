"""The user guide (EN and RU) lists every delivery reason and every name a delivering workload shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from ai_models.names import (
    CLUSTER_MODEL_ANNOTATION,
    DELIVERY_APPLIED_ANNOTATION,
    DELIVERY_MESSAGE_ANNOTATION,
    DELIVERY_REASON_ANNOTATION,
    DELIVERY_SCHEDULING_GATE,
    MATERIALIZED_DIGESTS_ANNOTATION,
    MODEL_ANNOTATION,
    MODELS_DIR,
    MODELS_DIR_VARIABLE,
    MODELS_VARIABLE,
    NODE_CACHE_DRIVER,
    NODE_CACHE_READY_LABEL,
    NODE_CACHE_VOLUME_PREFIX,
    OWNER_UID_LABEL,
    SHARED_PVC_LABEL,
    SHARED_PVC_VOLUME,
    VOLUME_DIGEST_ATTRIBUTE,
    DeliveryReason,
)

DOCS = Path(__file__).resolve().parents[5] / "docs"
NAMES = (
    MODEL_ANNOTATION,
    CLUSTER_MODEL_ANNOTATION,
    DELIVERY_REASON_ANNOTATION,
    DELIVERY_MESSAGE_ANNOTATION,
    DELIVERY_SCHEDULING_GATE,
    DELIVERY_APPLIED_ANNOTATION,
    MATERIALIZED_DIGESTS_ANNOTATION,
    MODELS_DIR,
    MODELS_DIR_VARIABLE,
    MODELS_VARIABLE,
    OWNER_UID_LABEL,
    SHARED_PVC_LABEL,
    SHARED_PVC_VOLUME,
    NODE_CACHE_DRIVER,
    NODE_CACHE_READY_LABEL,
    NODE_CACHE_VOLUME_PREFIX,
    VOLUME_DIGEST_ATTRIBUTE,
)


@pytest.mark.parametrize("page", ["USER_GUIDE.md", "USER_GUIDE.ru.md"])
def test_every_delivery_reason_has_a_row_in_the_user_guide(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")

    missing = [reason.value for reason in DeliveryReason if f"| `{reason.value}` |" not in text]

    assert not missing, f"docs/{page} has no row for {missing}"


@pytest.mark.parametrize("page", ["USER_GUIDE.md", "USER_GUIDE.ru.md"])
def test_every_name_a_delivering_workload_shows_is_in_the_user_guide(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")

    assert [name for name in NAMES if f"`{name}" not in text] == []
