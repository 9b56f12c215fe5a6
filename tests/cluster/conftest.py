"""Cluster tests run the module's processes against the Kubernetes API emulator (tests/kubeemu)."""
