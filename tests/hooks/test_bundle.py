"""The hooks run with nothing but what the module bundle ships in `lib/python/dist`.

In a cluster addon-operator runs `hooks/<name>.py` with the hook's directory first on `sys.path` and
Deckhouse's `sitecustomize.py` appending `<module root>/lib/python/dist`, which the werf bundle stage
fills with `lib/python/requirements.txt` plus `ai_models` (`images/ai-models`, `--no-deps`). That
stage cannot run here, and the other hook tests run inside the test venv, which has every package,
so a dependency missing from `lib/python/requirements.txt` would pass them and break in a cluster.

This module stands in for the bundle build, offline: it copies exactly the pinned distributions
(their installed files, by their RECORD) and the `ai_models` package out of the venv into a temporary
`lib/python/dist`, then runs every hook in an isolated interpreter (`-I -S`: no site-packages, no
PYTHONPATH) that sees only the hook's directory and that dist, once with `--config` and once on
binding contexts through the same files and environment variables addon-operator uses.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

import jsonpatch
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from support.paths import REPO_ROOT
from support.values import MINIMAL_SETTINGS, MODULE_VALUES_KEY, module_values, validate, values_schema

HOOKS_DIR = REPO_ROOT / "hooks"
HOOK_FILES = sorted(HOOKS_DIR.glob("*.py"))
BUNDLE_REQUIREMENTS = REPO_ROOT / "lib" / "python" / "requirements.txt"
TEST_REQUIREMENTS = REPO_ROOT / "tests" / "requirements.txt"
RUNTIME_PROJECT = REPO_ROOT / "images" / "ai-models"
# Hooks whose every run writes values (see test_hook_files.py).
WRITES_VALUES = {"delivery_values", "internal_tls", "storage_prerequisites"}
# The files addon-operator hands a module hook, named by env vars: the `deckhouse` library reads the
# inputs (module.py) and appends a JSON line per item to the outputs (hook.Output.flush). It never
# writes CONFIG_VALUES_JSON_PATCH_PATH; CONVERSION_/VALIDATING_RESPONSE_PATH are set only for
# conversion and validation bindings, which these hooks do not have.
INPUTS = ("BINDING_CONTEXT_PATH", "VALUES_PATH", "CONFIG_VALUES_PATH")
OUTPUTS = ("METRICS_PATH", "KUBERNETES_PATCH_PATH", "VALUES_JSON_PATCH_PATH")
UNTOUCHED = ("CONFIG_VALUES_JSON_PATCH_PATH",)
# `python -I -S -c BOOTSTRAP <hook> <dist> [args]`: the hook's directory first on sys.path (as for
# `python3 hook.py`), the dist appended (as sitecustomize does), then the hook as `__main__`.
BOOTSTRAP = (
    "import os, runpy, sys; hook, dist = sys.argv[1:3]; sys.argv = [hook, *sys.argv[3:]]; "
    "sys.path.insert(0, os.path.dirname(hook)); sys.path.append(dist); "
    "runpy.run_path(hook, run_name='__main__')"
)
MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")


def read_pins(path: Path) -> dict[str, str]:
    """`name==version` lines (comments and blank lines ignored), keyed by the name as written."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep, f"{path.name}:{number}: {raw!r} is not an exact `name==version` pin"
        pins[name.strip()] = version.strip()
    return pins


def canonical(pins: Mapping[str, str]) -> dict[str, str]:
    return {canonicalize_name(name): version for name, version in pins.items()}


def _copy_distribution(name: str, version: str, dist_dir: Path) -> None:
    try:
        distribution = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        pytest.fail(f"{name} (lib/python/requirements.txt) is not installed in the test venv")
    assert distribution.version == version, (
        f"lib/python/requirements.txt pins {name}=={version}, the test venv has {distribution.version}: "
        "keep the pin equal to tests/requirements.txt"
    )
    site_packages = Path(str(distribution.locate_file("")))
    assert distribution.files, f"{name} has no RECORD: cannot tell its files"
    for file in distribution.files:
        relative = PurePosixPath(str(file))
        if relative.parts[0] == "..":  # console scripts in bin/: not part of --target's importable tree
            continue
        source = site_packages / relative
        if not source.exists():
            assert "__pycache__" in relative.parts, f"{name}: {relative} is in RECORD but not installed"
            continue
        target = dist_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def _copy_runtime_package(dist_dir: Path) -> None:
    """What `pip install --no-deps --target dist images/ai-models` leaves: the package and its metadata
    (`ai_models/__init__.py` reads its version from the dist-info)."""
    project = tomllib.loads((RUNTIME_PROJECT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    shutil.copytree(
        RUNTIME_PROJECT / "src" / "ai_models",
        dist_dir / "ai_models",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    dist_info = dist_dir / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n", encoding="utf-8"
    )
    (dist_info / "INSTALLER").write_text("pip\n", encoding="utf-8")


def build_dist(pins: Mapping[str, str], dist_dir: Path) -> Path:
    """A `lib/python/dist` as the bundle stage builds it, from the files installed in the test venv."""
    dist_dir.mkdir(parents=True)
    for name, version in pins.items():
        _copy_distribution(name, version, dist_dir)
    _copy_runtime_package(dist_dir)
    return dist_dir


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_dist(read_pins(BUNDLE_REQUIREMENTS), tmp_path_factory.mktemp("module") / "lib/python/dist")


def run_hook(
    hook: Path, dist: Path, *args: str, env: Mapping[str, str] | None = None, cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", BOOTSTRAP, str(hook), str(dist), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})},
        timeout=120,
    )


def assert_ran(result: subprocess.CompletedProcess[str], hook: Path) -> None:
    """Exit 0, or a failure that names the module missing from the bundle and the pin to add."""
    if result.returncode == 0:
        return
    lines = [f"{hook.name} {' '.join(result.args[7:])} exited {result.returncode} with only lib/python/dist"]
    match = MISSING_MODULE.search(result.stderr)
    if match:
        module = match.group(1)
        pins = canonical(read_pins(TEST_REQUIREMENTS))
        providers = metadata.packages_distributions().get(module.split(".")[0], [])
        fixes = [
            f"{name}=={pins.get(canonicalize_name(name)) or metadata.version(name)}" for name in providers
        ]
        fix = " or ".join(fixes) or f"the distribution that provides {module}"
        lines.append(f"the bundle lacks the module {module!r}: add {fix} to lib/python/requirements.txt")
    lines.append("stderr:\n" + result.stderr)
    pytest.fail("\n".join(lines))


def binding_contexts(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What addon-operator sends a hook on start: Synchronization for each kubernetes binding that
    runs on it, then beforeHelm or the schedule; every snapshot empty (a fresh cluster)."""
    kubernetes = config.get("kubernetes", [])
    snapshots: dict[str, list[Any]] = {binding["name"]: [] for binding in kubernetes}
    contexts: list[dict[str, Any]] = [
        {"binding": binding["name"], "type": "Synchronization", "objects": [], "snapshots": snapshots}
        for binding in kubernetes
        if binding.get("executeHookOnSynchronization", True)
    ]
    if "beforeHelm" in config:
        contexts.append({"binding": "beforeHelm", "snapshots": snapshots})
    contexts.extend(
        {"binding": item["name"], "type": "Schedule", "snapshots": snapshots}
        for item in config.get("schedule", [])
    )
    return copy.deepcopy(contexts)


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    assert path.exists(), f"{path.name} was not written"
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert all(isinstance(item, dict) for item in items), items
    return items


@dataclass
class HookRun:
    initial_values: dict[str, Any]
    outputs: dict[str, list[dict[str, Any]]]


def run_on_binding_contexts(hook: Path, dist: Path, workdir: Path, config: Mapping[str, Any]) -> HookRun:
    """Run a hook the way addon-operator does: inputs and outputs as files named by env vars."""
    workdir.mkdir(parents=True)
    values = module_values()
    inputs = {
        "BINDING_CONTEXT_PATH": binding_contexts(config),
        "VALUES_PATH": values,
        "CONFIG_VALUES_PATH": {"global": {}, MODULE_VALUES_KEY: copy.deepcopy(MINIMAL_SETTINGS)},
    }
    env = {}
    for variable in INPUTS:
        env[variable] = str(workdir / f"{variable.lower()}.json")
        Path(env[variable]).write_text(json.dumps(inputs[variable]), encoding="utf-8")
    for variable in (*OUTPUTS, *UNTOUCHED):
        env[variable] = str(workdir / variable.lower())
    result = run_hook(hook, dist, env=env, cwd=workdir)
    assert_ran(result, hook)
    for variable in UNTOUCHED:
        assert not Path(env[variable]).exists() or not Path(env[variable]).read_text(encoding="utf-8")
    return HookRun(values, {variable: read_json_lines(Path(env[variable])) for variable in OUTPUTS})


def test_bundle_pins_are_exact_and_those_of_the_test_bed() -> None:
    bundle_pins = canonical(read_pins(BUNDLE_REQUIREMENTS))
    test_pins = canonical(read_pins(TEST_REQUIREMENTS))
    assert {"deckhouse", "cryptography"} <= set(bundle_pins)
    drifted = {name: (v, test_pins.get(name)) for name, v in bundle_pins.items() if test_pins.get(name) != v}
    assert drifted == {}, "lib/python/requirements.txt vs tests/requirements.txt: {name: (bundle, tests)}"


def unpinned_requirements(pins: Mapping[str, str]) -> list[str]:
    """Requirements of the pinned distributions (markers of this Python, no extras) left unpinned,
    each with the pin to add (the version of tests/requirements.txt)."""
    pinned = canonical(pins)
    test_pins = canonical(read_pins(TEST_REQUIREMENTS))
    missing: list[str] = []
    for name in pins:
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            needed = canonicalize_name(requirement.name)
            if needed not in pinned:
                missing.append(
                    f"{name} requires {requirement}: add {needed}=={test_pins.get(needed)} "
                    "to lib/python/requirements.txt"
                )
    return missing


def test_pinned_distributions_bring_everything_they_require() -> None:
    """Install-time view (what pip would have pulled without --no-deps); the hook runs below are
    the import-time view."""
    missing = unpinned_requirements(read_pins(BUNDLE_REQUIREMENTS))
    assert missing == [], "lib/python/requirements.txt is not closed:\n" + "\n".join(missing)


@pytest.mark.parametrize("hook", HOOK_FILES, ids=lambda path: path.stem)
def test_hook_prints_its_config_from_the_bundle_alone(hook: Path, bundle: Path, tmp_path: Path) -> None:
    result = run_hook(hook, bundle, "--config", cwd=tmp_path)
    assert_ran(result, hook)
    config = json.loads(result.stdout)
    assert config["configVersion"] == "v1"


@pytest.mark.parametrize("hook", HOOK_FILES, ids=lambda path: path.stem)
def test_hook_runs_on_binding_contexts_from_the_bundle_alone(
    hook: Path, bundle: Path, tmp_path: Path
) -> None:
    printed = run_hook(hook, bundle, "--config", cwd=tmp_path)
    assert_ran(printed, hook)
    config = json.loads(printed.stdout)
    run = run_on_binding_contexts(hook, bundle, tmp_path / "run", config)
    patches = run.outputs["VALUES_JSON_PATCH_PATH"]
    patched = jsonpatch.apply_patch(copy.deepcopy(run.initial_values), patches)
    validate(values_schema(), patched[MODULE_VALUES_KEY])
    for patch in patches:
        assert patch["path"].startswith(f"/{MODULE_VALUES_KEY}/internal/"), patch["path"]
    if hook.stem in WRITES_VALUES:
        assert patches
    for operation in run.outputs["KUBERNETES_PATCH_PATH"]:
        assert operation["operation"], operation
    for metric in run.outputs["METRICS_PATH"]:
        assert metric.get("action") in {"set", "expire"} or "value" in metric, metric


def _without(pins: Mapping[str, str], *names: str) -> dict[str, str]:
    dropped = {canonicalize_name(name) for name in names}
    return {name: version for name, version in pins.items() if canonicalize_name(name) not in dropped}


def test_a_dependency_missing_from_the_bundle_is_named_with_its_fix(tmp_path: Path) -> None:
    """The checker itself: a bundle without cryptography breaks internal_tls (imports lib.tls), and the
    failure names the module and the pin to add. It also shows the venv's site-packages stay out of reach."""
    pins = read_pins(BUNDLE_REQUIREMENTS)
    version = canonical(pins)["cryptography"]
    dist = build_dist(_without(pins, "cryptography"), tmp_path / "dist")
    hook = HOOKS_DIR / "internal_tls.py"
    result = run_hook(hook, dist, "--config", cwd=tmp_path)
    assert result.returncode != 0
    fix = f"add cryptography=={version} to lib/python/requirements.txt"
    expected = f"the bundle lacks the module 'cryptography': {fix}"
    with pytest.raises(pytest.fail.Exception, match=re.escape(expected)) as failure:
        assert_ran(result, hook)
    assert "ModuleNotFoundError" in str(failure.value)


def test_an_unpinned_requirement_of_a_pinned_distribution_is_named() -> None:
    pins = read_pins(BUNDLE_REQUIREMENTS)
    version = canonical(read_pins(TEST_REQUIREMENTS))["pycparser"]
    assert unpinned_requirements(_without(pins, "pycparser")) == [
        f'cffi requires pycparser; implementation_name != "PyPy": add pycparser=={version} '
        "to lib/python/requirements.txt"
    ]
