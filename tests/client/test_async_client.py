"""``AsyncClient``: the same calls as ``Client``, awaited, with the same values and errors."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from governed_memory import (
    AsyncClient,
    Client,
    NotFound,
    SelfPromotion,
    Status,
    Trust,
    VersionConflict,
)
from governed_memory.client import RetryPolicy
from tests.client.conftest import AsyncFlakyTransport
from tests.support.api import FAST, Served
from tests.support.fakes import fact


def run(
    served: Served, key: str, body: Callable[[AsyncClient], Awaitable[Any]], **opts: Any
) -> Any:
    """Run ``body`` with an AsyncClient of ``served`` in a fresh event loop."""
    opts.setdefault("retry", FAST)

    async def main() -> Any:
        async with AsyncClient(served.url, key, **opts) as client:
            return await body(client)

    return anyio.run(main)


def test_every_method_works_awaited(served: Served) -> None:
    """Write, create, get, history, review, queue, search, list, erase, forget, events and
    health, awaited."""
    writer = served.key("memory:write,memory:read,audit:read,subject:forget", trust="untrusted")
    reviewer = served.key("memory:review,memory:read")

    async def as_writer(client: AsyncClient) -> None:
        put = await client.write("pref-1", **fact(trust="untrusted"))
        assert put.created and put.item.status is Status.QUARANTINED
        posted = await client.create(**fact(trust="untrusted", content="Second."))
        assert posted.created
        # Unreviewed content is shown to reviewers only, even to the key that wrote it.
        assert (await client.get("pref-1")) == dataclasses.replace(put.item, content=None)
        assert [e.version for e in await client.history("pref-1")] == [1]
        assert len(await client.events()) == 2
        assert await client.live() and await client.ready() and await client.health()

    async def as_reviewer(client: AsyncClient) -> None:
        page = await client.list_quarantine(agent_id="support-bot")
        assert page.items[0].id == "pref-1"
        promoted = await client.promote("pref-1", 1)
        assert (promoted.status, promoted.trust) == (Status.ACTIVE, Trust.VERIFIED)
        rejected = await client.reject(page.items[1].id, 1, "duplicate")
        assert rejected.status is Status.REJECTED
        found = await client.search("support-bot", "support", "email", token_budget=100)
        assert [hit.item.id for hit in found.items] == ["pref-1"]
        assert found.used_tokens <= 100

    async def forget(client: AsyncClient) -> None:
        assert [i.id for i in (await client.list(status="rejected")).items] != []
        result = await client.forget_subject("customer-1")
        assert result.affected == 1  # the other one is erased already

    async def erase(client: AsyncClient) -> None:
        erased = await client.erase("pref-1")
        assert (erased.id, erased.position) == ("pref-1", (await client.events())[-1].position)
        page = await client.list(status=Status.DELETED, limit=1)
        assert [item.id for item in page.items] == ["pref-1"]

    run(served, writer, as_writer)
    run(served, reviewer, as_reviewer)
    run(served, served.key("subject:forget,memory:read,audit:read"), erase)
    run(served, writer, forget)


def test_errors_are_the_library_classes(served: Served) -> None:
    """The async client raises NotFound, VersionConflict and SelfPromotion like the sync one."""
    key = served.key("memory:write,memory:read,memory:review", trust="untrusted")

    async def body(client: AsyncClient) -> None:
        with pytest.raises(NotFound):
            await client.get("nobody-wrote-this")
        item = (await client.write("pref-1", **fact(trust="untrusted"))).item
        with pytest.raises(VersionConflict) as conflict:
            await client.write("pref-1", **fact(trust="untrusted"))
        assert conflict.value.current_version == 1
        with pytest.raises(SelfPromotion):
            await client.promote(item.id, item.version)

    run(served, key, body)


def test_a_lost_answer_is_retried_without_a_second_write(served: Served) -> None:
    """Refused, then answered-but-lost, then fine: one memory, one key on every try."""
    transport = AsyncFlakyTransport(refuse=1, drop=1)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def body(client: AsyncClient) -> str:
        return (await client.create(**fact())).item.id

    memory_id = run(
        served,
        served.key(),
        body,
        transport=transport,
        retry=RetryPolicy(attempts=3),
        sleep=sleep,
    )
    assert len(transport.sent) == 3
    assert len({request.headers["Idempotency-Key"] for request in transport.sent}) == 1
    assert len(slept) == 2
    assert [e.memory_id for e in served.client(served.key()).events()] == [memory_id]


def test_both_clients_offer_the_same_methods() -> None:
    """Client and AsyncClient have the same public methods with the same parameters."""

    def methods(cls: type) -> dict[str, inspect.Signature]:
        return {
            name: inspect.signature(member)
            for name, member in vars(cls).items()
            if callable(member) and not name.startswith("_")
        }

    sync, asynchronous = methods(Client), methods(AsyncClient)
    assert set(sync) - {"close"} == set(asynchronous) - {"aclose"}
    for name, signature in sync.items():
        if name != "close":
            assert asynchronous[name].parameters == signature.parameters, name
            assert inspect.iscoroutinefunction(getattr(AsyncClient, name)), name
