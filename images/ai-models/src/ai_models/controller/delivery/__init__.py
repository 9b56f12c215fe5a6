"""The delivery controller (SharedPVC mode): workloads that name models by annotation get them on a
shared claim. `runtime.DeliveryRuntime` wires it into the one runtime; `reconciler` runs one pass
(observe -> `domain.delivery.decision.decide` -> steps)."""
