"""The hash-locked requirement files the werf build installs, and their generator.

The image and the hooks' dist are built with `pip install --require-hashes --no-deps`, so each lock
must name every distribution the roots need (transitively, for the build's interpreter) at the
version tests/requirements.txt pins, each with the sha256 of every wheel pip may pick there.

    make locks     # PYTHONPATH=tests .venv/bin/python -m support.locks: rewrite them (asks PyPI)

Whoever changes a pin in tests/requirements.txt, lib/python/requirements.txt or
images/ai-models/pyproject.toml re-runs it; tests/module/test_werf_build.py fails until then. The
dependency closure comes from the metadata of the distributions installed in this environment
(offline: what the tests ran with), with markers evaluated for the build's target below.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name, parse_wheel_filename

from support.paths import REPO_ROOT

# The interpreter of the pinned Deckhouse images (base/python-3.12, and the Python 3.12 of the ALT
# p11 builder the build stages run pip with); see docs/internal/DECISIONS.md D120.
TARGET_PYTHON = (3, 12)
TARGET_ENVIRONMENT = {
    "implementation_name": "cpython",
    "implementation_version": "3.12.0",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_python_implementation": "CPython",
    "platform_system": "Linux",
    "python_full_version": "3.12.0",
    "python_version": "3.12",
    "sys_platform": "linux",
}
# The wheels pip may choose for base/python-3.12, a CPython built against musl 1.2 (Deckhouse's
# .werf/defines/base.tmpl copies ld-musl-x86_64.so.1 from it): musllinux 1.2 down to 1.0, never a
# manylinux (glibc) wheel, which would not load there (D120, issue 24).
TARGET_PLATFORMS = [f"musllinux_1_{minor}_x86_64" for minor in range(2, -1, -1)]
TARGET = "CPython 3.12 on musllinux 1.2 x86_64, as base/python-3.12"
PINS_FILE = REPO_ROOT / "tests" / "requirements.txt"
PYPROJECT = REPO_ROOT / "images" / "ai-models" / "pyproject.toml"
HOOK_REQUIREMENTS = REPO_ROOT / "lib" / "python" / "requirements.txt"
SIMPLE_INDEX = "https://pypi.org/simple"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)\s*$")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
_WHEELS_PREFIX = "# wheels of "


@dataclass(frozen=True)
class Lock:
    """One lock file and the requirements it closes over."""

    path: Path
    purpose: str
    roots: tuple[str, ...]


@dataclass(frozen=True)
class Locked:
    name: str
    version: str
    hashes: tuple[str, ...]


def pins(path: Path = PINS_FILE) -> dict[str, str]:
    """`name==version` lines of a requirements file, keyed by canonical name."""
    found: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _PIN.match(line)
        if match is None:
            raise ValueError(f"{path}: {line!r} is not a `name==version` pin")
        found[canonicalize_name(match[1])] = match[2]
    return found


def runtime_roots() -> tuple[str, ...]:
    project = tomllib.loads(PYPROJECT.read_text())
    return tuple(project["project"]["dependencies"])


def build_roots() -> tuple[str, ...]:
    project = tomllib.loads(PYPROJECT.read_text())
    return tuple(project["build-system"]["requires"])


def hook_roots() -> tuple[str, ...]:
    return tuple(f"{name}=={version}" for name, version in pins(HOOK_REQUIREMENTS).items())


def locks() -> tuple[Lock, ...]:
    return (
        Lock(
            REPO_ROOT / "images" / "ai-models" / "requirements.lock",
            "runtime dependencies of images/ai-models (the ai-models image)",
            runtime_roots(),
        ),
        Lock(
            REPO_ROOT / "images" / "ai-models" / "build-requirements.lock",
            "build backend of images/ai-models (pip install --no-build-isolation)",
            build_roots(),
        ),
        Lock(
            REPO_ROOT / "lib" / "python" / "requirements.lock",
            "hook dependencies of lib/python/requirements.txt (the bundle's lib/python/dist)",
            hook_roots(),
        ),
    )


def _applies(requirement: Requirement, extras: Iterable[str]) -> bool:
    if requirement.marker is None:
        return True
    options = [*extras] or [""]
    return any(_evaluate(requirement.marker, extra) for extra in options)


def _evaluate(marker: Marker, extra: str) -> bool:
    return marker.evaluate({**TARGET_ENVIRONMENT, "extra": extra})


def closure(roots: Iterable[str], versions: Mapping[str, str]) -> dict[str, str]:
    """Every distribution `roots` need on the target, name -> pinned version.

    Raises ValueError naming a distribution that is unpinned or not installed here (the closure
    reads the installed metadata, so the environment must hold what the tests ran with)."""
    result: dict[str, str] = {}
    pending = [Requirement(root) for root in roots]
    seen_extras: dict[str, set[str]] = {}
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        extras = set(requirement.extras)
        if name in result and extras <= seen_extras.get(name, set()):
            continue
        version = versions.get(name)
        if version is None:
            raise ValueError(
                f"{requirement.name} is needed by the build but tests/requirements.txt "
                "does not pin it: add the pin"
            )
        try:
            installed = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError as error:
            raise ValueError(f"{requirement.name} is not installed here: run `make install`") from error
        if canonicalize_name(installed.version) != canonicalize_name(version):
            raise ValueError(
                f"{requirement.name} {installed.version} is installed but {version} is pinned: "
                "run `make install`"
            )
        if not requirement.specifier.contains(version, prereleases=True):
            raise ValueError(
                f"{requirement} does not allow the pinned {requirement.name}=={version}: align the pins"
            )
        result[name] = version
        seen_extras.setdefault(name, set()).update(extras)
        for raw in installed.requires or []:
            child = Requirement(raw)
            if _applies(child, extras):
                pending.append(child)
    return dict(sorted(result.items()))


def target_tags() -> set[Tag]:
    interpreter = f"cp{TARGET_PYTHON[0]}{TARGET_PYTHON[1]}"
    return {
        *cpython_tags(TARGET_PYTHON, platforms=TARGET_PLATFORMS),
        *compatible_tags(TARGET_PYTHON, interpreter=interpreter, platforms=TARGET_PLATFORMS),
    }


def parse_lock(path: Path) -> dict[str, Locked]:
    """A lock file's entries (requirement lines joined over `\\` continuations)."""
    text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
    entries: dict[str, Locked] = {}
    for raw in re.sub(r"\\\n", " ", text).splitlines():
        line = raw.strip()
        if not line:
            continue
        head, *_ = line.split()
        name, _, version = head.partition("==")
        if not version:
            raise ValueError(f"{path}: {head!r} is not pinned with ==")
        entries[canonicalize_name(name)] = Locked(name, version, tuple(_HASH.findall(line)))
    return entries


def _wheels(name: str, version: str, tags: set[Tag]) -> list[tuple[str, str]]:
    """(file name, sha256) of every wheel of `name==version` on PyPI that the target may install."""
    request = urllib.request.Request(
        f"{SIMPLE_INDEX}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    wheels: list[tuple[str, str]] = []
    for entry in files:
        filename = entry["filename"]
        if not filename.endswith(".whl") or entry.get("yanked") or f"-{version}-" not in filename:
            continue
        wheel_name, wheel_version, _, wheel_tags = parse_wheel_filename(filename)
        if canonicalize_name(wheel_name) != name or str(wheel_version) != version:
            continue
        if wheel_tags & tags:
            wheels.append((filename, entry["hashes"]["sha256"]))
    if not wheels:
        raise ValueError(f"{name}=={version} has no wheel for {TARGET} on PyPI: pin a version that has one")
    return sorted(wheels, key=lambda wheel: wheel[1])


def lock_wheels(path: Path) -> dict[str, tuple[str, ...]]:
    """The wheel files each entry's hashes are of, from the `# wheels:` line above the entry."""
    found: dict[str, tuple[str, ...]] = {}
    for line in path.read_text().splitlines():
        if line.startswith(_WHEELS_PREFIX):
            head, _, files = line.removeprefix(_WHEELS_PREFIX).partition(": ")
            found[canonicalize_name(head.partition("==")[0])] = tuple(files.split(", "))
    return found


def render(lock: Lock, entries: Mapping[str, tuple[str, list[tuple[str, str]]]]) -> str:
    lines = [
        f"# Hash-locked {lock.purpose}.",
        "# Generated by `make locks` (tests/support/locks.py) from the pins of tests/requirements.txt;",
        f"# do not edit. Target: {TARGET} (docs/internal/DECISIONS.md D120).",
    ]
    for name, (version, wheels) in entries.items():
        lines.append(f"{_WHEELS_PREFIX}{name}=={version}: " + ", ".join(filename for filename, _ in wheels))
        lines.append(f"{name}=={version} \\")
        lines.extend(
            f"    --hash=sha256:{digest}" + (" \\" if i < len(wheels) - 1 else "")
            for i, (_, digest) in enumerate(wheels)
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    versions = pins()
    tags = target_tags()
    for lock in locks():
        wanted = closure(lock.roots, versions)
        entries = {name: (version, _wheels(name, version, tags)) for name, version in wanted.items()}
        lock.path.write_text(render(lock, entries))
        print(f"{lock.path.relative_to(REPO_ROOT)}: {len(entries)} distributions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
