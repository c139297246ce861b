"""Fixtures for the HTTP tests: the real app over SQLite in a temp dir, served on a free port
(:mod:`tests.support.api`)."""

from __future__ import annotations

from tests.support.api import admin, api, make_api

__all__ = ["admin", "api", "make_api"]
