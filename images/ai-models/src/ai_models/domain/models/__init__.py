"""Model and ClusterModel lifecycle (pure): which phase and conditions a situation means."""
