"""The pages on publishing from another ai-models cluster say what the code does: the reasons a
user can meet are reasons of the Model vocabulary, the wait while the ClusterModel there is not
Ready is the planner's, and the requests an admin can repeat are the serving API's paths."""

from __future__ import annotations

import re

import pytest

from ai_models.api.models_serving import CLUSTER_MODEL_FILE_PATH, CLUSTER_MODEL_MANIFEST_PATH
from ai_models.controller.models.planning import REMOTE_NOT_READY_RETRY_SECONDS
from ai_models.names import ModelReason
from support.paths import DOCS_DIR

USER_SECTIONS = {
    "USER_GUIDE.md": ("When the source is another ai-models cluster", "From your own files"),
    "USER_GUIDE.ru.md": ("Если источник — другой кластер ai-models", "Из собственных файлов"),
}
ADMIN_SECTIONS = {
    "ADMIN_GUIDE.md": ("### Publishing from another ai-models cluster", "## Storage accounting"),
    "ADMIN_GUIDE.ru.md": ("### Публикация из другого кластера ai-models", "## Учет хранилища"),
}
# What the planner and the publisher set for a publication from another cluster.
REASONS = {
    ModelReason.SOURCE_NOT_FOUND,
    ModelReason.PUBLICATION_FAILED,
    ModelReason.ARTIFACT_DAMAGED,
    ModelReason.CATALOG_ENTRY_NOT_FOUND,
}


def section(page: str, bounds: tuple[str, str]) -> str:
    text = (DOCS_DIR / page).read_text(encoding="utf-8")
    start, end = bounds
    return text[text.index(start) : text.index(end, text.index(start))]


@pytest.mark.parametrize("page", USER_SECTIONS)
def test_the_user_table_lists_exactly_the_reasons_of_a_copy(page: str) -> None:
    text = section(page, USER_SECTIONS[page])
    rows = re.findall(r"^\| `(\w+)` \|", text, re.MULTILINE)

    assert set(rows) == {reason.value for reason in REASONS}
    # How long the model waits while the ClusterModel there is not Ready.
    assert re.search(rf"\b{int(REMOTE_NOT_READY_RETRY_SECONDS)}\s", text)


@pytest.mark.parametrize("page", ADMIN_SECTIONS)
def test_the_admin_section_names_the_serving_paths_the_copy_requests(page: str) -> None:
    text = section(page, ADMIN_SECTIONS[page])

    assert CLUSTER_MODEL_MANIFEST_PATH.replace("{name}", "<name>") in text
    assert CLUSTER_MODEL_FILE_PATH.replace("{name}", "<name>").replace("{path}", "<path>") in text
    for reason in (
        ModelReason.SOURCE_NOT_FOUND,
        ModelReason.PUBLICATION_FAILED,
        ModelReason.ARTIFACT_DAMAGED,
    ):
        assert f"`{reason.value}`" in text
