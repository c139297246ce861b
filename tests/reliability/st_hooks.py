"""Schemathesis hooks for the fuzz test: every error must be a well-formed RFC 9457 problem.

Loaded by ``st`` through the ``hooks`` setting of the generated configuration (see
tests/reliability/test_fuzz.py); the built-in checks cover schemas, statuses and types.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis

PROBLEM_MEMBERS = ("type", "title", "status", "detail")


@schemathesis.check
def errors_are_problem_json(ctx: Any, response: schemathesis.Response, case: Any) -> None:
    """A 4xx or 5xx answer is application/problem+json with type, title, status, detail."""
    if response.status_code < 400:
        return
    content_type = (response.headers.get("content-type") or [""])[0]
    if content_type.split(";")[0].strip() != "application/problem+json":
        raise AssertionError(f"a {response.status_code} answer is {content_type!r}, not a problem")
    body = json.loads(response.content)
    missing = [name for name in PROBLEM_MEMBERS if name not in body]
    if missing:
        raise AssertionError(f"the problem lacks {missing}")
    if body["status"] != response.status_code:
        raise AssertionError(
            f"the problem says {body['status']}, the response {response.status_code}"
        )
    if not str(body["type"]).startswith("urn:gmem:problem:"):
        raise AssertionError(f"unknown problem type {body['type']!r}")
