"""The HTTP fixtures of tests/http (the real app on a real socket), shared with these tests."""

from __future__ import annotations

from tests.http.conftest import admin, api, make_api

__all__ = ["admin", "api", "make_api"]
