"""The Model/ClusterModel reconciler: publication Jobs, status, events and cleanup (leader only)."""
