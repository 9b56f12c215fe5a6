"""The CSI protocol's generated modules: how they are made (codegen)."""
