"""The hooks run with what the module bundle ships in `lib/python/dist`, and on the platform's interpreter.

In a cluster addon-operator runs `hooks/<name>.py` with the hook's directory first on `sys.path` and
Deckhouse's `sitecustomize.py` APPENDING `<module root>/lib/python/dist`, which the werf bundle stage
fills with `lib/python/requirements.txt` plus `ai_models` (`images/ai-models`, `--no-deps`). So the
Deckhouse image's own site-packages (cryptography, pyOpenSSL, bcrypt, cffi, pycparser) come BEFORE the
bundle's pins and shadow them (D126). That stage cannot run here, and the other hook tests run inside
the test venv, which has every package at the bundle's versions, so a dependency missing from
`lib/python/requirements.txt`, or an API the image's older cryptography lacks, would pass them and
break in a cluster.

This module stands in for the bundle build, offline: it copies exactly the pinned distributions
(their installed files, by their RECORD) and the `ai_models` package out of the venv into a temporary
`lib/python/dist`, then runs every hook in an isolated interpreter (`-I -S`: no site-packages, no
PYTHONPATH), once with `--config` and once on binding contexts through the same files and environment
variables addon-operator uses, in two layouts: the hook's directory and the dist alone (the bundle is
complete), and the platform's order, the image's packages (tests/platform-requirements.txt, installed
by `make install` into `<venv>/platform-site`) before the dist (the hooks work with what shadows it).
The platform's Python is 3.12 and the venv's may differ: the code the hooks import is checked for it.
"""

from __future__ import annotations

import ast
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
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from support.paths import REPO_ROOT
from support.values import MINIMAL_SETTINGS, MODULE_VALUES_KEY, module_values, validate, values_schema

HOOKS_DIR = REPO_ROOT / "hooks"
HOOK_FILES = sorted(HOOKS_DIR.glob("*.py"))
BUNDLE_REQUIREMENTS = REPO_ROOT / "lib" / "python" / "requirements.txt"
TEST_REQUIREMENTS = REPO_ROOT / "tests" / "requirements.txt"
PLATFORM_REQUIREMENTS = REPO_ROOT / "tests" / "platform-requirements.txt"
# Where `make install` puts them (pip --target): beside the venv's site-packages, not on its path.
PLATFORM_SITE = Path(sys.prefix) / "platform-site"
RUNTIME_PROJECT = REPO_ROOT / "images" / "ai-models"
RUNTIME_SOURCES = RUNTIME_PROJECT / "src"
# The Deckhouse image's interpreter (base/python-3.12 = python-v3.12.10, D126) and the environment it
# sets for every process (common-base imageSpec), which the image's cryptography reads.
PLATFORM_PYTHON = (3, 12, 10)
PLATFORM_ENV = {"CRYPTOGRAPHY_OPENSSL_NO_LEGACY": "true"}
# Standard modules Python 3.12 no longer has (PEP 594 and PEP 632 removals due by 3.12).
REMOVED_BY_PLATFORM_PYTHON = {"asynchat", "asyncore", "distutils", "imp", "smtpd"}
# Hooks whose every run writes values (see test_hook_files.py).
WRITES_VALUES = {"internal_tls"}
# The files addon-operator hands a module hook, named by env vars: the `deckhouse` library reads the
# inputs (module.py) and appends a JSON line per item to the outputs (hook.Output.flush). It never
# writes CONFIG_VALUES_JSON_PATCH_PATH; CONVERSION_/VALIDATING_RESPONSE_PATH are set only for
# conversion and validation bindings, which these hooks do not have.
INPUTS = ("BINDING_CONTEXT_PATH", "VALUES_PATH", "CONFIG_VALUES_PATH")
OUTPUTS = ("METRICS_PATH", "KUBERNETES_PATCH_PATH", "VALUES_JSON_PATCH_PATH")
UNTOUCHED = ("CONFIG_VALUES_JSON_PATCH_PATH",)
# `python -I -S -c BOOTSTRAP <hook> <platform site or ""> <dist> [args]`: the hook's directory first
# on sys.path (as for `python3 hook.py`), then the stdlib, the platform's site-packages (as `site` adds
# them, .pth files included), the dist appended last (as sitecustomize does), then the hook as `__main__`.
BOOTSTRAP = (
    "import os, runpy, site, sys; hook, platform, dist = sys.argv[1:4]; sys.argv = [hook, *sys.argv[4:]]; "
    "sys.path.insert(0, os.path.dirname(hook)); platform and site.addsitedir(platform); "
    "sys.path.append(dist); runpy.run_path(hook, run_name='__main__')"
)
ARGS_START = 8  # where the hook's own arguments begin in the command line above
LAYOUTS = ("bundle", "platform")
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


def installed_versions(site: Path) -> dict[str, str]:
    return {
        canonicalize_name(distribution.metadata["Name"]): distribution.version
        for distribution in metadata.distributions(path=[str(site)])
    }


def platform_site() -> Path:
    """<venv>/platform-site holding exactly tests/platform-requirements.txt, or a failure saying how."""
    pins = canonical(read_pins(PLATFORM_REQUIREMENTS))
    installed = installed_versions(PLATFORM_SITE) if PLATFORM_SITE.is_dir() else {}
    if installed != pins:
        pytest.fail(
            f"{PLATFORM_SITE} holds {installed or 'nothing'}, tests/platform-requirements.txt pins {pins}: "
            "run `make install` (it installs them there with pip --target)"
        )
    return PLATFORM_SITE


def shadowed_pins() -> list[str]:
    """`name==platform version (lib/python/requirements.txt: bundle version)` for each name in both."""
    bundle = canonical(read_pins(BUNDLE_REQUIREMENTS))
    return [
        f"{name}=={version} (lib/python/requirements.txt: {bundle[canonicalize_name(name)]})"
        for name, version in read_pins(PLATFORM_REQUIREMENTS).items()
        if canonicalize_name(name) in bundle
    ]


def site_for(layout: str) -> Path | None:
    return platform_site() if layout == "platform" else None


def run_hook(
    hook: Path,
    dist: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path,
    platform: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """`platform`: the Deckhouse image's site-packages, put before the dist with the image's env."""
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", BOOTSTRAP, str(hook), str(platform or ""), str(dist), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            **(PLATFORM_ENV if platform else {}),
            **(env or {}),
        },
        timeout=120,
    )


def assert_ran(result: subprocess.CompletedProcess[str], hook: Path) -> None:
    """Exit 0, or a failure that names the module missing from the bundle and the pin to add, or the
    platform's packages that shadow the bundle's."""
    if result.returncode == 0:
        return
    platform = result.args[6]
    where = (
        f"the Deckhouse image's packages ({platform}) before lib/python/dist"
        if platform
        else "only lib/python/dist"
    )
    args = " ".join(f" {arg}" for arg in result.args[ARGS_START:])
    lines = [f"{hook.name}{args} exited {result.returncode} with {where}"]
    if platform:
        lines.append(
            f"in a cluster the image's packages shadow the bundle's: {', '.join(shadowed_pins())} "
            "(tests/platform-requirements.txt, D126); the hook must use only what those versions have"
        )
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
    runs on it, then beforeHelm (afterDeleteHelm, when the module is disabled) or the schedule;
    every snapshot empty (a fresh cluster)."""
    kubernetes = config.get("kubernetes", [])
    snapshots: dict[str, list[Any]] = {binding["name"]: [] for binding in kubernetes}
    contexts: list[dict[str, Any]] = [
        {"binding": binding["name"], "type": "Synchronization", "objects": [], "snapshots": snapshots}
        for binding in kubernetes
        if binding.get("executeHookOnSynchronization", True)
    ]
    for binding in ("beforeHelm", "afterDeleteHelm"):
        if binding in config:
            contexts.append({"binding": binding, "snapshots": snapshots})
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
    stderr: str


def run_on_binding_contexts(
    hook: Path,
    dist: Path,
    workdir: Path,
    config: Mapping[str, Any],
    *,
    platform: Path | None = None,
    values: dict[str, Any] | None = None,
) -> HookRun:
    """Run a hook the way addon-operator does: inputs and outputs as files named by env vars;
    `values`: what the module's values are (those of a fresh install by default)."""
    workdir.mkdir(parents=True)
    values = module_values() if values is None else values
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
    result = run_hook(hook, dist, env=env, cwd=workdir, platform=platform)
    assert_ran(result, hook)
    for variable in UNTOUCHED:
        assert not Path(env[variable]).exists() or not Path(env[variable]).read_text(encoding="utf-8")
    outputs = {variable: read_json_lines(Path(env[variable])) for variable in OUTPUTS}
    return HookRun(values, outputs, result.stderr)


def test_bundle_pins_are_exact_and_those_of_the_test_bed() -> None:
    bundle_pins = canonical(read_pins(BUNDLE_REQUIREMENTS))
    test_pins = canonical(read_pins(TEST_REQUIREMENTS))
    assert {"deckhouse", "cryptography"} <= set(bundle_pins)
    drifted = {name: (v, test_pins.get(name)) for name, v in bundle_pins.items() if test_pins.get(name) != v}
    assert drifted == {}, "lib/python/requirements.txt vs tests/requirements.txt: {name: (bundle, tests)}"


def unpinned_requirements(
    pins: Mapping[str, str], site: Path | None = None, pin_file: Path = BUNDLE_REQUIREMENTS
) -> list[str]:
    """Requirements of the pinned distributions (markers of this Python, no extras) left unpinned,
    each with the pin to add to `pin_file` (the version of tests/requirements.txt); `site`: read the
    distributions there instead of in the venv."""
    pinned = canonical(pins)
    test_pins = canonical(read_pins(TEST_REQUIREMENTS))
    missing: list[str] = []
    for name in pins:
        if site is None:
            requires = metadata.requires(name)
        else:
            (distribution,) = (
                found
                for found in metadata.distributions(path=[str(site)])
                if canonicalize_name(found.metadata["Name"]) == canonicalize_name(name)
            )
            requires = distribution.requires
        for line in requires or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            needed = canonicalize_name(requirement.name)
            if needed not in pinned:
                missing.append(
                    f"{name} requires {requirement}: add {needed}=={test_pins.get(needed) or '<version>'} "
                    f"to {pin_file.relative_to(REPO_ROOT)}"
                )
    return missing


def test_pinned_distributions_bring_everything_they_require() -> None:
    """Install-time view (what pip would have pulled without --no-deps); the hook runs below are
    the import-time view."""
    missing = unpinned_requirements(read_pins(BUNDLE_REQUIREMENTS))
    assert missing == [], "lib/python/requirements.txt is not closed:\n" + "\n".join(missing)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("hook", HOOK_FILES, ids=lambda path: path.stem)
def test_hook_prints_its_config(hook: Path, layout: str, bundle: Path, tmp_path: Path) -> None:
    result = run_hook(hook, bundle, "--config", cwd=tmp_path, platform=site_for(layout))
    assert_ran(result, hook)
    config = json.loads(result.stdout)
    assert config["configVersion"] == "v1"


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("hook", HOOK_FILES, ids=lambda path: path.stem)
def test_hook_runs_on_binding_contexts(hook: Path, layout: str, bundle: Path, tmp_path: Path) -> None:
    platform = site_for(layout)
    printed = run_hook(hook, bundle, "--config", cwd=tmp_path, platform=platform)
    assert_ran(printed, hook)
    config = json.loads(printed.stdout)
    run = run_on_binding_contexts(hook, bundle, tmp_path / "run", config, platform=platform)
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


def test_platform_pins_are_exact_closed_and_installed() -> None:
    """tests/platform-requirements.txt is installed with --no-deps, so it must be closed itself."""
    pins = read_pins(PLATFORM_REQUIREMENTS)
    assert {"cryptography", "cffi", "pycparser"} <= set(canonical(pins))
    site = platform_site()
    missing = unpinned_requirements(pins, site, PLATFORM_REQUIREMENTS)
    assert missing == [], "tests/platform-requirements.txt is not closed:\n" + "\n".join(missing)


PROBE = (
    "import json, sys, cryptography, cffi\n"
    "print(json.dumps({name: [module.__version__, module.__file__] for name, module in "
    "(('cryptography', cryptography), ('cffi', cffi))}))\n"
)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_platform_packages_shadow_the_bundle_pins(layout: str, bundle: Path, tmp_path: Path) -> None:
    """What a hook imports: the image's cryptography and cffi on the platform, the dist's otherwise."""
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    platform = site_for(layout)
    result = run_hook(probe, bundle, cwd=tmp_path, platform=platform)
    assert_ran(result, probe)
    imported = json.loads(result.stdout)
    expected = canonical(read_pins(PLATFORM_REQUIREMENTS if platform else BUNDLE_REQUIREMENTS))
    root = platform or bundle
    for name, (version, file) in imported.items():
        assert (version, Path(file).is_relative_to(root)) == (expected[name], True), (name, file)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_internal_tls_keeps_its_pairs_on_a_second_run(layout: str, bundle: Path, tmp_path: Path) -> None:
    """The first run issues (generate_ca, issue_certificate); the second reads them back from values
    and keeps them (usable_ca, usable_certificate: parsing, dates, signature, names), so every call
    of hooks/lib/tls.py runs with the image's cryptography too."""
    hook = HOOKS_DIR / "internal_tls.py"
    platform = site_for(layout)
    config = json.loads(run_hook(hook, bundle, "--config", cwd=tmp_path, platform=platform).stdout)
    first = run_on_binding_contexts(hook, bundle, tmp_path / "first", config, platform=platform)
    issued = jsonpatch.apply_patch(first.initial_values, first.outputs["VALUES_JSON_PATCH_PATH"])
    assert "issuing a new module CA" in first.stderr
    second = run_on_binding_contexts(
        hook, bundle, tmp_path / "second", config, platform=platform, values=copy.deepcopy(issued)
    )
    assert "issuing" not in second.stderr, second.stderr
    kept = jsonpatch.apply_patch(copy.deepcopy(issued), second.outputs["VALUES_JSON_PATCH_PATH"])
    assert kept[MODULE_VALUES_KEY]["internal"] == issued[MODULE_VALUES_KEY]["internal"]


def _tls_calling(text: str, call: str) -> str:
    """hooks/lib/tls.py with the subject names built by `call` (an API of cryptography) instead."""
    original = "return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])"
    assert text.count(original) == 1, "hooks/lib/tls.py::_name changed: update this test"
    return text.replace(original, call)


def test_an_api_the_platform_lacks_fails_the_hook_on_the_platform_only(bundle: Path, tmp_path: Path) -> None:
    """The checker itself: `x509.Name.from_bytes` is in the bundle's cryptography, not in the image's
    44.0.1. A hook calling it passes the bundle-only run and fails the platform run, which names the
    packages that shadow the bundle."""
    hooks = tmp_path / "hooks"
    shutil.copytree(HOOKS_DIR, hooks, ignore=shutil.ignore_patterns("__pycache__"))
    tls = hooks / "lib" / "tls.py"
    name = "x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])"
    tls.write_text(
        _tls_calling(tls.read_text(encoding="utf-8"), f"return x509.Name.from_bytes({name}.public_bytes())"),
        encoding="utf-8",
    )
    hook = hooks / "internal_tls.py"
    config = json.loads(run_hook(hook, bundle, "--config", cwd=tmp_path).stdout)
    run = run_on_binding_contexts(hook, bundle, tmp_path / "bundle", config)
    assert run.outputs["VALUES_JSON_PATCH_PATH"]
    version = canonical(read_pins(PLATFORM_REQUIREMENTS))["cryptography"]
    with pytest.raises(pytest.fail.Exception) as failure:
        run_on_binding_contexts(hook, bundle, tmp_path / "platform", config, platform=platform_site())
    message = str(failure.value)
    assert "AttributeError: type object 'Name' has no attribute 'from_bytes'" in message, message
    bundled = canonical(read_pins(BUNDLE_REQUIREMENTS))["cryptography"]
    shadowing = f"shadow the bundle's: cryptography=={version} (lib/python/requirements.txt: {bundled})"
    assert shadowing in message, message


def python_version_problems(path: Path, source: str, version: tuple[int, int]) -> list[str]:
    """Why `source` would not run on Python `version`: syntax it lacks, standard modules it removed."""
    try:
        tree = ast.parse(source, str(path), feature_version=version)
    except SyntaxError as error:
        return [f"{path}:{error.lineno}: not Python {version[0]}.{version[1]} syntax: {error.msg}"]
    return [
        f"{path}:{node.lineno}: imports {module}, which Python 3.12 removed"
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for module in _imported(node)
        if module.split(".")[0] in REMOVED_BY_PLATFORM_PYTHON
    ]


def _imported(node: ast.AST) -> list[str]:
    """Absolute module names an import statement may load (`from a import b`: a, and a.b if a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return []


def _local_source(module: str) -> Path | None:
    """The file of `module` among the hooks' own (`lib.*`) and ai_models' sources, if it is one."""
    for root in (HOOKS_DIR, RUNTIME_SOURCES):
        base = root.joinpath(*module.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def hook_import_closure() -> list[Path]:
    """Every file of the repository a hook run imports: the hooks, lib.*, the ai_models modules they
    reach (statically, through import statements) and the packages' __init__ files on the way."""
    seen: set[Path] = set()
    pending = list(HOOK_FILES)
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for module in _imported(node):
                parts = module.split(".")
                for depth in range(1, len(parts) + 1):
                    found = _local_source(".".join(parts[:depth]))
                    if found is not None:
                        pending.append(found)
    return sorted(seen)


def test_the_code_the_hooks_import_suits_the_platform_python() -> None:
    files = hook_import_closure()
    assert HOOKS_DIR / "lib" / "tls.py" in files
    assert RUNTIME_SOURCES / "ai_models" / "names.py" in files
    assert RUNTIME_SOURCES / "ai_models" / "__init__.py" in files
    version = PLATFORM_PYTHON[:2]
    problems = [
        problem
        for path in files
        for problem in python_version_problems(
            path.relative_to(REPO_ROOT), path.read_text(encoding="utf-8"), version
        )
    ]
    assert problems == [], "\n".join(problems)


def test_every_bundled_distribution_supports_the_platform_python() -> None:
    platform = ".".join(map(str, PLATFORM_PYTHON))
    requires = {
        name: metadata.metadata(name).json.get("requires_python", "")
        for name in read_pins(BUNDLE_REQUIREMENTS)
    }
    project = tomllib.loads((RUNTIME_PROJECT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requires[project["name"]] = project.get("requires-python", "")
    unsupported = {name: spec for name, spec in requires.items() if not SpecifierSet(spec).contains(platform)}
    assert unsupported == {}, f"Requires-Python that exclude the platform's Python {platform}: {unsupported}"


def test_the_python_version_check_names_what_the_platform_lacks() -> None:
    """The checker itself: removed modules by name and line; syntax newer than the version asked for
    (shown with 3.9 and `match`, as the venv cannot parse syntax newer than its own)."""
    path = Path("hooks/example.py")
    assert python_version_problems(path, "import imp\nfrom distutils import util\n", (3, 12)) == [
        "hooks/example.py:1: imports imp, which Python 3.12 removed",
        "hooks/example.py:2: imports distutils, which Python 3.12 removed",
        "hooks/example.py:2: imports distutils.util, which Python 3.12 removed",
    ]
    (problem,) = python_version_problems(path, "match x:\n    case 1:\n        pass\n", (3, 9))
    assert problem.startswith("hooks/example.py:"), problem
    assert "not Python 3.9 syntax: Pattern matching" in problem, problem
