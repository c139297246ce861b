"""SQLite checks tenants ahead of a rebuild in worker processes (issue 16): a tenant whose
rows already are the fold of its log is found intact there and not folded again, and is
taken as rebuilt only if no write can have changed it since. Everything a rebuild repairs
it still repairs; whatever goes wrong with the workers, the rebuild does the work itself.

The log of these stores is far below ``intact.PARALLEL_EVENTS``, so each test that wants
the workers lowers it (and asks for two of them whatever the machine has)."""

# ruff: noqa: S608 - the statements are this test's own constants: no input reaches them

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from governed_memory.codec import ITEM_COLUMNS
from governed_memory.records import IntactCheck, NothingIntact
from governed_memory.service import MemoryService
from governed_memory.service.reindex import Progress
from governed_memory.store.sqlite import SQLiteStore, intact
from tests.conftest import make_store
from tests.store.test_rebuild_repairs import (
    ACME,
    DAMAGES,
    ITEM,
    UNREADABLE,
    Damage,
    ids,
    projection,
    run,
    two_tenants,
    unreadable,
    versions,
)
from tests.support.fakes import body
from tests.support.legacy import canonical_event_row, canonical_event_rows

TENANTS = {"acme", "globex"}
#: Damages of ``test_rebuild_repairs.DAMAGES`` that reach globex's rows too (the others
#: are acme's alone).
ACROSS_TENANTS = {
    "memories.tenant_id",
    "a document and its postings moved to a scope of another tenant",
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    for made in make_store("sqlite", tmp_path):
        assert isinstance(made, SQLiteStore)
        yield made


@pytest.fixture
def service(store: SQLiteStore) -> MemoryService:
    return two_tenants(store)


def workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tenants are checked in two worker processes, however small the log."""
    monkeypatch.setattr(intact, "PARALLEL_EVENTS", 0)
    monkeypatch.setattr(intact, "processes", lambda: 2)


@pytest.fixture(name="workers")
def _workers(monkeypatch: pytest.MonkeyPatch) -> None:
    workers(monkeypatch)


def as_worker(
    command: list[str], stdin: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``command`` run as the rebuild runs a worker (this process's modules on its path),
    given ``stdin``; it must succeed."""
    return subprocess.run(
        command,
        input=stdin,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=intact.module_path()),
        cwd=cwd,
        timeout=60,
        check=True,
    )


def check_share(
    path: str | Path, tenants: Sequence[str], page: int | None = None
) -> list[tuple[Any, ...]]:
    """(tenant, through, events, items, active) of each tenant of ``tenants`` a checking
    worker, started as the rebuild starts it, finds intact (its log read ``page`` events at
    a time, if given). Always in a process of its own: a worker reads with its own copy of
    SQLite, which must not open a file this process has open."""
    command = intact.worker_command(Path(path))
    if page is not None:
        paged = f"import {intact.WORKER_MODULE} as c; c.EVENT_PAGE = {page}; from "
        assert command[-2].count("; from ") == 1
        command[-2] = command[-2].replace("; from ", f"; {paged}")
    (answer,) = as_worker(command, json.dumps(list(tenants)) + "\n").stdout.splitlines()
    return [tuple(row) for row in json.loads(answer)]


def checks(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> list[IntactCheck]:
    """Every check the store makes from now on, as the rebuild got it."""
    made: list[IntactCheck] = []
    real = store.check_intact

    def recorded(tenants: Sequence[str]) -> IntactCheck:
        made.append(real(tenants))
        return made[-1]

    monkeypatch.setattr(store, "check_intact", recorded)
    return made


def test_an_intact_store_is_checked_in_workers_and_nothing_is_folded_or_written(
    service: MemoryService, store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone: list[Progress] = []
    service.maintenance.rebuild(alone.append)  # no workers: the log is small
    workers(monkeypatch)
    made = checks(store, monkeypatch)
    folded: list[str] = []
    real_events = store.tenant_events
    monkeypatch.setattr(store, "tenant_events", lambda t: folded.append(t) or real_events(t))
    before, written = projection(store), versions(store)
    progress: list[Progress] = []

    assert service.maintenance.rebuild(progress.append) == 9

    assert set(made[0].tenants) == TENANTS
    assert {t: made[0].tenants[t].items for t in TENANTS} == {"acme": 8, "globex": 1}
    assert folded == []  # neither tenant's log was read again
    assert versions(store) == written
    assert projection(store) == before
    assert progress[-1] == alone[-1] == Progress(tenants_done=2, tenants=2, indexed=6, items=6)
    assert service.verify_replay().differences == []


@pytest.mark.parametrize("damage", [d for d in DAMAGES if not d.reindex], ids=str)
def test_a_tenant_damaged_before_the_check_is_not_intact_and_is_repaired(
    service: MemoryService,
    store: SQLiteStore,
    workers: None,
    damage: Damage,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = checks(store, monkeypatch)
    before, searched = projection(store), ids(service, "email")
    run(store, *damage.statements)

    service.maintenance.rebuild()

    assert projection(store) == before
    assert service.verify_replay().differences == []
    assert ids(service, "email") == searched
    both = str(damage) in ACROSS_TENANTS
    assert set(made[0].tenants) == (set() if both else {"globex"})  # the undamaged are found


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_tenant_with_a_document_whose_terms_cannot_be_read_is_not_intact_and_is_repaired(
    service: MemoryService,
    store: SQLiteStore,
    workers: None,
    name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker reading it does not fail: it finds acme not intact (globex is), and the
    rebuild indexes the item again from its content."""
    made = checks(store, monkeypatch)
    before, searched = projection(store), ids(service, "email")
    run(store, *unreadable(name, store).statements)

    service.maintenance.rebuild()

    assert set(made[0].tenants) == {"globex"}
    assert projection(store) == before
    assert service.verify_replay().differences == []
    assert ids(service, "email") == searched


@pytest.mark.parametrize("page", [1, 2, 3, 7])
def test_a_log_read_a_page_at_a_time_is_checked_whole(
    service: MemoryService, store: SQLiteStore, page: int
) -> None:
    """acme's log is longer than a page of these sizes: every page is read, in order, and
    the answer is the one of a page longer than the log; a damage is still found."""
    path = str(store.database.path)
    whole = check_share(path, sorted(TENANTS))

    assert check_share(path, sorted(TENANTS), page) == whole
    assert [(t, events) for t, _, events, _, _ in whole] == [("acme", 11), ("globex", 1)]
    run(store, f"UPDATE memories SET confidence = confidence / 2 WHERE rowid = {ITEM}")
    assert [t for t, *_ in check_share(path, sorted(TENANTS), page)] == ["globex"]


#: Damages of SQLite's shared content (an item's row holding x'', its content read from
#: the compact ``memory.written`` event of its content version: ``sql.ITEM_CONTENT``) that
#: the store reads as another row than the fold makes. The check reads rows with x'' as
#: stored and resolves it from the log it folds; each must leave acme to the rebuild.
CONTENT_DAMAGES = [
    Damage(  # the store reads the erased content back from the event
        "an erased item's row taking its content from its event",
        ("UPDATE memories SET content = x'' WHERE tenant_id = 'acme' AND id = 'gone'",),
    ),
    Damage(  # the store reads the first version's content, and its version
        "a rewritten item's row taking its first version's content",
        ("UPDATE memories SET content_version = 1 WHERE tenant_id = 'acme' AND id = 'm0'",),
    ),
]


@pytest.mark.parametrize("damage", CONTENT_DAMAGES, ids=str)
def test_a_row_sharing_content_its_event_does_not_hold_for_it_is_not_intact(
    service: MemoryService, store: SQLiteStore, workers: None, damage: Damage
) -> None:
    path = str(store.database.path)
    assert [t for t, *_ in check_share(path, sorted(TENANTS))] == ["acme", "globex"]
    before = projection(store)
    run(store, *damage.statements)
    assert projection(store) != before

    assert [t for t, *_ in check_share(path, sorted(TENANTS))] == ["globex"]
    service.maintenance.rebuild()
    assert projection(store) == before
    assert service.verify_replay().differences == []


def test_a_row_sharing_content_with_a_version_rewritten_in_the_canonical_form_is_not_intact(
    service: MemoryService, store: SQLiteStore, workers: None
) -> None:
    """m0's second version's event holds its content in base64 only (as a log written
    before the compact form), while its row still says x'': the store reads no content
    there, though an earlier version's compact event has some; the check must not take
    the folded content for it."""
    path = store.database.path
    assert canonical_event_row(path, "acme", "m0", 2) == 1
    assert service.get(ACME, "m0").content is None  # what the store now reads

    assert [t for t, *_ in check_share(str(path), sorted(TENANTS))] == ["globex"]
    service.maintenance.rebuild()
    assert service.get(ACME, "m0").content == "Calls on Fridays."
    assert service.verify_replay().differences == []


def test_rows_of_a_log_of_the_canonical_form_are_compared_with_their_own_content(
    service: MemoryService, store: SQLiteStore, workers: None
) -> None:
    """A log written before the compact form: its events hold no content column, so the
    items keep their content in their rows, compared as they are; a row that shares its
    content with such an event (which the store reads as none) is not intact."""
    path = store.database.path
    assert canonical_event_rows(path) == 10  # every memory.written event of both tenants
    before = projection(store)
    assert b"" not in {row[ITEM_COLUMNS.index("content")] for row in before["memories"]}
    assert [t for t, *_ in check_share(str(path), sorted(TENANTS))] == ["acme", "globex"]

    run(store, "UPDATE memories SET content = x'' WHERE tenant_id = 'acme' AND id = 'm1'")

    assert [t for t, *_ in check_share(str(path), sorted(TENANTS))] == ["globex"]
    service.maintenance.rebuild()
    assert projection(store) == before
    assert service.verify_replay().differences == []


def test_workers_import_this_process_s_modules_not_those_where_they_run(
    service: MemoryService,
    store: SQLiteStore,
    workers: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A package of the same name in the working directory is not imported by the
    workers (without ``-P``, ``python -c`` would put that directory first on their
    path)."""
    planted = tmp_path / "planted" / "governed_memory"
    planted.mkdir(parents=True)
    (planted / "__init__.py").write_text("raise SystemExit(3)\n")
    monkeypatch.chdir(planted.parent)
    made = checks(store, monkeypatch)

    service.maintenance.rebuild()

    assert set(made[0].tenants) == TENANTS


def test_a_worker_runs_its_module_once_and_answers_each_share(
    service: MemoryService, store: SQLiteStore, tmp_path: Path
) -> None:
    """Started as the rebuild starts it: one answer a share, and nothing on its standard
    error (``python -m`` ran the module a second time as ``__main__``, with a warning)."""
    path = str(store.database.path)
    done = as_worker(
        intact.worker_command(store.database.path), '["acme", "globex"]\n["globex"]\n', tmp_path
    )

    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers == [
        [list(row) for row in check_share(path, ["acme", "globex"])],
        [list(row) for row in check_share(path, ["globex"])],
    ]
    assert [t for t, *_ in answers[0]] == ["acme", "globex"]
    assert done.stderr == ""


#: What a checking worker has no use for: the service, the write paths of the store, its
#: search and migrations (importing them took about 40 % of a worker's start).
NOT_FOR_A_WORKER = (
    "governed_memory.service",
    "governed_memory.core.commands",
    "governed_memory.results",
    "governed_memory.crypto",
    "governed_memory.store.migrations",
    "governed_memory.store.sqlite.store",
    "governed_memory.store.sqlite.database",
    "governed_memory.store.sqlite.batch",
    "governed_memory.store.sqlite.bulk",
    "governed_memory.store.sqlite.search",
    "sqlite3",  # the worker reads with APSW's SQLite, the one copy it opens files with
    "_sqlite3",
)


def test_a_worker_imports_what_it_checks_with_not_the_store(
    service: MemoryService, store: SQLiteStore, tmp_path: Path
) -> None:
    """A worker is a new interpreter started for each rebuild: its module is imported
    without the package's service, values and store (the package roots import their
    names on first use), so that it starts at once; and once it has checked tenants it
    still has not loaded the standard ``sqlite3``, whose SQLite is not the one it reads
    the file with."""
    command = intact.worker_command(store.database.path)
    checked = f"check_share({str(store.database.path)!r}, ['acme', 'globex'])"
    code = command[-2].replace(
        "import main; main(sys.argv[1:])",
        f"import check_share; print(len({checked})); print(' '.join(sorted(sys.modules)))",
    )
    assert code != command[-2]
    done = as_worker([*command[:-2], code], "", tmp_path)

    intact_tenants, modules = done.stdout.splitlines()
    assert intact_tenants == "2"
    loaded = set(modules.split())
    assert intact.WORKER_MODULE in loaded
    assert not [m for m in loaded if m.startswith(NOT_FOR_A_WORKER)], sorted(loaded)


def test_the_workers_path_is_this_process_s_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", "relative", f"a{os.pathsep}b", "/abs/dir"])

    assert intact.module_path().split(os.pathsep) == [str(tmp_path / "relative"), "/abs/dir"]


@pytest.mark.parametrize(
    ("cpu_max", "quota"),
    [("max 100000\n", None), ("200000 100000\n", 2), ("150000 100000", 2), ("5000 100000", 1)],
)
def test_a_container_s_cpu_quota_bounds_the_workers(
    cpu_max: str, quota: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cpu.max").write_text(cpu_max)
    monkeypatch.setattr(intact, "CPU_MAX", tmp_path / "cpu.max")
    monkeypatch.setattr(intact.os, "sched_getaffinity", lambda _: set(range(16)), raising=False)

    assert intact.processes() == (intact.MOST_PROCESSES if quota is None else quota)


def test_without_a_cgroup_the_cores_bound_the_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(intact, "CPU_MAX", tmp_path / "absent")
    monkeypatch.setattr(intact.os, "sched_getaffinity", lambda _: {0, 1, 2}, raising=False)

    assert intact.processes() == 3


def _after_the_check(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch, meanwhile: Any
) -> list[set[str]]:
    """Run ``meanwhile()`` between the workers' check and the rebuild's use of it; the
    tenants each check accepted."""
    accepted: list[set[str]] = []
    real = store.check_intact

    class Recorded:
        def __init__(self, check: IntactCheck) -> None:
            self.check = check
            self.tenants = check.tenants

        def accept(self) -> set[str]:
            accepted.append(self.check.accept())
            return accepted[-1]

    def checked(tenants: Sequence[str]) -> IntactCheck:
        check = real(tenants)
        meanwhile()
        return Recorded(check)

    monkeypatch.setattr(store, "check_intact", checked)
    return accepted


def test_rows_damaged_by_another_connection_after_the_check_are_still_repaired(
    service: MemoryService, store: SQLiteStore, workers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection commits after the workers' snapshots: nothing they found is
    taken on trust, every tenant is rebuilt, and the damage is repaired."""
    before = projection(store)

    damaged: list[int] = []

    def damage() -> None:
        with sqlite3.connect(store.database.path) as other:  # not this store's writer
            changed = other.execute(
                f"UPDATE memories SET confidence = confidence / 2 WHERE rowid = {ITEM}"
            )
            damaged.append(changed.rowcount)

    accepted = _after_the_check(store, monkeypatch, damage)

    service.maintenance.rebuild()

    assert damaged == [1]
    assert accepted == [set()]
    assert projection(store) == before
    assert service.verify_replay().differences == []


def test_rows_damaged_by_another_connection_while_the_workers_read_are_still_repaired(
    service: MemoryService, store: SQLiteStore, workers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit lands after the workers' snapshots but before the check returns: what
    the rebuild compares against is what it read before the workers started."""
    before = projection(store)
    real = intact._run

    def damaged_meanwhile(*args: Any) -> list[list[Any]]:
        found = real(*args)
        with sqlite3.connect(store.database.path) as other:
            other.execute(f"UPDATE memories SET confidence = confidence / 2 WHERE rowid = {ITEM}")
        return found

    monkeypatch.setattr(intact, "_run", damaged_meanwhile)
    accepted = _after_the_check(store, monkeypatch, lambda: None)

    service.maintenance.rebuild()

    assert accepted == [set()]
    assert projection(store) == before
    assert service.verify_replay().differences == []


def test_rows_damaged_through_this_stores_own_writer_after_the_check_are_repaired(
    service: MemoryService, store: SQLiteStore, workers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit of this process's own writer, which appends no event (and moves no
    ``data_version``), still counts: nothing is taken on trust."""
    before = projection(store)
    accepted = _after_the_check(
        store,
        monkeypatch,
        lambda: run(store, f"UPDATE memories SET confidence = confidence / 2 WHERE rowid = {ITEM}"),
    )

    service.maintenance.rebuild()

    assert accepted == [set()]
    assert projection(store) == before
    assert service.verify_replay().differences == []


def test_a_write_after_the_check_leaves_every_tenant_to_the_rebuild(
    service: MemoryService, store: SQLiteStore, workers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write of this process lands in acme after the check: nothing is accepted, and the
    rebuild folds both tenants, the new item included."""
    accepted = _after_the_check(
        store, monkeypatch, lambda: service.write(ACME, body(id="late", content="Late email."))
    )

    assert service.maintenance.rebuild() == 10

    assert accepted == [set()]
    assert "late" in ids(service, "email")
    assert service.verify_replay().differences == []


def test_accepted_tenants_scope_ids_replace_what_the_writer_remembered(
    service: MemoryService, store: SQLiteStore, workers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a swap would: a scope id the writer kept from before (another process rebuilt
    the scope meanwhile, say) is replaced by the stored one, so later writes index into
    the scope searches read."""
    kept = store._batches.scope_ids
    assert kept, "the writes remembered their scopes"
    stored = dict(kept)
    for key in kept:
        kept[key] = 10_000 + kept[key]  # no such scope
    accepted = _after_the_check(store, monkeypatch, lambda: None)

    service.maintenance.rebuild()

    assert accepted == [TENANTS]
    assert {key: kept[key] for key in stored} == stored
    service.write(ACME, body(id="late", content="Late email."))
    assert "late" in ids(service, "email")
    assert service.verify_replay().differences == []


def repaired_without_workers(
    service: MemoryService,
    store: SQLiteStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> IntactCheck:
    """Damage an item's row, rebuild with the store's warnings captured and find it
    repaired; the check the rebuild got."""
    made = checks(store, monkeypatch)
    before = projection(store)
    run(store, f"UPDATE memories SET confidence = confidence / 2 WHERE rowid = {ITEM}")

    with caplog.at_level(logging.WARNING, logger="governed_memory.store"):
        assert service.maintenance.rebuild() == 9

    assert projection(store) == before
    return made[0]


def test_workers_that_fail_leave_every_tenant_to_the_rebuild(
    service: MemoryService,
    store: SQLiteStore,
    workers: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def refused(self: object) -> None:
        raise OSError("no process for you")

    monkeypatch.setattr(intact._Worker, "__enter__", refused)

    made = repaired_without_workers(service, store, monkeypatch, caplog)

    assert isinstance(made, NothingIntact)
    assert "checking tenants in worker processes failed (OSError)" in caplog.text
    assert "no process for you" not in caplog.text  # the error's class, never its message


def test_without_the_workers_binding_every_tenant_is_rebuilt_here(
    service: MemoryService,
    store: SQLiteStore,
    workers: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An install without APSW (the binding a worker reads with) starts no worker, which
    would only fail on its import: the warning names what is missing, and the rebuild
    still repairs every tenant."""
    monkeypatch.setattr(intact, "READER_MODULE", "governed_memory_no_such_binding")
    monkeypatch.setattr(intact, "_Worker", None)  # starting one would fail the test

    made = repaired_without_workers(service, store, monkeypatch, caplog)

    assert isinstance(made, NothingIntact)
    assert "governed_memory_no_such_binding is not installed" in caplog.text


#: A worker that reads its first share and then says nothing for 30 s.
HANG = "import sys, time; sys.stdin.readline(); time.sleep(30)"


def _scripted_workers(
    monkeypatch: pytest.MonkeyPatch, scripts: list[str]
) -> list[subprocess.Popen[str]]:
    """Workers started from now on run ``scripts`` (``python -c``), one each, in order;
    the processes started. Any still running is waited for up to a minute at the end."""
    started: list[subprocess.Popen[str]] = []
    real = subprocess.Popen

    def scripted(command: list[str], **options: Any) -> subprocess.Popen[str]:
        started.append(real([sys.executable, "-c", scripts[len(started)]], **options))
        return started[-1]

    monkeypatch.setattr(intact.subprocess, "Popen", scripted)
    monkeypatch.setattr(intact, "WORKER_EXIT_SECONDS", 60)
    return started


def test_workers_that_do_not_answer_in_time_are_stopped_and_the_rebuild_does_the_work(
    service: MemoryService,
    store: SQLiteStore,
    workers: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # each reads its first share, then answers nothing for 30 s (nor ends at the end of
    # its input): one not killed at once would end by itself, with code 0
    started = _scripted_workers(monkeypatch, [HANG, HANG])
    monkeypatch.setattr(intact, "ANSWER_SECONDS", 0.2)
    made = checks(store, monkeypatch)
    before = projection(store)
    run(store, f"UPDATE memories SET confidence = confidence / 2 WHERE rowid = {ITEM}")

    with caplog.at_level(logging.WARNING, logger="governed_memory.store"):
        assert service.maintenance.rebuild() == 9

    assert isinstance(made[0], NothingIntact)
    assert "checking tenants in worker processes failed (TimeoutError)" in caplog.text
    assert len(started) == 2
    assert [worker.returncode for worker in started] == [-9, -9]  # killed, not waited for
    assert projection(store) == before


def test_a_worker_that_fails_stops_the_others_at_once(
    service: MemoryService,
    store: SQLiteStore,
    workers: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first worker is silent (well within its time), the second ends without an
    answer: the failure is seen while the first is still busy, and the first is killed."""
    started = _scripted_workers(
        monkeypatch, [HANG, "import sys; sys.stdin.readline(); sys.exit(5)"]
    )
    made = checks(store, monkeypatch)

    with caplog.at_level(logging.WARNING, logger="governed_memory.store"):
        assert service.maintenance.rebuild() == 9

    assert isinstance(made[0], NothingIntact)
    assert "checking tenants in worker processes failed (RuntimeError)" in caplog.text
    assert [worker.returncode for worker in started] == [-9, 5]  # the silent one killed


def _started(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every worker the store tries to start from now on (none does start)."""
    started: list[object] = []

    def refused(self: object) -> None:
        started.append(self)
        raise OSError("not in this test")

    monkeypatch.setattr(intact._Worker, "__enter__", refused)
    return started


def _rebuilt_without_workers(
    service: MemoryService, store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rebuild does all the work, no worker started and nothing found ahead."""
    started = _started(monkeypatch)
    made = checks(store, monkeypatch)

    assert service.maintenance.rebuild() == 9

    assert started == []
    assert isinstance(made[0], NothingIntact)


def test_a_small_log_is_checked_by_the_rebuild_itself(
    service: MemoryService, store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _rebuilt_without_workers(service, store, monkeypatch)


def test_a_frozen_program_checks_in_the_rebuild_itself(
    service: MemoryService, store: SQLiteStore, workers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frozen program's interpreter cannot run this module: no worker is started."""
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    _rebuilt_without_workers(service, store, monkeypatch)


def test_an_empty_projection_is_loaded_without_starting_workers(
    service: MemoryService, store: SQLiteStore, workers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As after ``gmem import``: no tenant can be intact, so no worker is started."""
    before = projection(store)
    run(
        store,
        "DELETE FROM postings",
        "DELETE FROM search_docs",
        "DELETE FROM memories",
    )

    _rebuilt_without_workers(service, store, monkeypatch)

    assert projection(store) == before


def test_a_reindex_checks_nothing_ahead(
    service: MemoryService, store: SQLiteStore, workers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reindex opens every item's content again: nothing can be found intact ahead."""
    made = checks(store, monkeypatch)

    service.maintenance.reindex()

    assert made == []
