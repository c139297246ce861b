"""Numbered schema migrations, one folder per backend, applied in order on open."""
