"""The delivery modes' own rules, one module each (`verdict.ModeRules`); the controller chooses one
at wiring (`controller/delivery/strategy.py`)."""
