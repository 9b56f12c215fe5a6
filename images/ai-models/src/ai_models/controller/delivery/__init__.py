"""The delivery controller: workloads that name models by annotation get them, in the mode
`delivery.mode` names (`strategy`, chosen in `wiring`). `runtime.DeliveryRuntime` wires it into the
one runtime; `reconciler` runs one pass (observe -> `domain.delivery.verdict.decide` -> steps);
`admission` is the webhook's side of the same verdict."""
