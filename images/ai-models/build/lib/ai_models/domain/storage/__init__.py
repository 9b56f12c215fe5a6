"""Storage accounting: the ledger algebra and the reservation rule (pure)."""
