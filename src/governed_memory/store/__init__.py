"""Storage backends: one module per backend behind the store port of ``ports.py``."""
