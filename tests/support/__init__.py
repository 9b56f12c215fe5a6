"""Shared helpers of the ai-models test bed (render engine, values, repository paths)."""
