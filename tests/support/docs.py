"""Examples the documentation shows: files under docs/examples and yaml blocks in the pages."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from support.paths import DOCS_DIR
from support.yamlfiles import load_yaml_documents

YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL)


def pages() -> list[Path]:
    """Published pages (docs/internal is not published)."""
    return sorted(DOCS_DIR.glob("*.md"))


def yaml_blocks(page: Path) -> list[str]:
    return YAML_BLOCK.findall(page.read_text(encoding="utf-8"))


def documented_objects() -> list[tuple[str, dict[str, Any]]]:
    """Every Kubernetes object shown in the docs, with where it was shown."""
    found: list[tuple[str, dict[str, Any]]] = []
    for path in sorted((DOCS_DIR / "examples").glob("*.yaml")):
        for index, document in enumerate(load_yaml_documents(path)):
            found.append((f"examples/{path.name}#{index}", document))
    for page in pages():
        for block_index, block in enumerate(yaml_blocks(page)):
            for index, document in enumerate(doc for doc in yaml.safe_load_all(block) if doc):
                found.append((f"{page.name}:block{block_index}#{index}", document))
    return found
