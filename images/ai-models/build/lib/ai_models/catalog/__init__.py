"""Catalog indexing and its storage layout in the object store."""
