"""The chart renders valid image references from the registry values `dmt lint` makes up.

DMT renders a module with values it generates from openapi/ (deckhouse/dmt
internal/modules/values/schema/defaults/generator.go, synthesizeProperty): per property the first
of `x-dmt-default`, `x-example`, `x-examples`, `enum`, an object's own properties, `default`, and
for a string 8 random characters of `^[a-zA-Z0-9]{8}$`. A random aiModels.registry.base makes the
module image `<8 random characters>/ai-models@...`, which no runtime pulls (a first path element
without a dot, a colon or "localhost" is a Docker Hub repository, and those must be lower case),
so openapi/values.yaml gives the registry fields an `x-dmt-default` (D127).
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
from collections.abc import Iterator, Mapping
from typing import Any

from support.manifest_schemas import validate_object
from support.render import render_chart
from support.scenarios import scenario
from support.values import MODULE_VALUES_KEY, values_schema

# distribution/reference: a path component, and a registry host with an optional port.
PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
DOMAIN = (
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?"
)
DIGEST = r"sha256:[0-9a-f]{64}"
REPOSITORY = re.compile(rf"{PATH_COMPONENT}(?:/{PATH_COMPONENT})*")
DMT_REGISTRY = "registry.example.com/deckhouse"


def dmt_string(rng: random.Random) -> str:
    """What DMT's reggen makes of `^[a-zA-Z0-9]{8}$`; one upper-case letter at least, as is likely."""
    letters = [rng.choice(string.ascii_letters + string.digits) for _ in range(7)]
    return rng.choice(string.ascii_uppercase) + "".join(letters)


def dmt_values(schema: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """The values DMT generates for an object schema (the cases the registry schema uses)."""
    result: dict[str, Any] = {}
    for key, prop in schema.get("properties", {}).items():
        if "x-dmt-default" in prop:
            result[key] = prop["x-dmt-default"]
        elif "x-example" in prop:
            result[key] = prop["x-example"]
        elif "x-examples" in prop:
            result[key] = prop["x-examples"][0]
        elif "enum" in prop:
            result[key] = prop["enum"][0]
        elif prop.get("type") == "object":
            result[key] = dmt_values(prop, rng)
        elif "default" in prop:
            result[key] = prop["default"]
        elif prop.get("type") == "string":
            result[key] = dmt_string(rng)
    return result


def is_pullable(image: str) -> bool:
    """ParseNormalizedNamed's rules: a registry host only when the first element looks like one."""
    match = re.fullmatch(rf"(?P<name>[^@]+)@{DIGEST}", image)
    if not match:
        return False
    name = match["name"]
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return re.fullmatch(DOMAIN, first) is not None and REPOSITORY.fullmatch(rest) is not None
    return REPOSITORY.fullmatch(name) is not None


def container_images(objects: list[dict[str, Any]]) -> Iterator[str]:
    for obj in objects:
        spec = obj.get("spec", {})
        job_spec = spec.get("jobTemplate", {}).get("spec", {})
        for pod in (spec.get("template", {}).get("spec"), job_spec.get("template", {}).get("spec")):
            for container in [*(pod or {}).get("containers", []), *(pod or {}).get("initContainers", [])]:
                yield container["image"]


def images(objects: list[dict[str, Any]]) -> Iterator[str]:
    yield from container_images(objects)
    for text in (json.dumps(obj) for obj in objects if obj.get("kind") in {"ConfigMap", "Secret"}):
        # The controller passes the publisher and materializer images on in its settings.
        yield from re.findall(r"[^\s\"'=]+@sha256:[0-9a-f]{64}", text)


def dmt_registry() -> dict[str, Any]:
    registry_schema = values_schema()["properties"]["registry"]
    return dmt_values(registry_schema, random.Random(0))


def test_the_random_strings_dmt_makes_are_no_registry() -> None:
    """The check below can fail: a made-up base is not a registry a runtime pulls from."""
    rng = random.Random(0)
    assert not is_pullable(f"{dmt_string(rng)}/ai-models@sha256:{'a1' * 32}")
    assert is_pullable(f"registry.example.com:5000/deckhouse/modules/ai-models@sha256:{'a1' * 32}")


def test_every_registry_field_the_templates_read_has_a_dmt_default() -> None:
    properties = values_schema()["properties"]["registry"]["properties"]
    for field in ("base", "dockercfg", "scheme"):
        assert "x-dmt-default" in properties[field], f"aiModels.registry.{field}"
    # Only DMT reads it: addon-operator applies `default`, which would make every install external.
    assert "default" not in properties["base"]


def dmt_rendered() -> list[dict[str, Any]]:
    """The chart as `dmt lint` renders it: the registry values it generates, and the global registry
    it sets itself (deckhouse/dmt internal/modules/values/compose.go, applyDigests)."""
    values = scenario("minimal").values()
    values[MODULE_VALUES_KEY]["registry"] = dmt_registry()
    values["global"]["modulesImages"]["registry"]["base"] = DMT_REGISTRY
    return render_chart(values).objects


def test_images_rendered_from_dmt_values_are_pullable_references() -> None:
    rendered = dmt_rendered()
    found = sorted(set(images(rendered)))
    assert found
    assert [image for image in found if not is_pullable(image)] == []
    for obj in rendered:
        validate_object(obj)


def test_every_container_image_comes_from_the_one_registry_dmt_accepts() -> None:
    """DMT's image-digest rule (pkg/linters/container/rules/container_image_digest_check.go): the
    repository of every container's image is exactly registry.example.com/deckhouse."""
    containers = sorted(set(container_images(dmt_rendered())))
    assert containers
    assert [image for image in containers if image.partition("@")[0] != DMT_REGISTRY] == []


def test_the_dmt_docker_config_is_a_docker_config() -> None:
    config = json.loads(base64.b64decode(dmt_registry()["dockercfg"], validate=True))
    assert set(config) == {"auths"}
