"""Where things are in the repository, so no test hard-codes relative paths."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CRDS_DIR = REPO_ROOT / "crds"
OPENAPI_DIR = REPO_ROOT / "openapi"
DOCS_DIR = REPO_ROOT / "docs"
TEMPLATES_DIR = REPO_ROOT / "templates"
VALUES_FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures" / "values"
