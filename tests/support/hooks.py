"""Load one of the module's hooks (`hooks/<name>.py`) as addon-operator runs it: with the hooks
directory first on `sys.path`, so its `lib.*` imports resolve. Each hook is loaded once."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

HOOKS_DIR = Path(__file__).resolve().parents[2] / "hooks"


@cache
def load_hook(name: str) -> ModuleType:
    if str(HOOKS_DIR) not in sys.path:
        sys.path.insert(0, str(HOOKS_DIR))
    spec = importlib.util.spec_from_file_location(f"ai_models_hook_{name}", HOOKS_DIR / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
