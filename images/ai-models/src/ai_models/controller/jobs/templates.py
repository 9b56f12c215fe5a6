"""The pod templates of worker Jobs, rendered by Helm into ConfigMaps mounted into the controller.

Helm renders each worker's pod template (image, placement, security context, resources, store
settings and credentials), so every pod the module runs is reviewed in one place; the controller
adds only what is specific to one Job (`controller.jobs.builder`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class PodTemplateError(RuntimeError):
    """A Job pod template the chart renders is missing or malformed; the message names the file."""


def _what(configmap: str) -> str:
    return configmap.removeprefix("ai-models-").removesuffix("-template") + " pod template"


def load_pod_template(path: Path, *, container: str, configmap: str) -> dict[str, Any]:
    """The pod template in `path` (mounted from `configmap`), which must have `container`."""
    what = _what(configmap)
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise PodTemplateError(f"cannot read the {what} {path}: {error}") from error
    spec = document.get("spec") if isinstance(document, dict) else None
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not any(
        isinstance(item, dict) and item.get("name") == container for item in containers
    ):
        raise PodTemplateError(
            f"the {what} {path} has no container named {container!r}; "
            f"it comes from the ConfigMap {configmap} rendered by the module's Helm chart"
        )
    result: dict[str, Any] = document
    return result


def pod_template_from_setting(
    path: Path | None, *, variable: str, container: str, configmap: str
) -> dict[str, Any]:
    """The Job pod template at the path a setting (`variable`) names; a setting left unset is a
    `PodTemplateError` that says which ConfigMap of the module's Helm chart provides it."""
    if path is None:
        raise PodTemplateError(
            f"{variable} is not set: the controller needs the {_what(configmap)} that the module's Helm "
            f"chart renders (ConfigMap {configmap})"
        )
    return load_pod_template(path, container=container, configmap=configmap)
