"""Publication: upload grants and the publisher's outcome (pure)."""
