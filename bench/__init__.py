"""Benchmarks and experiments: one per module, run with ``python -m bench.<name>``."""
