"""What a real ``gmem serve`` answers about itself: its docs pages work offline, and a query
parameter a route does not take is refused by name."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.support.processes import create_key, serving

ASSET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, str]]:
    """A real ``gmem serve`` and a key with every scope but review."""
    root = tmp_path_factory.mktemp("served")
    key = create_key(root / "data", "memory:write,memory:read,memory:review,audit:read")
    with serving(root / "data", root / "serve.log") as client:
        yield client, key


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_pages_load_every_asset_from_the_service_itself(
    server: tuple[httpx.Client, str], page: str
) -> None:
    """/docs and /redoc name no other host: every script, style and icon they load is a
    path of this service, and it answers 200 with a body."""
    client, _ = server
    html = client.get(page)
    assert html.status_code == 200
    assert not re.search(r"https?://", html.text), "the page names another host"
    assets = ASSET.findall(html.text)
    assert any(asset.endswith(".js") for asset in assets)
    for asset in assets:
        assert asset.startswith("/"), asset
        answer = client.get(asset)
        assert answer.status_code == 200, asset
        assert len(answer.content) > 100, asset


def test_the_swagger_page_reads_the_openapi_document_of_the_service(
    server: tuple[httpx.Client, str],
) -> None:
    """The Swagger UI page points at /openapi.json, and the online validator is off."""
    client, _ = server
    text = client.get("/docs").text
    assert "'/openapi.json'" in text or '"/openapi.json"' in text
    assert '"validatorUrl": null' in text


@pytest.mark.parametrize(
    ("path", "name", "hint"),
    [
        ("/v1/quarantine?agentid=support-bot", "agentid", "did you mean agent_id?"),
        ("/v1/events?afer=3", "afer", "did you mean after?"),
        ("/v1/memories/pref-1?version=1", "version", "this route takes no query parameters"),
    ],
)
def test_an_unknown_query_parameter_is_refused_by_name(
    server: tuple[httpx.Client, str], path: str, name: str, hint: str
) -> None:
    """A query parameter the route does not take is 422 naming it and the closest one the
    route takes, not ignored (which would widen or change the request in silence)."""
    client, key = server
    answer = client.get(path, headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 422
    problem = answer.json()
    assert problem["type"] == "urn:gmem:problem:validation"
    assert problem["errors"][0]["field"] == name
    assert problem["errors"][0]["message"].endswith(hint)


def test_known_query_parameters_are_still_accepted(server: tuple[httpx.Client, str]) -> None:
    """The declared parameters of a route pass the check."""
    client, key = server
    answer = client.get(
        "/v1/quarantine?agent_id=support-bot&purpose=support&limit=5",
        headers={"Authorization": f"Bearer {key}"},
    )
    assert answer.status_code == 200
