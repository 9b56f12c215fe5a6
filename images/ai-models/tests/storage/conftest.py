"""Storage accounting tests run against the Kubernetes API emulator."""

from kubeemu.pytest_fixtures import (  # noqa: F401  (fixtures used by this package's tests)
    kube_api_client,
    kube_emulator,
    kube_emulator_factory,
)
