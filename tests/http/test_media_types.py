"""Bodies are UTF-8 ``application/json`` or refused: 415 for another type, 400 for other bytes.

A proxy, a WAF or an audit log in front of the service reads a body by its declared type
and as UTF-8; the service must not read anything else as JSON, or one request could mean
two things (SPEC §8: "415 a body that is not application/json (UTF-8 only)").
"""

from __future__ import annotations

import json

import pytest

from tests.http.test_problems import assert_problem
from tests.support.api import Api
from tests.support.fakes import query as search_body
from tests.support.fakes import write_body


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "application/json; charset=utf-16",
        "application/json; charset=latin-1",
    ],
)
def test_a_body_of_another_media_type_is_415(
    api: Api, admin: dict[str, str], content_type: str
) -> None:
    """A write whose body is declared as anything but UTF-8 JSON is 415; nothing is written."""
    body = json.dumps(write_body()).encode()
    response = api.client.post(
        "/v1/memories", content=body, headers=admin | {"Content-Type": content_type}
    )
    problem = assert_problem(response, 415, "unsupported-media-type")
    assert "application/json" in problem["detail"] or "UTF-8" in problem["detail"]
    assert api.service.store.head() == 0


def test_a_body_without_a_content_type_is_415(api: Api, admin: dict[str, str]) -> None:
    """curl -d without -H sends a form type; no type at all is refused the same way."""
    body = json.dumps(search_body()).encode()
    response = api.client.post("/v1/search", content=body, headers=admin)
    assert "content-type" not in response.request.headers
    assert_problem(response, 415, "unsupported-media-type")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_json_in_utf16_or_utf32_is_refused(api: Api, admin: dict[str, str], encoding: str) -> None:
    """UTF-16 and UTF-32 JSON (which Python's parser would detect) is 400; nothing is written."""
    body = json.dumps(write_body()).encode(encoding)
    response = api.client.post(
        "/v1/memories", content=body, headers=admin | {"Content-Type": "application/json"}
    )
    assert_problem(response, 400, "malformed-request")
    assert api.service.store.head() == 0


def test_utf8_json_with_a_charset_is_accepted(api: Api, admin: dict[str, str]) -> None:
    """``application/json; charset=utf-8`` is the same as ``application/json``."""
    body = json.dumps(write_body()).encode()
    headers = admin | {"Content-Type": "application/json; charset=UTF-8"}
    assert api.client.post("/v1/memories", content=body, headers=headers).status_code == 201


def test_a_bodiless_forget_needs_no_content_type(api: Api, admin: dict[str, str]) -> None:
    """A POST without a body (forget) is not asked for a media type."""
    response = api.client.post("/v1/subjects/customer-1/forget", headers=admin)
    assert response.status_code == 200
