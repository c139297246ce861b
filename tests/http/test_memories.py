"""Every endpoint of SPEC §8 on its happy path, and the errors that belong to each one."""

from __future__ import annotations

from tests.support.api import Api
from tests.support.fakes import query as search_body
from tests.support.fakes import write_body

PROBLEM = "application/problem+json"


def test_put_creates_with_201_and_an_etag(api: Api, admin: dict[str, str]) -> None:
    """PUT with expected_version 0 creates the item: 201, the item, ETag "1"."""
    response = api.client.put("/v1/memories/pref-1", json=write_body(), headers=admin)
    assert response.status_code == 201
    assert response.headers["ETag"] == '"1"'
    item = response.json()
    assert (item["id"], item["tenant_id"], item["version"]) == ("pref-1", "acme", 1)
    assert item["status"] == "active"
    assert item["content"] == write_body()["content"]


def test_put_replaces_with_200_at_the_current_version(api: Api, admin: dict[str, str]) -> None:
    """PUT with the current version rewrites the item: 200 and version + 1."""
    api.write(admin, "pref-1")
    body = write_body(content="Prefers email, and never before 9 am.", expected_version=1)
    response = api.client.put("/v1/memories/pref-1", json=body, headers=admin)
    assert response.status_code == 200
    assert response.headers["ETag"] == '"2"'
    assert response.json()["version"] == 2


def test_put_at_a_stale_version_is_409_with_current_version(
    api: Api, admin: dict[str, str]
) -> None:
    """A write whose expected version is not the current one is 409 naming current_version."""
    api.write(admin, "pref-1")
    response = api.client.put("/v1/memories/pref-1", json=write_body(), headers=admin)
    assert response.status_code == 409
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["type"] == "urn:gmem:problem:version-conflict"
    assert problem["current_version"] == 1


def test_post_generates_the_id(api: Api, admin: dict[str, str]) -> None:
    """POST /v1/memories creates an item with a server id: 201 and a Location."""
    body = write_body()
    del body["expected_version"]
    response = api.client.post("/v1/memories", json=body, headers=admin)
    assert response.status_code == 201
    item = response.json()
    assert item["id"]
    assert response.headers["Location"] == f"/v1/memories/{item['id']}"


def test_untrusted_write_is_quarantined(api: Api, admin: dict[str, str]) -> None:
    """An untrusted write lands in quarantine."""
    item = api.write(admin, trust="untrusted")
    assert item["status"] == "quarantined"


def test_get_returns_the_item_and_its_etag(api: Api, admin: dict[str, str]) -> None:
    """GET returns the item with its version as ETag."""
    written = api.write(admin, "pref-1")
    response = api.client.get("/v1/memories/pref-1", headers=admin)
    assert response.status_code == 200
    assert response.json() == written
    assert response.headers["ETag"] == '"1"'


def test_get_unknown_item_is_404(api: Api, admin: dict[str, str]) -> None:
    """An id nobody wrote is 404."""
    response = api.client.get("/v1/memories/nobody-wrote-this", headers=admin)
    assert response.status_code == 404
    assert response.json()["type"] == "urn:gmem:problem:not-found"


def test_get_with_an_invalid_id_is_422(api: Api, admin: dict[str, str]) -> None:
    """An id outside the id pattern is refused before any lookup."""
    response = api.client.get("/v1/memories/bad%20id", headers=admin)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "id"


def test_get_after_forget_shows_content_null(api: Api, admin: dict[str, str]) -> None:
    """A forgotten item reads as deleted with content null."""
    api.write(admin, "pref-1")
    api.client.post("/v1/subjects/customer-1/forget", headers=admin)
    item = api.client.get("/v1/memories/pref-1", headers=admin).json()
    assert (item["status"], item["content"]) == ("deleted", None)


def test_history_lists_the_item_events(api: Api, admin: dict[str, str]) -> None:
    """History lists each event that changed the item, content-free, in order."""
    api.write(admin, "pref-1", trust="untrusted")
    reviewer = api.key("memory:review")
    api.client.post("/v1/memories/pref-1/promote", json={"expected_version": 1}, headers=reviewer)
    response = api.client.get("/v1/memories/pref-1/history", headers=admin)
    assert response.status_code == 200
    events = response.json()["events"]
    assert [(e["type"], e["version"]) for e in events] == [
        ("memory.written", 1),
        ("memory.promoted", 2),
    ]
    assert set(events[0]) == {"position", "type", "version", "occurred_at", "actor"}


def test_history_of_unknown_item_is_404(api: Api, admin: dict[str, str]) -> None:
    """History of an id nobody wrote is 404."""
    assert api.client.get("/v1/memories/nope/history", headers=admin).status_code == 404


def test_promote_makes_the_item_active_and_verified(api: Api, admin: dict[str, str]) -> None:
    """A reviewer other than the writer promotes: active, verified, version 2."""
    api.write(admin, "pref-1", trust="untrusted")
    reviewer = api.key("memory:review")
    response = api.client.post(
        "/v1/memories/pref-1/promote", json={"expected_version": 1}, headers=reviewer
    )
    assert response.status_code == 200
    item = response.json()
    assert (item["status"], item["trust"], item["version"]) == ("active", "verified", 2)
    assert response.headers["ETag"] == '"2"'


def test_promoting_your_own_write_is_403(api: Api, admin: dict[str, str]) -> None:
    """No principal promotes an item it wrote itself."""
    api.write(admin, "pref-1", trust="untrusted")
    response = api.client.post(
        "/v1/memories/pref-1/promote", json={"expected_version": 1}, headers=admin
    )
    assert response.status_code == 403
    assert response.json()["type"] == "urn:gmem:problem:self-review"


def test_promoting_an_active_item_is_409(api: Api, admin: dict[str, str]) -> None:
    """Only a quarantined item can be promoted; anything else is 409."""
    api.write(admin, "pref-1")
    response = api.client.post(
        "/v1/memories/pref-1/promote", json={"expected_version": 1}, headers=api.key()
    )
    assert response.status_code == 409
    assert response.json()["type"] == "urn:gmem:problem:invalid-transition"


def test_promoting_at_a_stale_version_is_409(api: Api, admin: dict[str, str]) -> None:
    """A promotion at the wrong version is a version conflict."""
    api.write(admin, "pref-1", trust="untrusted")
    response = api.client.post(
        "/v1/memories/pref-1/promote", json={"expected_version": 7}, headers=api.key()
    )
    assert response.status_code == 409
    assert response.json()["current_version"] == 1


def test_promote_without_expected_version_is_422(api: Api, admin: dict[str, str]) -> None:
    """The promote body needs expected_version."""
    api.write(admin, "pref-1", trust="untrusted")
    response = api.client.post("/v1/memories/pref-1/promote", json={}, headers=api.key())
    assert response.status_code == 422
    assert response.json()["errors"] == [{"field": "expected_version", "message": "Field required"}]


def test_reject_makes_the_item_rejected(api: Api, admin: dict[str, str]) -> None:
    """A reviewer rejects a quarantined item, with a reason."""
    api.write(admin, "pref-1", trust="untrusted")
    response = api.client.post(
        "/v1/memories/pref-1/reject",
        json={"expected_version": 1, "reason": "contradicts the CRM"},
        headers=api.key("memory:review"),
    )
    assert response.status_code == 200
    assert response.json()["status"] == "rejected"


def test_reject_of_unknown_item_is_404(api: Api, admin: dict[str, str]) -> None:
    """Rejecting an id nobody wrote is 404."""
    response = api.client.post(
        "/v1/memories/nope/reject", json={"expected_version": 1}, headers=admin
    )
    assert response.status_code == 404


def test_quarantine_lists_waiting_items_page_by_page(api: Api, admin: dict[str, str]) -> None:
    """The review queue pages with next_cursor until it is null."""
    for number in range(3):
        api.write(admin, f"note-{number}", trust="untrusted")
        api.clock.advance(seconds=1)
    api.write(admin, "active-1")
    first = api.client.get("/v1/quarantine?limit=2", headers=admin).json()
    assert [item["id"] for item in first["items"]] == ["note-0", "note-1"]
    second = api.client.get(
        "/v1/quarantine", params={"limit": 2, "cursor": first["next_cursor"]}, headers=admin
    ).json()
    assert [item["id"] for item in second["items"]] == ["note-2"]
    assert second["next_cursor"] is None


def test_quarantine_filters_by_agent_and_purpose(api: Api, admin: dict[str, str]) -> None:
    """agent_id and purpose narrow the review queue."""
    api.write(admin, "a", trust="untrusted")
    api.write(admin, "b", trust="untrusted", agent_id="sales-bot")
    api.write(admin, "c", trust="untrusted", purpose="sales")
    params = {"agent_id": "support-bot", "purpose": "support"}
    page = api.client.get("/v1/quarantine", params=params, headers=admin).json()
    assert [item["id"] for item in page["items"]] == ["a"]


def test_quarantine_with_a_forged_cursor_is_422(api: Api, admin: dict[str, str]) -> None:
    """A cursor the service did not issue is refused."""
    response = api.client.get("/v1/quarantine?cursor=not-a-cursor", headers=admin)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "cursor"


def test_quarantine_limit_out_of_range_is_422(api: Api, admin: dict[str, str]) -> None:
    """limit must be 1..500."""
    response = api.client.get("/v1/quarantine?limit=0", headers=admin)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "limit"


def test_search_returns_scored_items_within_the_budget(api: Api, admin: dict[str, str]) -> None:
    """Search returns active items with score, score_parts and tokens, and the budget used."""
    api.write(admin, "pref-1")
    response = api.client.post("/v1/search", json=search_body(), headers=admin)
    assert response.status_code == 200
    result = response.json()
    assert [hit["id"] for hit in result["items"]] == ["pref-1"]
    hit = result["items"][0]
    assert {"score", "score_parts", "tokens"} <= set(hit)
    assert result["used_tokens"] == hit["tokens"]
    assert result["skipped"] == 0
    assert result["tokenizer"]


def test_search_never_returns_quarantined_items(api: Api, admin: dict[str, str]) -> None:
    """A quarantined item is stored but never retrieved."""
    api.write(admin, "pref-1", trust="untrusted")
    result = api.client.post("/v1/search", json=search_body(), headers=admin).json()
    assert result["items"] == []


def test_search_lists_every_bad_field(api: Api, admin: dict[str, str]) -> None:
    """A search with several bad fields is one 422 that names each of them."""
    body = {"agent_id": "bad agent", "purpose": "Support", "query": "x", "limit": 0}
    response = api.client.post("/v1/search", json=body, headers=admin)
    assert response.status_code == 422
    fields = {error["field"] for error in response.json()["errors"]}
    assert fields == {"agent_id", "purpose", "limit"}


def test_forget_reports_affected_items_and_is_idempotent(api: Api, admin: dict[str, str]) -> None:
    """Forget deletes the subject's items and reports them; repeating it reports 0."""
    api.write(admin, "pref-1")
    api.write(admin, "pref-2", trust="untrusted")
    first = api.client.post("/v1/subjects/customer-1/forget", headers=admin)
    assert first.status_code == 200
    assert first.json()["affected"] == 2
    assert first.json()["subject_id"] == "customer-1"
    assert isinstance(first.json()["position"], int)
    second = api.client.post("/v1/subjects/customer-1/forget", headers=admin).json()
    assert (second["affected"], second["position"]) == (0, None)


def test_forget_with_an_invalid_subject_is_422(api: Api, admin: dict[str, str]) -> None:
    """A subject id outside its pattern is refused."""
    response = api.client.post("/v1/subjects/bad%20subject/forget", headers=admin)
    assert response.status_code == 422


def test_events_feed_pages_after_a_position(api: Api, admin: dict[str, str]) -> None:
    """The audit feed returns events after ?after, content-free, with next_after."""
    api.write(admin, "pref-1")
    api.write(admin, "pref-2")
    first = api.client.get("/v1/events?limit=1", headers=admin).json()
    assert [e["memory_id"] for e in first["events"]] == ["pref-1"]
    rest = api.client.get(f"/v1/events?after={first['next_after']}", headers=admin).json()
    assert [e["memory_id"] for e in rest["events"]] == ["pref-2"]
    assert "content" not in rest["events"][0]


def test_events_with_a_negative_after_is_422(api: Api, admin: dict[str, str]) -> None:
    """after must be 0 or more."""
    response = api.client.get("/v1/events?after=-1", headers=admin)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "after"


def test_idempotent_retry_returns_the_first_result(api: Api, admin: dict[str, str]) -> None:
    """A retried POST with the same Idempotency-Key returns the same item, not a second one."""
    headers = admin | {"Idempotency-Key": "retry-1"}
    first = api.client.post("/v1/memories", json=write_body(), headers=headers)
    again = api.client.post("/v1/memories", json=write_body(), headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    events = api.client.get("/v1/events", headers=admin).json()["events"]
    assert len(events) == 1


def test_idempotency_key_reused_for_another_request_is_409(api: Api, admin: dict[str, str]) -> None:
    """The same Idempotency-Key with a different body is 409."""
    headers = admin | {"Idempotency-Key": "retry-1"}
    api.client.post("/v1/memories", json=write_body(), headers=headers)
    response = api.client.post(
        "/v1/memories", json=write_body(content="Something else."), headers=headers
    )
    assert response.status_code == 409
    assert response.json()["type"] == "urn:gmem:problem:idempotency-key-reused"


def test_an_invalid_idempotency_key_is_422(api: Api, admin: dict[str, str]) -> None:
    """An Idempotency-Key with a space is refused."""
    headers = admin | {"Idempotency-Key": "has space"}
    response = api.client.post("/v1/memories", json=write_body(), headers=headers)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "Idempotency-Key"


def test_a_correction_supersedes_the_old_item(api: Api, admin: dict[str, str]) -> None:
    """A trusted correction supersedes the item it corrects, which stays readable."""
    api.write(admin, "old")
    api.write(admin, "new", supersedes_id="old", content="The customer prefers SMS now.")
    old = api.client.get("/v1/memories/old", headers=admin).json()
    assert (old["status"], old["superseded_by"]) == ("superseded", "new")


def test_ttl_beyond_the_kind_maximum_is_422(api: Api, admin: dict[str, str]) -> None:
    """A TTL over the kind's maximum is refused, naming ttl_seconds."""
    body = write_body(kind="working_note", ttl_seconds=8 * 86_400)
    response = api.client.post("/v1/memories", json=body, headers=admin)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "ttl_seconds"


def test_integers_beyond_64_bits_are_422_not_500(api: Api, admin: dict[str, str]) -> None:
    """Numbers no store column can hold are refused at the edge, naming the field."""
    response = api.client.get(f"/v1/events?after={2**64}", headers=admin)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "after"
    body = write_body(expected_version=2**64)
    response = api.client.put("/v1/memories/big", json=body, headers=admin)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "expected_version"
