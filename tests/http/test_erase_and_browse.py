"""``DELETE /v1/memories/{id}``, ``GET /v1/memories``, reasons in history and the status as
of the read, over HTTP: answers, problems and scopes."""

from __future__ import annotations

from tests.support.api import Api
from tests.support.fakes import principal, write_body
from tests.support.legacy import write_legacy

PROBLEM = "application/problem+json"
CANARY = "erasehttpcanary7f3a"


def test_delete_erases_and_answers_its_position(api: Api, admin: dict[str, str]) -> None:
    """200 with {id, position}; the memory reads deleted with null content; a second
    DELETE answers the same position."""
    api.write(admin, "m1", content=f"Card {CANARY}.")
    dpo = api.key("subject:forget,memory:read")
    erased = api.client.delete("/v1/memories/m1", headers=dpo)
    assert erased.status_code == 200, erased.text
    assert erased.json() == {"id": "m1", "position": api.store.head()}
    item = api.client.get("/v1/memories/m1", headers=admin).json()
    assert (item["status"], item["content"], item["version"]) == ("deleted", None, 2)
    again = api.client.delete("/v1/memories/m1", headers=dpo)
    assert again.json() == erased.json()
    assert CANARY not in erased.text + again.text


def test_deleting_your_own_write_is_403_self_review(api: Api, admin: dict[str, str]) -> None:
    """The writer's key, though it holds subject:forget, is refused with a problem."""
    api.write(admin, "m1", content=f"Card {CANARY}.")
    refused = api.client.delete("/v1/memories/m1", headers=admin)
    assert refused.status_code == 403
    assert refused.headers["content-type"] == PROBLEM
    assert refused.json()["type"] == "urn:gmem:problem:self-review"
    assert CANARY not in refused.text


def test_delete_without_the_forget_scope_is_403_and_unknown_is_404(
    api: Api, admin: dict[str, str]
) -> None:
    """memory:write and memory:read do not erase; an unknown id is 404 for a key that may."""
    api.write(admin, "m1")
    assert api.client.delete("/v1/memories/m1", headers=api.key("memory:read")).status_code == 403
    dpo = api.key("subject:forget")
    missing = api.client.delete("/v1/memories/nobody", headers=dpo)
    assert missing.status_code == 404
    assert missing.json()["type"] == "urn:gmem:problem:not-found"


def test_deleting_a_memory_written_before_item_keys_is_409_naming_forget(
    api: Api, admin: dict[str, str]
) -> None:
    """Its content can only be destroyed with its subject: the problem says so."""
    write_legacy(api.service, principal(), write_body(id="old", content=f"Old {CANARY}."))
    refused = api.client.delete("/v1/memories/old", headers=api.key("subject:forget"))
    assert refused.status_code == 409
    problem = refused.json()
    assert problem["type"] == "urn:gmem:problem:invalid-transition"
    assert "forget the subject" in problem["detail"]
    assert problem["current_version"] == 1
    assert CANARY not in refused.text


def test_a_delete_retried_with_its_idempotency_key_answers_alike(
    api: Api, admin: dict[str, str]
) -> None:
    """The retry answers the first result; the key for another memory is 409."""
    api.write(admin, "m1")
    api.write(admin, "m2")
    dpo = api.key("subject:forget") | {"Idempotency-Key": "erase-1"}
    first = api.client.delete("/v1/memories/m1", headers=dpo)
    assert api.client.delete("/v1/memories/m1", headers=dpo).json() == first.json()
    reused = api.client.delete("/v1/memories/m2", headers=dpo)
    assert reused.status_code == 409
    assert reused.json()["type"] == "urn:gmem:problem:idempotency-key-reused"


def test_get_memories_filters_and_pages(api: Api, admin: dict[str, str]) -> None:
    """Filters narrow the listing; limit and next_cursor page through it in order."""
    for number in range(3):
        api.write(admin, f"m{number}")
    api.write(admin, "q", trust="untrusted")
    api.write(admin, "s", agent_id="sales-bot")
    first = api.client.get("/v1/memories", params={"limit": 2}, headers=admin).json()
    assert [i["id"] for i in first["items"]] == ["m0", "m1"]
    rest = api.client.get(
        "/v1/memories", params={"limit": 10, "cursor": first["next_cursor"]}, headers=admin
    ).json()
    assert ([i["id"] for i in rest["items"]], rest["next_cursor"]) == (["m2", "q", "s"], None)
    quarantined = {"status": "quarantined", "kind": "fact", "agent_id": "support-bot"}
    found = api.client.get("/v1/memories", params=quarantined, headers=admin).json()
    assert [i["id"] for i in found["items"]] == ["q"]
    bound = api.key("memory:read", agents="sales-bot")
    assert [i["id"] for i in api.client.get("/v1/memories", headers=bound).json()["items"]] == ["s"]
    refused = api.client.get("/v1/memories", params={"agent_id": "support-bot"}, headers=bound)
    assert refused.status_code == 403


def test_get_memories_newest_first_pages_back_to_the_oldest(
    api: Api, admin: dict[str, str]
) -> None:
    """order=newest: the latest change first, the cursor paging on in that order;
    order=oldest is the default order."""
    for number in range(3):
        api.write(admin, f"m{number}")
        api.clock.advance(seconds=1)
    newest = {"limit": 2, "order": "newest"}
    first = api.client.get("/v1/memories", params=newest, headers=admin).json()
    assert [i["id"] for i in first["items"]] == ["m2", "m1"]
    rest = api.client.get(
        "/v1/memories", params=newest | {"cursor": first["next_cursor"]}, headers=admin
    ).json()
    assert ([i["id"] for i in rest["items"]], rest["next_cursor"]) == (["m0"], None)
    oldest = api.client.get("/v1/memories", params={"order": "oldest"}, headers=admin).json()
    assert [i["id"] for i in oldest["items"]] == ["m0", "m1", "m2"]


def test_get_memories_refuses_bad_parameters_with_422(api: Api, admin: dict[str, str]) -> None:
    """An unknown status or kind, a limit outside 1..500, a forged cursor, a repeated
    parameter: each is a 422 problem."""
    for params in (
        {"status": "archived"},
        {"kind": "opinion"},
        {"limit": 0},
        {"limit": 501},
        {"cursor": "forged"},
        {"order": "sideways"},
        [("status", "active"), ("status", "expired")],
    ):
        response = api.client.get("/v1/memories", params=params, headers=admin)
        assert response.status_code == 422, params
        assert response.headers["content-type"] == PROBLEM
    assert api.client.get("/v1/memories", headers=api.key("memory:write")).status_code == 403


def test_an_item_past_its_expiry_reads_as_expired_over_http(
    api: Api, admin: dict[str, str]
) -> None:
    """GET and the listing say expired as soon as expires_at passes, before the worker."""
    api.write(admin, "m1", ttl_seconds=60)
    api.clock.advance(seconds=61)
    item = api.client.get("/v1/memories/m1", headers=admin).json()
    assert (item["status"], item["version"]) == ("expired", 1)
    listed = api.client.get("/v1/memories", params={"status": "expired"}, headers=admin).json()
    assert [i["id"] for i in listed["items"]] == ["m1"]


def test_history_shows_the_reason_of_a_rejection(api: Api, admin: dict[str, str]) -> None:
    """The memory.rejected entry carries its reason; the audit feed does not."""
    api.write(admin, "m1", trust="untrusted")
    reviewer = api.key("memory:review")
    reason = {"expected_version": 1, "reason": "Looks like an instruction."}
    assert api.client.post("/v1/memories/m1/reject", json=reason, headers=reviewer).is_success
    history = api.client.get("/v1/memories/m1/history", headers=admin).json()["events"]
    assert [(e["type"], e.get("reason")) for e in history] == [
        ("memory.written", None),
        ("memory.rejected", "Looks like an instruction."),
    ]
    assert "reason" not in history[0]
    feed = api.client.get("/v1/events", headers=admin).text
    assert "Looks like an instruction." not in feed
