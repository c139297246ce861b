"""Memory poisoning over HTTP: every payload of the corpus waits in quarantine (SPEC §2, §6).

tests/data/poisoning.jsonl holds the payloads: claims of trust, fake system and tool
markup, instructions hidden with zero-width, tag and bidi characters, homoglyphs, MINJA-style
bridging steps and shortened indication prompts, AgentPoison-style triggers with malicious
demonstrations, injections in provenance fields, oversized and structured content, metadata
gaming and corrections aimed at verified memories. An agent key (highest trust
``untrusted``) writes each one; then:

- 100 % are quarantined, untrusted, with confidence capped, exactly as written;
- 0 % are found by a search made of their own words, by the agent or by an operator;
- no payload raises trust: claiming ``trusted`` is 403, and a correction in quarantine
  supersedes nothing;
- every payload is in the review queue, and rejecting them keeps them out of search.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import Api, build_api

CORPUS = Path(__file__).resolve().parents[1] / "data" / "poisoning.jsonl"
SCOPE = {"agent_id": "support-bot", "purpose": "support"}
BENIGN = {
    "benign-refund": "The verified refund policy: refunds up to 50 EUR within 30 days.",
    "benign-contact": "The customer prefers to be contacted by email, never by phone.",
    "benign-admin": "Only the administrator of the account may change the shipping address.",
    "benign-system": "The billing system sends invoices on the first day of each month.",
    "benign-trust": "Trusted devices are remembered for 30 days after sign-in.",
    "benign-ignore": "Ignore duplicate tickets from the same customer within one hour.",
    "benign-patient": "Patient records are only shared with the treating physician.",
    "benign-memory": "Memory of previous orders helps the agent suggest reorders.",
}
MAX_QUERY_TERMS = 32
MAX_QUERY_CHARS = 1000


def load_corpus() -> list[dict[str, Any]]:
    """The payloads, one JSON object per line."""
    with CORPUS.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def queries(content: str) -> list[str]:
    """Searches made of a payload's own words: its text, then its terms 32 at a time."""
    words = list(
        dict.fromkeys(re.findall(r"\w+", unicodedata.normalize("NFKC", content).casefold()))
    )
    found = [content[:MAX_QUERY_CHARS]] if content.strip() else []
    for start in range(0, len(words), MAX_QUERY_TERMS):
        chunk = " ".join(words[start : start + MAX_QUERY_TERMS])[:MAX_QUERY_CHARS]
        found.append(chunk)
    return [q for q in found if q.strip()]


@dataclass
class Poisoned:
    """The app after every payload was written by the agent key."""

    api: Api
    agent: dict[str, str]
    operator: dict[str, str]
    reviewer: dict[str, str]
    corpus: list[dict[str, Any]]
    written: dict[str, dict[str, Any]]  # payload id -> item as answered

    def search(self, headers: dict[str, str], query: str) -> list[dict[str, Any]]:
        body = SCOPE | {"query": query, "limit": 100, "token_budget": 32_000}
        response = self.api.client.post("/v1/search", json=body, headers=headers)
        assert response.status_code == 200, response.text
        items: list[dict[str, Any]] = response.json()["items"]
        return items


def write_payload(api: Api, headers: dict[str, str], payload: dict[str, Any], **extra: Any) -> Any:
    body = SCOPE | {
        "subject_id": "customer-1",
        "kind": payload.get("kind", "fact"),
        "content": payload["content"],
        "provenance": payload.get("provenance", {"source": "chat", "ref": payload["id"]}),
        "confidence": payload.get("confidence", 0.9),
        "expected_version": 0,
    }
    if payload.get("supersedes"):
        body["supersedes_id"] = "benign-refund"
    return api.client.put(f"/v1/memories/{payload['id']}", json=body | extra, headers=headers)


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Poisoned]:
    """Benign trusted memories, then the whole corpus written by an untrusted agent key."""
    with ExitStack() as stack:
        api = build_api(tmp_path_factory.mktemp("poison"), stack, rate_limit_requests=10**9)
        operator = api.key("memory:write,memory:read,audit:read", trust="trusted")
        agent = api.key("memory:write,memory:read", trust="untrusted", agents="support-bot")
        reviewer = api.key("memory:review,memory:read", trust="untrusted")
        for memory_id, content in BENIGN.items():
            api.write(operator, memory_id, content=content, **SCOPE)
        corpus = load_corpus()
        written = {}
        for payload in corpus:
            response = write_payload(api, agent, payload)
            assert response.status_code == 201, (payload["id"], response.text)
            written[payload["id"]] = response.json()
        yield Poisoned(api, agent, operator, reviewer, corpus, written)


def test_the_corpus_has_at_least_200_distinct_payloads() -> None:
    """The corpus is big and varied enough to mean something."""
    corpus = load_corpus()
    assert len(corpus) >= 200
    assert len({p["id"] for p in corpus}) == len(corpus)
    assert len({p["content"] for p in corpus}) >= 180
    assert len({p["category"] for p in corpus}) >= 10


def test_every_payload_is_quarantined_untrusted_and_kept_as_written(poisoned: Poisoned) -> None:
    """100 % quarantined, trust untrusted, confidence capped, content and provenance verbatim."""
    quarantined = 0
    for payload in poisoned.corpus:
        item = poisoned.written[payload["id"]]
        assert item["status"] == "quarantined", payload["id"]
        assert item["trust"] == "untrusted", payload["id"]
        assert item["confidence"] <= 0.5, payload["id"]
        assert item["content"] == unicodedata.normalize("NFC", payload["content"])
        sent = payload.get("provenance", {"source": "chat", "ref": payload["id"]})
        assert item["provenance"] == {"version": None} | sent
        stored = poisoned.api.client.get(f"/v1/memories/{payload['id']}", headers=poisoned.agent)
        assert (stored.json()["status"], stored.json()["trust"]) == ("quarantined", "untrusted")
        quarantined += 1
    assert quarantined == len(poisoned.corpus)


def test_no_payload_is_found_by_its_own_words_before_promotion(poisoned: Poisoned) -> None:
    """0 % retrievable: searching each payload's words returns benign memories only."""
    poison = set(poisoned.written)
    searches = benign_hits = 0
    for payload in poisoned.corpus:
        for query in queries(payload["content"]):
            for headers in (poisoned.agent, poisoned.operator):
                hits = poisoned.search(headers, query)
                searches += 1
                found = {hit["id"] for hit in hits}
                assert not found & poison, (payload["id"], query[:80])
                assert all(hit["status"] == "active" for hit in hits)
                benign_hits += len(found)
    assert searches >= 2 * len(poisoned.corpus)
    assert benign_hits > 0  # the searches do find things: the benign memories


def test_no_payload_can_claim_trust_with_an_agent_key(poisoned: Poisoned) -> None:
    """Asking for trusted (or verified) with the agent key is refused and writes nothing."""
    head = poisoned.api.service.store.head()
    for payload in poisoned.corpus[:60]:
        for trust in ("trusted", "verified"):
            response = write_payload(
                poisoned.api, poisoned.agent, payload | {"id": payload["id"] + "-t"}, trust=trust
            )
            assert response.status_code in (403, 422), response.text
            assert response.headers["content-type"] == "application/problem+json"
    assert poisoned.api.service.store.head() == head


def test_a_quarantined_correction_supersedes_nothing(poisoned: Poisoned) -> None:
    """Corrections aimed at the verified refund policy leave it active and found."""
    target = poisoned.api.client.get("/v1/memories/benign-refund", headers=poisoned.operator)
    assert target.json()["status"] == "active"
    assert target.json()["superseded_by"] is None
    hits = poisoned.search(poisoned.operator, "refund policy")
    assert "benign-refund" in {hit["id"] for hit in hits}


def test_the_history_of_a_payload_is_one_write_by_the_agent(poisoned: Poisoned) -> None:
    """Nothing in content, provenance or confidence produced a second event."""
    for payload in poisoned.corpus[::10]:
        history = poisoned.api.client.get(
            f"/v1/memories/{payload['id']}/history", headers=poisoned.operator
        ).json()["events"]
        assert [event["type"] for event in history] == ["memory.written"]


def test_every_payload_waits_in_the_review_queue_and_rejection_keeps_it_out(
    poisoned: Poisoned,
) -> None:
    """The reviewer sees each payload; rejected ones stay out of search for good."""
    queued: dict[str, int] = {}
    cursor = None
    while True:
        params = {"limit": 100} | ({"cursor": cursor} if cursor else {})
        page = poisoned.api.client.get(
            "/v1/quarantine", params=params, headers=poisoned.reviewer
        ).json()
        queued |= {item["id"]: item["version"] for item in page["items"]}
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert set(poisoned.written) <= set(queued)
    for payload in poisoned.corpus[::3]:
        response = poisoned.api.client.post(
            f"/v1/memories/{payload['id']}/reject",
            json={"expected_version": queued[payload["id"]], "reason": "memory poisoning"},
            headers=poisoned.reviewer,
        )
        assert response.status_code == 200, response.text
        for query in queries(payload["content"])[:2]:
            assert payload["id"] not in {h["id"] for h in poisoned.search(poisoned.agent, query)}
