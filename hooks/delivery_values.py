#!/usr/bin/env python3
"""Resolve the SharedPVC StorageClass into `aiModels.internal.delivery`.

Chain: `aiModels.delivery.sharedPVCStorageClassName`, then `global.defaultClusterStorageClass`, then
the single StorageClass annotated as the default. A class named by a setting is written even when
it does not exist (the storage-prerequisites verdict reports `StorageClassNotFound`); when nothing
resolves, the class name is removed and the source is `NotFound`.
"""

from __future__ import annotations

import json
from typing import Any

from deckhouse import hook

from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.domain.storage.prerequisites import StorageInputs, resolve_storage_class
from lib.storage import STORAGE_CLASS_JQ, storage_class_facts
from lib.values import QUEUE, dig, filter_results, internal, setting

STORAGE_CLASSES = "storage_classes"

config = json.dumps(
    {
        "configVersion": "v1",
        "beforeHelm": 10,
        "kubernetes": [
            {
                "name": STORAGE_CLASSES,
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "queue": f"{QUEUE}/storage",
                "keepFullObjectsInMemory": False,
                "includeSnapshotsFrom": [STORAGE_CLASSES],
                "jqFilter": STORAGE_CLASS_JQ,
            }
        ],
    },
    indent=2,
)


def main(ctx: hook.Context) -> None:
    values: dict[str, Any] = ctx.values
    resolution = resolve_storage_class(
        StorageInputs(
            mode=DeliveryMode.SHARED_PVC,
            shared_pvc_storage_class=setting(values, "delivery", "sharedPVCStorageClassName") or None,
            global_storage_class=dig(values, "global", "defaultClusterStorageClass") or None,
            storage_classes=storage_class_facts(filter_results(ctx.snapshots, STORAGE_CLASSES)),
        )
    )
    delivery: dict[str, Any] = internal(values).setdefault("delivery", {})
    if resolution.name:
        delivery["sharedPVCStorageClassName"] = resolution.name
    else:
        delivery.pop("sharedPVCStorageClassName", None)
    delivery["storageClassSource"] = str(resolution.source)


if __name__ == "__main__":
    hook.run(main, config=config)
