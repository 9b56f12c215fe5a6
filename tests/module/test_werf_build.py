"""The werf build: werf.yaml and .werf/stages render to images that all exist, stand on pinned
Deckhouse base images, install only the hash locks, and bundle what Deckhouse loads.

werf does not run here. Its templates are Go templates with sprig, so the real Helm engine renders
them through a throwaway chart (werf.yaml as its one template, the files werf reads beside it);
werf's `env` function, which Helm lacks, is replaced by the values below before rendering.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.utils import parse_wheel_filename

from ai_models.controller.delivery.jobs import CLAIM_MOUNT
from support.locks import Locked, closure, lock_wheels, locks, parse_lock, pins, target_tags
from support.paths import REPO_ROOT
from support.render import render_chart
from support.scenarios import Scenario, generated_certificate, load_scenarios
from support.values import IMAGE_DIGEST, MODULE_VALUES_KEY
from support.yamlfiles import load_yaml

MODULE = "ai-models"
RUNTIME_IMAGE = f"{MODULE}/ai-models"
WERF_ENV = {"MODULES_MODULE_TAG": "v0.0.0-test"}
BASE_REGISTRY = "registry.deckhouse.io/base_images"
PINNED = re.compile(rf"^{re.escape(BASE_REGISTRY)}@sha256:[0-9a-f]{{64}}$")
# What werf reads while rendering werf.yaml (its .Files).
WERF_INPUTS = (".werf/**/*", "images/*/werf.inc.yaml", "images/*/mount-points.yaml")
_ENV_CALL = re.compile(r'\benv\s+"([A-Za-z_][A-Za-z0-9_]*)"(?:\s+"([^"]*)")?')
# What addon-operator loads from a module directory (deckhouse/modules-template
# .werf/stages/bundle.yaml; deckhouse-conventions "hooks/").
BUNDLE_PATHS = {
    ".helmignore",
    "Chart.yaml",
    "module.yaml",
    "crds",
    "docs",
    "hooks",
    "monitoring",
    "openapi",
    "templates",
}


def _helm_compatible(text: str) -> str:
    return _ENV_CALL.sub(lambda match: f'"{WERF_ENV.get(match[1], match[2] or "")}"', text)


# How DMT renders an images/<name>/werf.inc.yaml alone for its templates/werf rule (the context of
# deckhouse/dmt internal/werf/images.go renderWerfIncFile): a file it cannot render it skips.
DMT_ALONE = """{{- range $path, $_ := .Files.Glob "images/*/werf.inc.yaml" }}
{{- $name := index (splitList "/" $path) 1 }}
{{- $ctx := dict "Root" $ "ImageName" $name "ImagePath" (printf "/images/%s" $name) }}
{{- $_ := set $ctx "ModuleNamePrefix" "" }}
{{- $_ := set $ctx "ModuleDir" "/" }}
---
{{ tpl ($.Files.Get $path) $ctx }}
{{- end }}
"""


def _render_as_werf(directory: Path, template: str) -> str:
    """`template` rendered by the Helm engine with the files werf reads beside it (its .Files)."""
    (directory / "Chart.yaml").write_text("apiVersion: v2\nname: werf-render\nversion: 0.0.0\n")
    (directory / "templates").mkdir()
    (directory / "templates" / "werf.yaml").write_text(_helm_compatible(template))
    for pattern in WERF_INPUTS:
        for source in REPO_ROOT.glob(pattern):
            if source.is_file():
                target = directory / source.relative_to(REPO_ROOT)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(_helm_compatible(source.read_text()))
    return render_chart({}, chart_dir=directory).files["werf-render/templates/werf.yaml"]


@pytest.fixture(scope="module")
def werf_documents(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    text = _render_as_werf(tmp_path_factory.mktemp("werf"), (REPO_ROOT / "werf.yaml").read_text())
    documents = [document for document in yaml.safe_load_all(text) if document]
    assert documents, "werf.yaml rendered nothing"
    return documents


@pytest.fixture(scope="module")
def images(werf_documents: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    by_name: dict[str, dict[str, Any]] = {}
    for document in werf_documents[1:]:
        name = document.get("image")
        assert name, (
            f"a werf document without `image:` (werf also has no `artifact:` for modules): {document}"
        )
        assert name not in by_name, f"image {name} is defined twice"
        by_name[name] = document
    return by_name


def _is_final(image: dict[str, Any]) -> bool:
    return image.get("final", True) is not False


def _base_of(images: dict[str, dict[str, Any]], name: str) -> str:
    """The base image an image stands on, following fromImage to the one with `from:`."""
    seen = []
    while "from" not in images[name]:
        seen.append(name)
        name = images[name]["fromImage"]
        assert name not in seen, f"fromImage cycle: {seen}"
    return name


def _shell(image: dict[str, Any]) -> Iterator[str]:
    for commands in (image.get("shell") or {}).values():
        yield from commands


def _pip_installs(image: dict[str, Any]) -> list[list[str]]:
    return [shlex.split(command) for command in _shell(image) if " pip install " in command]


def test_the_meta_section_names_the_project(werf_documents: list[dict[str, Any]]) -> None:
    meta = werf_documents[0]
    assert meta["project"] == MODULE
    assert meta["configVersion"] == 1
    assert meta["build"]["imageSpec"]["clearHistory"] is True


def test_every_image_a_stage_names_has_a_build(images: dict[str, dict[str, Any]]) -> None:
    for name, image in images.items():
        assert "artifact" not in image, f"{name}: use `final: false`, not `artifact:` (DMT images/werf)"
        assert ("from" in image) != ("fromImage" in image), f"{name}: exactly one of from/fromImage"
        named = [image.get("fromImage")]
        named += [entry.get("image") for entry in image.get("import") or []]
        named += [entry["image"] for entry in image.get("dependencies") or []]
        for other in filter(None, named):
            assert other in images, f"{name} uses image {other}, which no stage builds"
    assert {RUNTIME_IMAGE, "bundle", "release-channel-version", "images-digests-and-version"} <= set(images)


def test_every_base_image_is_pinned_by_digest(images: dict[str, dict[str, Any]]) -> None:
    bases = {name: image["from"] for name, image in images.items() if "from" in image}
    assert bases
    for name, reference in bases.items():
        assert PINNED.match(reference), (
            f"base image {name} is {reference}: pin it by @sha256 in {BASE_REGISTRY}"
        )
        assert images[name].get("final") is False, f"base image {name} must not be pushed as a module image"
    pinned = load_yaml(REPO_ROOT / ".werf" / "base_images.yml")
    assert pinned.pop("REGISTRY_PATH") == BASE_REGISTRY
    assert {name: f"{BASE_REGISTRY}@{digest}" for name, digest in pinned.items()} == bases


def test_final_module_images_are_distroless(images: dict[str, dict[str, Any]]) -> None:
    module_images = {name: image for name, image in images.items() if name.startswith(f"{MODULE}/")}
    finals = {name: image for name, image in module_images.items() if _is_final(image)}
    assert set(finals) == {RUNTIME_IMAGE}
    for name, image in finals.items():
        # DMT images/werf: a final image's fromImage is one of the module's base/ images, and
        # the user comes from the pod's securityContext, never imageSpec.config.user.
        assert image["fromImage"].startswith("base/"), f"{name}: final images stand on a base/ image"
        assert _base_of(images, name) == image["fromImage"]
        assert "shell" not in image, f"{name}: a distroless image runs no build commands"
        config = image["imageSpec"]["config"]
        assert "user" not in config, f"{name}: imageSpec.config.user must stay empty (DMT)"
        assert config["entrypoint"] == ["ai-models"]
        assert config["env"]["PATH"].startswith("/opt/ai-models/lib/bin:")
    # The bundle and release images hold files only.
    for name in ("bundle", "release-channel-version"):
        assert _base_of(images, name) == "builder/scratch"
        assert "shell" not in images[name]


def test_the_chart_runs_the_image_as_the_deckhouse_user() -> None:
    helpers = (REPO_ROOT / "templates" / "_helpers.tpl").read_text()
    assert re.search(r"^\s+runAsUser: 64535$", helpers, re.MULTILINE)
    assert not (REPO_ROOT / "images" / "ai-models" / "Dockerfile").exists(), (
        "images/ai-models holds werf.inc.yaml; a Dockerfile beside it is a second build (DMT reads both)"
    )


def _requirement_files(install: list[str]) -> list[str]:
    return [install[index + 1] for index, word in enumerate(install) if word == "-r"]


@pytest.mark.parametrize(
    ("image_name", "source_root", "expected"),
    [
        (
            f"{RUNTIME_IMAGE}-build",
            "/src",
            {"images/ai-models/requirements.lock", "images/ai-models/build-requirements.lock"},
        ),
        (
            "python-dependencies",
            "/src",
            {"lib/python/requirements.lock", "images/ai-models/build-requirements.lock"},
        ),
    ],
)
def test_builds_install_the_hash_locks_and_nothing_unlocked(
    images: dict[str, dict[str, Any]], image_name: str, source_root: str, expected: set[str]
) -> None:
    image = images[image_name]
    installs = _pip_installs(image)
    assert installs, f"{image_name} installs nothing"
    locked: set[str] = set()
    [git] = image["git"]
    prefix = git["add"].strip("/")
    for install in installs:
        assert "--no-deps" in install, f"{image_name}: {shlex.join(install)} must not resolve dependencies"
        files = _requirement_files(install)
        if files:
            assert "--require-hashes" in install, (
                f"{image_name}: {shlex.join(install)} needs --require-hashes"
            )
            assert "--only-binary=:all:" in install, f"{image_name}: the locks hold wheel hashes only"
            for file in files:
                relative = file.removeprefix(source_root + "/")
                locked.add(f"{prefix}/{relative}".strip("/"))
        else:
            # The ai_models package itself, from the sources the stage adds: nothing fetched.
            assert "--no-index" in install, shlex.join(install)
            assert "--no-build-isolation" in install, shlex.join(install)
            # pip --target skips a directory the target already has (bin/ from the locked
            # installs) unless --upgrade: the ai-models script would be missing.
            assert "--upgrade" in install, shlex.join(install)
    assert locked == expected
    included = {f"{prefix}/{path}".strip("/") for path in git["includePaths"]}
    assert expected <= included, f"{image_name} does not add the locks it installs"


@pytest.mark.parametrize("lock", locks(), ids=lambda lock: lock.path.relative_to(REPO_ROOT).as_posix())
def test_each_lock_is_the_closure_of_its_roots_at_the_tested_pins(lock: Any) -> None:
    assert lock.path.is_file(), f"{lock.path} is missing: run `make locks`"
    entries: dict[str, Locked] = parse_lock(lock.path)
    wanted = closure(lock.roots, pins())
    found = {name: entry.version for name, entry in entries.items()}
    assert found == wanted, (
        f"{lock.path.name} differs from the pins of tests/requirements.txt: run `make locks`"
    )
    for name, entry in entries.items():
        assert entry.hashes, f"{lock.path.name}: {name} has no --hash"


@pytest.mark.parametrize("lock", locks(), ids=lambda lock: lock.path.relative_to(REPO_ROOT).as_posix())
def test_every_locked_wheel_loads_on_the_musl_interpreter_of_the_image(lock: Any) -> None:
    """base/python-3.12 is CPython 3.12 on musl: a manylinux (glibc) wheel does not load there."""
    entries = parse_lock(lock.path)
    wheels = lock_wheels(lock.path)
    assert set(wheels) == set(entries), f"{lock.path.name}: every entry names its wheels; run `make locks`"
    tags = target_tags()
    for name, files in wheels.items():
        assert len(files) == len(entries[name].hashes), f"{lock.path.name}: {name}: one hash per wheel"
        for filename in files:
            assert parse_wheel_filename(filename)[3] & tags, (
                f"{lock.path.name}: {filename} is not for the image"
            )
            assert "manylinux" not in filename, f"{lock.path.name}: {filename} needs glibc"


def _cli_entry_points() -> set[str]:
    """The modules `ai-models` imports to run a process (cli.py imports them inside its commands)."""
    tree = ast.parse((REPO_ROOT / "images" / "ai-models" / "src" / "ai_models" / "cli.py").read_text())
    return {
        node.module
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith((".main", ".server"))
    }


def _smoke_imports(image: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    for command in _shell(image):
        match = re.search(r"python3 -c 'import ([^']+)'", command)
        if match:
            found.update(item.strip() for item in match[1].split(","))
    return found


def test_the_build_stages_run_on_the_interpreter_the_image_runs(images: dict[str, dict[str, Any]]) -> None:
    for name in (f"{RUNTIME_IMAGE}-build", "python-dependencies"):
        assert images[name]["fromImage"] == images[RUNTIME_IMAGE]["fromImage"] == "base/python-3.12", name
        assert not any("apt-get" in command for command in _shell(images[name])), name


def test_the_runtime_build_starts_the_cli_and_imports_every_entry_point(
    images: dict[str, dict[str, Any]],
) -> None:
    build = images[f"{RUNTIME_IMAGE}-build"]
    entry_points = _cli_entry_points()
    assert {"ai_models.controller.main", "ai_models.api.server", "ai_models.nodecache.main"} <= entry_points
    assert _smoke_imports(build) == {"ai_models.cli", *entry_points}
    assert any(re.search(r"/opt/ai-models/lib/bin/ai-models --help", command) for command in _shell(build))
    setup = build["shell"]["setup"]
    assert setup.index(next(c for c in setup if "--help" in c)) < setup.index(
        next(c for c in setup if c.startswith("mkdir"))
    ), "the smoke test runs before anything else of the stage"


def test_the_hooks_dist_is_imported_on_that_interpreter(images: dict[str, dict[str, Any]]) -> None:
    hooks = sorted((REPO_ROOT / "hooks").rglob("*.py"))
    imported: set[str] = set()
    for path in hooks:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
    vendored = {"deckhouse", "cryptography", "ai_models"} & imported
    assert vendored == {"deckhouse", "cryptography", "ai_models"}
    smoke = {module.split(".")[0] for module in _smoke_imports(images["python-dependencies"])}
    assert vendored <= smoke


def test_the_hook_pins_are_the_tested_pins() -> None:
    tested = pins()
    hook_pins = pins(REPO_ROOT / "lib" / "python" / "requirements.txt")
    assert {name: tested.get(name) for name in hook_pins} == hook_pins


def test_the_bundle_holds_what_deckhouse_loads(images: dict[str, dict[str, Any]]) -> None:
    bundle = images["bundle"]
    [git] = bundle["git"]
    assert (git["add"], git["to"]) == ("/", "/")
    assert set(git["includePaths"]) >= BUNDLE_PATHS
    for path in git["includePaths"]:
        assert (REPO_ROOT / path).exists(), f"the bundle includes {path}, which does not exist"
    imported = {(entry["image"], entry["add"], entry["to"]) for entry in bundle["import"]}
    assert ("python-dependencies", "/lib/python/dist", "/lib/python/dist") in imported
    [digests] = [entry for entry in bundle["import"] if entry["image"] == "images-digests-and-version"]
    assert set(digests["includePaths"]) == {"images_digests.json", "version.json"}
    release = images["release-channel-version"]
    assert {(entry["add"], entry["to"]) for entry in release["import"]} == {
        ("/version.json", "/version.json")
    }
    assert release["git"][0]["includePaths"] == ["module.yaml"]


def test_the_hooks_dist_holds_ai_models_with_its_metadata(images: dict[str, dict[str, Any]]) -> None:
    installs = _pip_installs(images["python-dependencies"])
    [package] = [install for install in installs if not _requirement_files(install)]
    assert package[-1] == "/src/images/ai-models"
    assert package[package.index("--target") + 1] == "/lib/python/dist"
    for install in installs:
        if "lib/python/requirements.lock" in " ".join(install):
            assert install[install.index("--target") + 1] == "/lib/python/dist"


def test_images_digests_cover_every_final_module_image(images: dict[str, dict[str, Any]]) -> None:
    stage = images["images-digests-and-version"]
    finals = {name for name, image in images.items() if name.startswith(f"{MODULE}/") and _is_final(image)}
    dependencies = {entry["image"]: entry for entry in stage["dependencies"]}
    assert set(dependencies) == finals
    keys = {
        entry["imports"][0]["targetEnv"].removeprefix("MODULE_IMAGE_DIGEST_")
        for entry in dependencies.values()
    }
    # The key the templates read: global.modulesImages.digests.aiModels.<key>.
    used: set[str] = set()
    for template in (REPO_ROOT / "templates").rglob("*"):
        if template.is_file():
            used |= set(
                re.findall(r'"ai_models\.module_image" \(list [.$][A-Za-z.]* "(\w+)"\)', template.read_text())
            )
    assert used, "no template names a module image"
    assert used <= keys, f"templates use images {used}, the build writes digests of {keys}"
    shell = " ".join(_shell(stage))
    assert "/images_digests.json" in shell
    assert "/version.json" in shell
    assert WERF_ENV["MODULES_MODULE_TAG"] in shell


def _with_controller_cert(base: Scenario) -> Scenario:
    """`base` once the internal TLS hook has issued the controller's webhook certificate."""
    pair = generated_certificate()
    internal = {
        **base.internal,
        "rootCA": {"crt": pair.ca_pem},
        "controllerCert": {"ca": pair.ca_pem, "crt": pair.cert_pem, "key": pair.key_pem},
    }
    return dataclasses.replace(base, internal=internal)


def _module_image_mounts() -> set[str]:
    """Mount paths of every container running the module image, in every value scenario (and each
    once the controller has its webhook certificate)."""
    mounts: set[str] = set()
    scenarios = load_scenarios()
    for scenario in (*scenarios, *map(_with_controller_cert, scenarios)):
        for obj in scenario.render().objects:
            for spec in _pod_specs(obj):
                for container in [*spec.get("containers", []), *spec.get("initContainers", [])]:
                    if str(container.get("image", "")).endswith(IMAGE_DIGEST):
                        mounts |= {
                            mount["mountPath"].rstrip("/") for mount in container.get("volumeMounts", [])
                        }
    return mounts


def _pod_specs(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if obj.get("kind") in {"Deployment", "DaemonSet", "StatefulSet", "Job"}:
        yield obj["spec"]["template"]["spec"]
    elif obj.get("kind") == "ConfigMap":
        # The publish and materialize Jobs' pod templates (publisher/, materializer/).
        for text in (obj.get("data") or {}).values():
            document = yaml.safe_load(text) if text.lstrip().startswith(("metadata", "spec")) else None
            if (
                isinstance(document, dict)
                and isinstance(document.get("spec"), dict)
                and "containers" in document["spec"]
            ):
                yield document["spec"]


def test_mount_points_are_the_mounts_of_the_module_image(images: dict[str, dict[str, Any]]) -> None:
    declared = load_yaml(REPO_ROOT / "images" / "ai-models" / "mount-points.yaml")
    assert set(declared) == {"dirs"}
    dirs = {path.rstrip("/") for path in declared["dirs"]}
    # The materialize Job's shared claim is added by the controller (controller/delivery/jobs.py).
    mounted = _module_image_mounts() | {CLAIM_MOUNT}
    assert mounted - dirs == set(), f"add to images/ai-models/mount-points.yaml: {sorted(mounted - dirs)}"
    assert dirs - mounted == set(), f"no pod mounts these any more: {sorted(dirs - mounted)}"
    build = " ".join(_shell(images[f"{RUNTIME_IMAGE}-build"]))
    for path in dirs:
        assert f"mkdir -p /mount-points{path}" in build, f"the image does not create the mount point {path}"
    runtime_imports = {(entry["add"], entry["to"]) for entry in images[RUNTIME_IMAGE]["import"]}
    assert ("/mount-points", "/") in runtime_imports
    assert MODULE_VALUES_KEY == "aiModels"


@pytest.mark.parametrize(
    ("page", "heading"),
    [("ADMIN_GUIDE.md", "## How the module is built"), ("ADMIN_GUIDE.ru.md", "## Как собирается модуль")],
)
def test_the_admin_guide_says_how_the_module_is_built_and_what_it_needs(page: str, heading: str) -> None:
    text = (REPO_ROOT / "docs" / page).read_text()
    assert heading in text, f"docs/{page} has no section {heading!r}"
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    requirements = load_yaml(REPO_ROOT / "module.yaml")["requirements"]
    for component in ("deckhouse", "kubernetes"):
        assert f"`{requirements[component]}`" in section, (
            f"docs/{page}: {component} {requirements[component]}"
        )
    for name in (
        "images_digests.json",
        "global.modulesImages.digests.aiModels",
        "version.json",
        "lib/python/dist",
    ):
        assert name in section, f"docs/{page} does not say what {name} is"


def test_dmt_renders_each_image_file_alone(tmp_path: Path) -> None:
    # DMT's templates/werf rule reads image names from werf.inc.yaml rendered without werf.yaml.
    documents = [doc for doc in yaml.safe_load_all(_render_as_werf(tmp_path, DMT_ALONE)) if doc]
    names = {document["image"].split("/")[-1] for document in documents}
    assert names == {"ai-models", "ai-models-build"}
    assert not [name for name in names if "_" in name], "werf image names must not contain underscores (DMT)"
