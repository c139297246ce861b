"""Governance survives the LangGraph store: quarantine, versions, erasure, scopes, TTLs."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

import pytest
from langgraph.store.base import PutOp

from governed_memory.core.model import MemoryItem, Principal
from governed_memory.core.values import Scope, Trust
from governed_memory.crypto import Keyring
from governed_memory.errors import (
    PermissionDenied,
    SelfPromotion,
    ValidationError,
    VersionConflict,
)
from governed_memory.integrations.langgraph import (
    Backend,
    GovernedStore,
    IdTaken,
    ItemFields,
    NamespaceMap,
)
from governed_memory.integrations.langgraph.mapping import KeyIds
from governed_memory.integrations.langgraph.store import tenant_secret
from governed_memory.service import MemoryService
from tests.integrations.conftest import FIELDS, ONE_SCOPE, Deployment

if TYPE_CHECKING:
    from governed_memory.client import Client

NAMESPACE = ("memories", "user-1")
#: LangMem's namespace ("memories", "{langgraph_user_id}") as purpose and subject.
LANGMEM = NamespaceMap(agent_id="support-bot", purpose=0, subject_id=1)


def test_an_agents_put_is_not_read_back_until_a_reviewer_promotes_it(
    deployment: Deployment,
) -> None:
    """An untrusted put lands in quarantine: get, search and list_namespaces do not see it;
    once the operator promotes it, all three do."""
    agent = deployment.store("agent")
    agent.put(NAMESPACE, "pref", {"content": "prefers dark mode"})
    assert agent.get(NAMESPACE, "pref") is None
    assert agent.search(("memories",), query="dark mode") == []
    assert agent.search(("memories",)) == []
    assert agent.list_namespaces() == []
    assert [m.id for m in deployment.quarantined()] == [deployment.memory_id(NAMESPACE, "pref")]
    assert deployment.promote_all() == 1
    item = agent.get(NAMESPACE, "pref")
    assert item is not None and item.value == {"content": "prefers dark mode"}
    assert [i.key for i in agent.search(("memories",), query="dark mode")] == ["pref"]
    assert agent.list_namespaces() == [NAMESPACE]


def test_an_agents_put_over_an_active_memory_is_a_correction_for_review(
    deployment: Deployment,
) -> None:
    """The active value stays what readers see while the agent's change waits; a second
    put reworks the same proposal; promotion replaces the value, one item per key."""
    app, agent = deployment.store("app"), deployment.store("agent")
    app.put(NAMESPACE, "pref", {"content": "likes tea"})
    agent.put(NAMESPACE, "pref", {"content": "likes coffee"})
    agent.put(NAMESPACE, "pref", {"content": "likes green tea"})
    seen = agent.get(NAMESPACE, "pref")
    assert seen is not None and seen.value == {"content": "likes tea"}
    waiting = deployment.quarantined()
    assert [(m.id, m.version, m.supersedes_id) for m in waiting] == [
        (deployment.memory_id(NAMESPACE, "pref", 1), 2, deployment.memory_id(NAMESPACE, "pref"))
    ]
    deployment.promote_all()
    seen = agent.get(NAMESPACE, "pref")
    assert seen is not None and seen.value == {"content": "likes green tea"}
    assert [i.value for i in agent.search(("memories",))] == [{"content": "likes green tea"}]
    assert deployment.read(deployment.memory_id(NAMESPACE, "pref")).status.value == "superseded"


def test_a_trusted_put_over_an_existing_key_is_a_rewrite_at_the_current_version(
    deployment: Deployment,
) -> None:
    """The app's second put rewrites the same memory: version 2, no second item."""
    app = deployment.store("app")
    app.put(NAMESPACE, "k", {"n": 1})
    app.put(NAMESPACE, "k", {"n": 2})
    memory = deployment.read(deployment.memory_id(NAMESPACE, "k"))
    assert (memory.version, memory.status.value) == (2, "active")
    assert deployment.history(memory.id) == ["memory.written", "memory.written"]
    assert [i.value for i in app.search(("memories",))] == [{"n": 2}]


class WriteMeanwhile:
    """A backend that lets another store put the same key just before its first write, as
    another process would between this put's read and its write."""

    def __init__(self, inner: Backend, meanwhile: Any) -> None:
        self.inner, self.meanwhile, self.done = inner, meanwhile, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def write(self, memory_id: str, request: dict[str, Any]) -> MemoryItem:
        if not self.done:
            self.done = True
            self.meanwhile()
        return self.inner.write(memory_id, request)


@pytest.mark.parametrize("existing", [False, True], ids=["new key", "existing key"])
def test_a_put_racing_another_surfaces_a_conflict_never_overwrites(
    deployment: Deployment, existing: bool
) -> None:
    """Two puts of one key that read the same version: the second raises VersionConflict
    and the first one's value stays."""
    app, other = deployment.store("app"), deployment.store("app")
    if existing:
        app.put(NAMESPACE, "k", {"n": 0})
    racing = GovernedStore(
        WriteMeanwhile(app.backend, lambda: other.put(NAMESPACE, "k", {"n": 1})),
        namespaces=ONE_SCOPE,
        fields=FIELDS["app"],
        key_secret=deployment.key_secret,
    )
    with pytest.raises(VersionConflict):
        racing.put(NAMESPACE, "k", {"n": 2})
    found = app.get(NAMESPACE, "k")
    assert found is not None and found.value == {"n": 1}


def test_a_delete_is_an_erasure_on_the_record(deployment: Deployment) -> None:
    """The operator's delete erases the memory (content destroyed, memory.erased in its
    history); the key can then be written again, as a new memory."""
    app, operator = deployment.store("app"), deployment.store("operator")
    app.put(NAMESPACE, "k", {"n": 1})
    operator.delete(NAMESPACE, "k")
    assert app.get(NAMESPACE, "k") is None
    erased = deployment.read(deployment.memory_id(NAMESPACE, "k"))
    assert (erased.status.value, erased.content) == ("deleted", None)
    assert deployment.history(erased.id) == ["memory.written", "memory.erased"]
    app.put(NAMESPACE, "k", {"n": 2})
    again = app.get(NAMESPACE, "k")
    assert again is not None and again.value == {"n": 2}
    assert deployment.read(deployment.memory_id(NAMESPACE, "k", 1)).status.value == "active"


def test_a_delete_erases_a_pending_correction_too(deployment: Deployment) -> None:
    """Deleting a key erases its active memory and the agent's proposal waiting beside it."""
    app, agent, operator = (deployment.store(r) for r in ("app", "agent", "operator"))
    app.put(NAMESPACE, "k", {"n": 1})
    agent.put(NAMESPACE, "k", {"n": 2})
    operator.delete(NAMESPACE, "k")
    assert deployment.quarantined() == []
    assert app.get(NAMESPACE, "k") is None


def assert_no_generation_readable(deployment: Deployment, generations: int) -> None:
    """Every generation of NAMESPACE's key "k" is deleted, its content gone, erased on the
    record."""
    for number in range(generations):
        memory = deployment.read(deployment.memory_id(NAMESPACE, "k", number))
        assert (memory.status.value, memory.content) == ("deleted", None), number
        assert deployment.history(memory.id)[-1] == "memory.erased"


def test_a_delete_erases_the_version_a_promoted_correction_superseded(
    deployment: Deployment,
) -> None:
    """After a correction is promoted, the value it replaced lives on as a superseded
    memory; deleting the key erases it too, so no version of any value stays readable."""
    app, agent, operator = (deployment.store(r) for r in ("app", "agent", "operator"))
    app.put(NAMESPACE, "k", {"v": "SECRET-ONE"})
    agent.put(NAMESPACE, "k", {"v": "SECRET-TWO"})
    assert deployment.promote_all() == 1
    assert deployment.read(deployment.memory_id(NAMESPACE, "k", 0)).status.value == "superseded"
    operator.delete(NAMESPACE, "k")
    assert_no_generation_readable(deployment, 2)
    assert app.get(NAMESPACE, "k") is None


def test_a_delete_erases_rejected_proposals_too(deployment: Deployment) -> None:
    """A correction a reviewer rejected keeps its content for review; deleting the key
    erases it with the memory it proposed to correct."""
    app, agent, operator = (deployment.store(r) for r in ("app", "agent", "operator"))
    app.put(NAMESPACE, "k", {"v": "SECRET-ONE"})
    agent.put(NAMESPACE, "k", {"v": "SECRET-TWO"})
    (proposal,) = deployment.quarantined()
    deployment.reject(proposal)
    agent.put(NAMESPACE, "k", {"v": "SECRET-THREE"})
    deployment.reject(deployment.quarantined()[0])
    operator.delete(NAMESPACE, "k")
    assert_no_generation_readable(deployment, 3)
    operator.delete(NAMESPACE, "k")  # again: nothing left to erase, nothing refused
    assert_no_generation_readable(deployment, 3)


def test_nobody_deletes_what_their_own_principal_wrote_and_agents_delete_nothing(
    deployment: Deployment,
) -> None:
    """The app's delete of its own memory is refused (four eyes); an agent key, without
    subject:forget, may not erase at all. The memory stays."""
    app, agent = deployment.store("app"), deployment.store("agent")
    app.put(NAMESPACE, "k", {"n": 1})
    with pytest.raises(SelfPromotion):
        app.delete(NAMESPACE, "k")
    with pytest.raises(PermissionDenied):
        agent.delete(NAMESPACE, "k")
    assert app.get(NAMESPACE, "k") is not None


def test_a_namespace_map_names_purpose_and_subject_from_the_namespace(
    deployment: Deployment,
) -> None:
    """With LangMem's namespace mapped to (purpose, subject), the memory carries them; a
    search needs the purpose and may leave the subject open."""
    fields = ItemFields(kind="preference", trust="trusted")  # type: ignore[arg-type]
    app = deployment.store("app", LANGMEM, fields=fields)
    app.put(("memories", "user-1"), "a", {"content": "likes tea"})
    app.put(("memories", "user-2"), "b", {"content": "likes coffee"})
    memory = deployment.read(deployment.memory_id(("memories", "user-1"), "a", namespaces=LANGMEM))
    scope = (memory.agent_id, memory.purpose, memory.subject_id, memory.kind.value)
    assert scope == ("support-bot", "memories", "user-1", "preference")
    assert {i.key for i in app.search(("memories",), query="likes")} == {"a", "b"}
    assert [i.key for i in app.search(("memories", "user-2"), query="likes")] == ["b"]
    with pytest.raises(ValueError, match="must reach the agent and the purpose"):
        app.search((), query="likes")
    with pytest.raises(ValueError, match="at least 2 labels"):
        app.put(("memories",), "c", {"content": "x"})


def test_a_search_never_leaves_the_scope_its_map_names(deployment: Deployment) -> None:
    """Two stores over the same namespaces but other purposes see none of each other's
    memories, by get, search or listing."""
    mine = deployment.store("app")
    theirs = deployment.store(
        "app", NamespaceMap(agent_id="graph", purpose="elsewhere", subject_id="everyone")
    )
    mine.put(NAMESPACE, "k", {"content": "mine"})
    assert theirs.get(NAMESPACE, "k") is None
    assert theirs.search(("memories",), query="mine") == []
    assert theirs.list_namespaces() == []


def test_memory_ids_are_stable_across_stores_and_show_no_key(deployment: Deployment) -> None:
    """Another store (another process) finds the key by the same id; the id holds neither
    the key nor the namespace."""
    deployment.store("app").put(NAMESPACE, "alice@example.com", {"n": 1})
    elsewhere = deployment.store("app")
    elsewhere.put(NAMESPACE, "alice@example.com", {"n": 2})
    memory_id = deployment.memory_id(NAMESPACE, "alice@example.com")
    assert deployment.read(memory_id).version == 2
    assert "alice" not in memory_id and "memories" not in memory_id


def test_memory_ids_are_keyed_by_a_secret_of_16_bytes_or_more(deployment: Deployment) -> None:
    """Without the store's secret nobody computes a key's ids (an empty or guessed secret
    gives other ids); a secret shorter than 16 bytes is refused, and over HTTP a store
    without one."""
    deployment.store("app").put(NAMESPACE, "alice@example.com", {"n": 1})
    memory_id = deployment.memory_id(NAMESPACE, "alice@example.com")
    assert deployment.read(memory_id).version == 1
    scope = ONE_SCOPE.scope(NAMESPACE)
    guessed = hmac.new(
        b"", json.dumps([*scope, list(NAMESPACE), "alice@example.com"]).encode(), hashlib.sha256
    ).hexdigest()[:32]
    assert guessed not in memory_id
    assert KeyIds.of(scope, NAMESPACE, "alice@example.com", bytes(16)).id(0) != memory_id
    for short in (b"", b"fifteen bytes!!"):
        with pytest.raises(ValueError, match="key_secret"):
            deployment.store("app", key_secret=short)
    with pytest.raises(ValueError, match="key_secret"):
        GovernedStore.over_http(cast("Client", object()), namespaces=ONE_SCOPE)


def test_two_agents_never_share_a_keys_ids(deployment: Deployment) -> None:
    """The agent is part of what the ids are derived from: the same namespace and key of
    two agents are two memories."""
    ids = {
        deployment.memory_id(NAMESPACE, "k", namespaces=NamespaceMap(agent, 0, 1))
        for agent in ("bot-a", "bot-b")
    }
    assert len(ids) == 2


def test_in_process_the_default_secret_is_the_tenants_own(bare_service: MemoryService) -> None:
    """A store in process without a key secret uses one derived from the service's master
    key for the principal's tenant: another tenant, or another master key, gets another."""
    mine = tenant_secret(bare_service, "acme")
    other_key = MemoryService(bare_service.store, Keyring(secrets.token_bytes(32)))
    assert len(mine) == 32 and mine == tenant_secret(bare_service, "acme")
    assert mine not in {tenant_secret(bare_service, "globex"), tenant_secret(other_key, "acme")}


def test_a_keys_id_held_by_another_agents_memory_is_a_clear_error(
    bare_service: MemoryService,
) -> None:
    """Another agent of the tenant that writes the id of bot-a's key under its own agent
    blocks the key: bot-a's put, which cannot see that memory, says so (IdTaken) rather
    than failing as an ordinary conflict."""
    scopes = frozenset({Scope.MEMORY_READ, Scope.MEMORY_WRITE})
    bot_a = Principal("acme", "a", scopes, Trust.TRUSTED, frozenset({"bot-a"}))
    bot_b = Principal("acme", "b", scopes, Trust.TRUSTED, frozenset({"bot-b"}))
    mine = NamespaceMap(agent_id="bot-a", purpose="notes", subject_id="user-1")
    fields = ItemFields(trust="trusted")
    store = GovernedStore.in_process(bare_service, bot_a, namespaces=mine, fields=fields)
    secret = tenant_secret(bare_service, "acme")
    taken = KeyIds.of(mine.scope(("n",)), ("n",), "k", secret).id(0)
    squat = {"agent_id": "bot-b", "purpose": "notes", "subject_id": "user-1"}
    bare_service.write(
        bot_b,
        fields.request() | squat | {"id": taken, "content": "mine now", "expected_version": 0},
    )
    with pytest.raises(IdTaken, match="cannot see"):
        store.put(("n",), "k", {"v": 1})
    assert store.get(("n",), "k") is None


def test_ttl_minutes_become_the_memorys_expiry_within_its_kinds_policy(
    held_clock: Deployment,
) -> None:
    """ttl=90 minutes expires the memory 90 minutes on (and it is no longer read); no
    ttl is the kind's default; a ttl beyond the kind's maximum is refused."""
    app = held_clock.store("app")
    app.put(NAMESPACE, "short", {"n": 1}, ttl=90)
    app.put(NAMESPACE, "default", {"n": 2}, ttl=None)
    short = held_clock.read(held_clock.memory_id(NAMESPACE, "short"))
    assert short.expires_at - short.updated_at == timedelta(minutes=90)
    default = held_clock.read(held_clock.memory_id(NAMESPACE, "default"))
    assert default.expires_at - default.updated_at == timedelta(days=90)  # fact's default
    with pytest.raises(ValidationError):
        app.put(NAMESPACE, "long", {"n": 3}, ttl=731 * 24 * 60)
    assert held_clock.clock is not None
    held_clock.clock.advance(minutes=91)
    assert app.get(NAMESPACE, "short") is None
    assert [i.key for i in app.search(("memories",))] == ["default"]
    app.put(NAMESPACE, "short", {"n": 4})  # an expired key is written anew
    assert held_clock.read(held_clock.memory_id(NAMESPACE, "short", 1)).status.value == "active"


def test_the_async_api_runs_the_same_operations(deployment: Deployment) -> None:
    """aput, aget, asearch, alist_namespaces and abatch answer like their sync twins."""
    app = deployment.store("app")

    async def run() -> None:
        await app.aput(NAMESPACE, "k", {"content": "async tea"})
        item = await app.aget(NAMESPACE, "k")
        assert item is not None and item.value == {"content": "async tea"}
        assert [i.key for i in await app.asearch(("memories",), query="tea")] == ["k"]
        assert await app.alist_namespaces(prefix=("memories",)) == [NAMESPACE]
        assert await app.abatch([PutOp(NAMESPACE, "j", {"n": 1})]) == [None]

    asyncio.run(run())
    assert app.get(NAMESPACE, "j") is not None


def test_a_key_erased_and_written_again_many_times_reads_its_newest_memory(
    deployment: Deployment,
) -> None:
    """Each re-creation after an erasure is the key's next generation; a read finds the
    newest among them (found by galloping and bisecting over the ids)."""
    app, operator = deployment.store("app"), deployment.store("operator")
    for generation in range(7):
        app.put(NAMESPACE, "k", {"n": generation})
        found = app.get(NAMESPACE, "k")
        assert found is not None and found.value == {"n": generation}
        assert (
            deployment.read(deployment.memory_id(NAMESPACE, "k", generation)).status.value
            == "active"
        )
        operator.delete(NAMESPACE, "k")
        assert app.get(NAMESPACE, "k") is None


def test_a_ranked_search_looks_further_when_the_filter_leaves_too_few(
    deployment: Deployment,
) -> None:
    """The best hit fails the filter: the search asks the service for more and returns
    the best hit that passes, with its score, and pages by offset."""
    app = deployment.store("app")
    app.put(NAMESPACE, "often", {"content": "tea tea tea", "tag": "a"})
    app.put(NAMESPACE, "once", {"content": "tea and biscuits", "tag": "b"})
    app.put(NAMESPACE, "also", {"content": "tea, green", "tag": "b"})
    best = app.search(("memories",), query="tea", limit=1)
    assert [i.key for i in best] == ["often"]
    tagged = app.search(("memories",), query="tea", filter={"tag": "b"}, limit=1)
    assert [i.key for i in tagged] == [app.search(("memories",), query="tea")[1].key]
    assert tagged[0].score is not None and tagged[0].score < best[0].score  # type: ignore[operator]
    both = app.search(("memories",), query="tea", filter={"tag": "b"})
    assert len(both) == 2
    page = app.search(("memories",), query="tea", filter={"tag": "b"}, limit=1, offset=1)
    assert [i.key for i in page] == [both[1].key]
