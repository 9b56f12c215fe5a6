"""Storage accounting in the controller: ledger changes, the inventory pass, storage metrics."""
