"""Published pages: bilingual twins, front matter, links, and examples shared by both languages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from support.docs import pages, yaml_blocks
from support.paths import DOCS_DIR

CYRILLIC = re.compile(r"[А-Яа-яЁё]")
FRONT_MATTER = re.compile(r"^---\n(.*?)\n---\n", re.DOTALL)
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")

ENGLISH = [page for page in pages() if not page.name.endswith(".ru.md")]
RUSSIAN = [page for page in pages() if page.name.endswith(".ru.md")]


def twin(page: Path) -> Path:
    return page.with_name(page.name.removesuffix(".md") + ".ru.md")


def test_every_published_page_has_a_russian_twin_and_no_orphans() -> None:
    for page in [
        "README.md",
        "CONFIGURATION.md",
        "CR.md",
        "USER_GUIDE.md",
        "ADMIN_GUIDE.md",
        "FAQ.md",
        "EXAMPLES.md",
    ]:
        assert (DOCS_DIR / page).exists(), f"docs/{page} is missing"
    assert sorted(twin(page) for page in ENGLISH) == RUSSIAN


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.name)
def test_page_has_front_matter_with_a_title_and_no_lang(page: Path) -> None:
    match = FRONT_MATTER.match(page.read_text(encoding="utf-8"))
    assert match, "front matter is missing"
    front = yaml.safe_load(match.group(1))
    assert isinstance(front, dict)
    assert front.get("title")
    assert "lang" not in front


@pytest.mark.parametrize("page", ENGLISH, ids=lambda page: page.name)
def test_english_page_has_no_cyrillic(page: Path) -> None:
    assert not CYRILLIC.search(page.read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", RUSSIAN, ids=lambda page: page.name)
def test_russian_page_is_in_russian(page: Path) -> None:
    assert CYRILLIC.search(page.read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", ENGLISH, ids=lambda page: page.name)
def test_twins_show_the_same_yaml_examples(page: Path) -> None:
    assert yaml_blocks(twin(page)) == yaml_blocks(page)


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.name)
def test_relative_links_point_at_existing_files(page: Path) -> None:
    for target, _anchor in LINK.findall(page.read_text(encoding="utf-8")):
        if "://" in target:
            continue
        assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


@pytest.mark.parametrize("page", [DOCS_DIR / "CONFIGURATION.md", DOCS_DIR / "CR.md"], ids=lambda p: p.name)
def test_schema_pages_carry_the_schema_marker(page: Path) -> None:
    assert "<!-- SCHEMA -->" in page.read_text(encoding="utf-8")
    assert "<!-- SCHEMA -->" in twin(page).read_text(encoding="utf-8")
