"""Pure domain logic: no I/O, no Kubernetes client. Hooks, processes and tests import it directly."""
