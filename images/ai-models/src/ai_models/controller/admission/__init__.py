"""The workload admission webhook, served by every controller replica over TLS."""
