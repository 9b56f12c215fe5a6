"""The access matrix the admin guide documents, parsed from its tables (English and Russian).

Render tests compare it with the rendered roles; cluster tests compare it with what the emulator's
RBAC really allows, so the guide, the roles and the enforcement cannot drift apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from support.paths import DOCS_DIR

RESOURCES = ("models", "clustermodels", "modelcatalogsources", "catalogimports")
GUIDES = ("ADMIN_GUIDE.md", "ADMIN_GUIDE.ru.md")
DOC_WORDS = {"read": "read", "write": "write", "чтение": "read", "запись": "write"}
DOC_COLUMNS = {
    "Model": "models",
    "ClusterModel": "clustermodels",
    "ModelCatalogSource": "modelcatalogsources",
}

Matrix = dict[str, dict[str, frozenset[str]]]


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Every pipe table in a markdown text, as rows of stripped cells (separator rows dropped)."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.strip().startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-{3,}:?", cell) for cell in cells):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


def column_resource(header: str) -> str:
    if "catalogimports" in header:
        return "catalogimports"
    if "ModuleConfig" in header:
        return "moduleconfigs"
    return DOC_COLUMNS[header]


def cell_access(cell: str) -> frozenset[str]:
    if cell == "—":
        return frozenset()
    return frozenset(DOC_WORDS[word.strip()] for word in cell.split(","))


def table_starting_with(guide: str, first_header: tuple[str, ...]) -> list[list[str]]:
    text = (DOCS_DIR / guide).read_text(encoding="utf-8")
    matching = [table for table in markdown_tables(text) if table[0][0] in first_header]
    assert len(matching) == 1, f"{guide}: expected one table headed {first_header}, found {len(matching)}"
    return matching[0]


def documented_matrix(guide: str) -> Matrix:
    header, *rows = table_starting_with(guide, ("Access level", "Уровень доступа"))
    resources = [column_resource(cell) for cell in header[1:]]
    return {
        row[0]: {res: cell_access(cell) for res, cell in zip(resources, row[1:], strict=True)} for row in rows
    }


# The "Deckhouse" column of the capability table: which role model a row belongs to.
ROLE_MODELS = {"1.78+": "capability", "1.75–1.77": "legacy"}


@dataclass(frozen=True)
class DocumentedCapability:
    model: str  # "capability" (Deckhouse 1.78+) or "legacy" (use/manage, 1.75 to 1.77)
    aggregated_into: str  # the cell as written, e.g. "`namespace` as `viewer`"
    grants: dict[str, frozenset[str]]


def documented_capabilities(guide: str) -> dict[str, DocumentedCapability]:
    """The rbacv2 capability table, by capability name; the "Deckhouse" column says which model."""
    header, *rows = table_starting_with(guide, ("Capability",))
    assert header[1] == "Deckhouse", f"{guide}: the capability table's second column must be Deckhouse"
    resources = [column_resource(cell) for cell in header[3:]]
    return {
        row[0].strip("`"): DocumentedCapability(
            model=ROLE_MODELS[row[1]],
            aggregated_into=row[2],
            grants={res: cell_access(cell) for res, cell in zip(resources, row[3:], strict=True)},
        )
        for row in rows
    }
