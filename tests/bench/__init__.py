"""Benchmarks run as modules: `PYTHONPATH=tests .venv/bin/python -m bench.<name>`."""
