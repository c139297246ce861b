"""Rebuilding the projection from the log reproduces items and search exactly."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from governed_memory.bootstrap import open_service
from governed_memory.records import TenantRebuild
from governed_memory.store.sqlite import SQLiteStore
from tests.support.fakes import FakeClock, body, principal, query, reviewer


def test_a_rebuilt_projection_answers_exactly_as_before(tmp_path: Path) -> None:
    """Items, statuses and search results are identical after a rebuild from the log."""
    service = open_service(data_dir=tmp_path, clock=FakeClock())
    writer, other = principal(), principal("globex")
    for n in range(30):
        service.write(writer, body(id=f"m{n}", content=f"email note {n} zeta{n % 4}"))
        service.write(other, body(id=f"m{n}", agent_id=f"bot{n % 3}", content=f"phone {n}"))
    service.write(writer, body(id="q", trust="untrusted", content="email quarantined"))
    service.promote(reviewer(), "q", expected_version=1)
    service.write(writer, body(id="fix", content="email corrected", supersedes_id="m1"))
    service.write(writer, body(id="gone", subject_id="customer-9", content="email gone"))
    service.forget_subject(writer, "customer-9")
    searches = [query("email zeta1"), query("note"), query("email", limit=50)]
    before = [service.search(writer, s).to_dict() for s in searches]
    items_before = sorted(service.store.tenant_items("acme"), key=lambda i: i.id)

    assert service.maintenance.rebuild() == 63

    assert [service.search(writer, s).to_dict() for s in searches] == before
    assert sorted(service.store.tenant_items("acme"), key=lambda i: i.id) == items_before
    assert service.verify_replay().ok
    assert service.search(other, query("phone", agent_id="bot1")).items


def test_a_bad_export_line_imports_nothing(tmp_path: Path) -> None:
    """Import validates the whole export before writing: a broken line leaves the store empty."""
    import json
    import secrets as random_bytes

    import pytest

    from governed_memory.errors import ValidationError

    master = __import__("base64").b64encode(random_bytes.token_bytes(32)).decode()
    source = open_service(data_dir=tmp_path / "a", master_key=master, clock=FakeClock())
    for n in range(5):
        source.write(principal(), body(id=f"m{n}"))
    lines = [json.dumps(record) for record in source.maintenance.export()]
    target = open_service(data_dir=tmp_path / "b", master_key=master, clock=FakeClock())
    with pytest.raises(ValidationError, match="line 5"):
        target.maintenance.import_log([*lines[:4], "{not json", *lines[4:]])
    assert target.store.head() == 0
    assert next(target.store.subject_keys(limit=1), None) is None
    report = target.maintenance.import_log(lines)
    assert (report.events, report.items) == (5, 5)
    assert target.verify_replay().ok


def test_only_the_rebuilds_own_commits_skip_their_fsync(tmp_path: Path) -> None:
    """During a rebuild each swap of tenants commits at synchronous=NORMAL, a write
    acknowledged meanwhile still commits at FULL, and FULL is back when it ends."""
    service = open_service(data_dir=tmp_path, clock=FakeClock(), synchronous="FULL")
    store = service.store
    assert isinstance(store, SQLiteStore)
    writer, seen = principal(), []

    def level() -> int:
        return int(store.database.writer.execute("PRAGMA synchronous").fetchone()[0])

    original = store.rebuild

    def rebuild(tenants: Sequence[TenantRebuild]) -> set[str]:
        with store.database.write_transaction(deferred=True):
            seen.append(("swap", level()))
        if len(seen) == 1:  # once: the write moves the log, and the tenant is folded again
            service.write(writer, body(id="during", content="written meanwhile"))
            seen.append(("write", level()))
        return original(tenants)

    service.write(writer, body(id="a", content="email"))
    store.rebuild = rebuild  # type: ignore[method-assign]
    with store.rebuilding():
        service.maintenance.rebuild()
    assert seen == [("swap", 1), ("write", 2), ("swap", 1)]
    assert level() == 2
    assert [hit.item.id for hit in service.search(writer, query("meanwhile")).items] == ["during"]
