"""Code shared by the module's hooks (`hooks/*.py`); see hooks/README.md for how it is found."""
