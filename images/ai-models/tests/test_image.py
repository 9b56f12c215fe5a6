"""The image definition agrees with the package and the chart's security context."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

IMAGE_DIR = Path(__file__).resolve().parents[1]


def test_image_runs_the_entry_point() -> None:
    # The werf build (werf.inc.yaml, D119) is the image's only definition; the user (64535) comes
    # from the pods' security context, as DMT wants (tests/module/test_werf_build.py).
    werf = (IMAGE_DIR / "werf.inc.yaml").read_text(encoding="utf-8")
    package = tomllib.loads((IMAGE_DIR / "pyproject.toml").read_text(encoding="utf-8"))
    assert package["project"]["scripts"] == {"ai-models": "ai_models.cli:main"}
    assert re.search(r'^    entrypoint: \["ai-models"\]$', werf, re.MULTILINE)


def test_runtime_dependencies_are_pinned() -> None:
    package = tomllib.loads((IMAGE_DIR / "pyproject.toml").read_text(encoding="utf-8"))
    pinned = re.compile(r"[A-Za-z0-9._-]+(\[[a-z0-9,]+\])?==[0-9][0-9A-Za-z.+-]*")
    for requirement in package["project"]["dependencies"]:
        assert pinned.fullmatch(requirement), requirement


def _imported_top_level_modules(package: Path) -> set[str]:
    modules: set[str] = set()
    for source in package.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    # `_typeshed` exists for type checkers only (imported under TYPE_CHECKING).
    return modules - set(sys.stdlib_module_names) - {"ai_models", "_typeshed"}


def _normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def test_every_distribution_the_package_imports_is_a_pinned_dependency() -> None:
    # The image installs the package alone: a distribution that arrives only as another one's
    # dependency floats to whatever version that one allows.
    package = tomllib.loads((IMAGE_DIR / "pyproject.toml").read_text(encoding="utf-8"))
    declared = {
        _normalized(re.split(r"[=\[]", requirement)[0]) for requirement in package["project"]["dependencies"]
    }
    providers = importlib.metadata.packages_distributions()
    undeclared = {
        module: sorted(providers.get(module, ["(not installed)"]))
        for module in _imported_top_level_modules(IMAGE_DIR / "src" / "ai_models")
        if not {_normalized(name) for name in providers.get(module, [])} & declared
    }
    assert not undeclared, f"add these to images/ai-models/pyproject.toml dependencies: {undeclared}"


def test_the_built_package_carries_the_api_contracts(tmp_path: Path) -> None:
    # The venv uses an editable install; a real wheel only holds what package-data lists. Build
    # from a copy: setuptools writes build/ and *.egg-info next to the sources it builds.
    source = tmp_path / "source"
    shutil.copytree(
        IMAGE_DIR, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests")
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = (tmp_path / "dist").glob("ai_models-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    contracts = {
        path.relative_to(IMAGE_DIR / "src").as_posix()
        for path in (IMAGE_DIR / "src/ai_models/api/openapi").glob("*.yaml")
    }
    assert contracts
    assert contracts <= names
    assert "ai_models/py.typed" in names
