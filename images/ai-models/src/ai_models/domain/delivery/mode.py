"""The delivery modes `delivery.mode` names."""

from __future__ import annotations

import enum


class DeliveryMode(enum.StrEnum):
    SHARED_PVC = "SharedPVC"
    NODE_CACHE = "NodeCache"
