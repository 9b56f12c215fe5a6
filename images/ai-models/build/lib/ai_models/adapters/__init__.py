"""Adapters to the world outside the process: object store, and later Kubernetes, Hub, Helm.

Domain code never imports from here; processes wire adapters to the domain.
"""
