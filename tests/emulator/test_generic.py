"""kubeemu stays a generic API server: it names nothing of this repository's module and imports
nothing of the project around it, so what plays the module's cluster controllers lives in the test
bed (tests/testbed) and kubeemu could serve any project."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import kubeemu

KUBEEMU = Path(kubeemu.__file__).parent
# The module's names (ai_models.names: MODULE, MODULE_NAMESPACE, API_GROUP, the settings prefix, the
# values key) and Deckhouse's, which only a module installed into Deckhouse needs.
MODULE_NAMES = re.compile(r"ai-models|ai_models|aiModels|ai\.deckhouse|AI_MODELS_|\bd8[-:_]|deckhouse", re.I)
# Packages of the project around kubeemu: the runtime, the test bed, the other test helpers.
PROJECT_PACKAGES = {"ai_models", "testbed", "support", "fakes", "cluster", "hooks"}


def sources() -> list[Path]:
    return sorted(KUBEEMU.rglob("*.py"))


def test_kubeemu_names_nothing_of_the_module() -> None:
    found = [
        f"{path.relative_to(KUBEEMU.parent)}:{number}: {line.strip()}"
        for path in sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if MODULE_NAMES.search(line)
    ]
    assert not found, (
        "kubeemu is a generic API server; move module-specific code to tests/testbed "
        "(or pass the name in as a parameter, or use a neutral example name):\n" + "\n".join(found)
    )


def test_kubeemu_imports_nothing_of_the_project() -> None:
    found = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            found += [
                f"{path.relative_to(KUBEEMU.parent)}:{node.lineno}: {module}"
                for module in modules
                if module.split(".")[0] in PROJECT_PACKAGES
            ]
    assert not found, (
        "kubeemu must not import the project around it (tests/testbed may import kubeemu):\n"
        + ("\n".join(found))
    )


def test_the_checks_see_every_source_file() -> None:
    # The scans above are only as good as the file list: a moved package would make them vacuous.
    names = {path.name for path in sources()}
    assert {"server.py", "cluster.py", "pytest_fixtures.py", "cel.py"} <= names
