"""Workload delivery (pure): what a workload asks for, how its pod template is rewritten, where
delivered files live on a shared claim, and the report vocabulary."""
